// Reliability tests of the one dataset scanner (docs/reliability.md, fault 9): symbolic link
// loops in a data folder are a DataError naming the entry (every benchmark then
// says so in one line), never an uncaught filesystem_error (an abort).
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "pipeline/source.h"
#include "tests/support/temp_dir.h"

namespace mlbench::pipeline {
namespace {

namespace fs = std::filesystem;
using testing_support::TempDir;

fs::path folder_with_one_image(const fs::path& root) {
  fs::create_directories(root / "c0");
  std::ofstream(root / "c0" / "0.jpg") << "not decoded by the scan";
  return root;
}

// The DataError's message, or "" when the scan passed or threw something else.
std::string scan_error(const fs::path& root) {
  try {
    ImageFolderReader reader(root);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(DatasetScanFaults, SymlinkLoopAmongClassesIsADataErrorNamingIt) {
  TempDir tmp("scan_faults");
  const fs::path root = folder_with_one_image(tmp.path() / "train");
  fs::create_symlink(root / "loop", root / "loop");  // loop -> loop
  const std::string what = scan_error(root);
  EXPECT_NE(what.find((root / "loop").string()), std::string::npos) << what;
  EXPECT_NE(what.find("symbolic link loop"), std::string::npos) << what;
}

TEST(DatasetScanFaults, SymlinkLoopAmongImagesIsADataErrorNamingIt) {
  TempDir tmp("scan_faults");
  const fs::path root = folder_with_one_image(tmp.path() / "train");
  fs::create_symlink(root / "c0" / "a.jpg", root / "c0" / "b.jpg");
  fs::create_symlink(root / "c0" / "b.jpg", root / "c0" / "a.jpg");
  const std::string what = scan_error(root);
  EXPECT_NE(what.find("symbolic link loop"), std::string::npos) << what;
}

TEST(DatasetScanFaults, ClassFolderThatIsTheRootIsALoop) {
  TempDir tmp("scan_faults");
  const fs::path root = folder_with_one_image(tmp.path() / "train");
  fs::create_directory_symlink(root, root / "self");
  const std::string what = scan_error(root);
  EXPECT_NE(what.find((root / "self").string()), std::string::npos) << what;
  EXPECT_NE(what.find("loop"), std::string::npos) << what;
}

TEST(DatasetScanFaults, DanglingLinkIsSkippedAndLinkedImagesCount) {
  TempDir tmp("scan_faults");
  const fs::path root = folder_with_one_image(tmp.path() / "train");
  fs::create_symlink(root / "c0" / "gone.jpg", root / "c0" / "dangling.jpg");
  fs::create_symlink(root / "c0" / "0.jpg", root / "c0" / "1.jpg");
  ImageFolderReader reader(root);
  EXPECT_EQ(reader.size(), 2u);
}

}  // namespace
}  // namespace mlbench::pipeline
