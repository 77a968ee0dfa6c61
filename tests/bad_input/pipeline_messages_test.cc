// The dataset loader's root (issue 16): a dataset's top folder given as --data
// says which folder was probably meant.
#include <gtest/gtest.h>

#include <fstream>

#include "pipeline/source.h"
#include "tests/support/temp_dir.h"

namespace mlbench::pipeline {
namespace {

TEST(PipelineMessages, TopFolderOfADatasetSuggestsItsTrainSplit) {
  testing_support::TempDir tmp("root");
  for (const char* split : {"train", "val"}) {
    std::filesystem::create_directories(tmp.path() / split / "n0");
    std::ofstream(tmp.path() / split / "n0" / "a.jpg") << "x";
  }
  try {
    ImageFolderReader reader(tmp.path());
    FAIL() << "no error";
  } catch (const DataError& e) {
    const std::string want =
        "no class directories under " + tmp.path().string() + "; did you mean " + (tmp.path() / "train").string() + "?";
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
  ImageFolderReader train(tmp.path() / "train");  // the hint's folder works
  EXPECT_EQ(train.size(), 1u);
}

}  // namespace
}  // namespace mlbench::pipeline
