// The dataset loader's root (docs/reliability.md): a dataset's top folder given as --data
// says which folder was probably meant.
#include <gtest/gtest.h>

#include <fstream>

#include "pipeline/options.h"
#include "pipeline/sample_stages.h"
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

TEST(PipelineMessages, DecodeGpuIsRefusedWhereItCannotWork) {
  core::BenchOptions bench;
  PipelineOptions o;
  o.decode = "gpu";
  EXPECT_TRUE(make_loader_config(bench, o).transform.decode_on_device);
  auto refused = [&](const std::string& want) {
    try {
      make_loader_config(bench, o);
      ADD_FAILURE() << "no error, expected: " << want;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  o.fetch_only = true;
  refused("--fetch-only decodes nothing");
  o.fetch_only = false;
  o.coordinated = 2;
  o.group = "g";
  refused("--decode gpu and --coordinated cannot be combined");
}

// The time flags of the remedies printed CLI11's "Value abc not in range 0.001000 to 3600.000000".
TEST(PipelineMessages, TheRemediesTimeFlagsSayWhatIsWrongByName) {
  for (const char* flag : {"--peer-timeout", "--peer-join-timeout", "--peer-linger", "--coordinated-timeout",
                           "--coordinated-join-timeout"}) {
    for (const char* value : {"abc", "-1"}) {
      core::BenchCli cli("b", "b", {});
      PipelineOptions o;
      add_pipeline_flags(cli, o);
      const char* argv[] = {"b", flag, value};
      ::testing::internal::CaptureStderr();
      const auto rc = cli.parse(3, argv, {});
      const std::string err = ::testing::internal::GetCapturedStderr();
      ASSERT_TRUE(rc.has_value()) << flag << " " << value;
      EXPECT_EQ(err.rfind(std::string("b: error: ") + flag + " must be", 0), 0u) << err;
      EXPECT_EQ(err.find("not in range"), std::string::npos) << err;
    }
  }
}

TEST(PipelineMessages, DecodeGpuNeedsAJpegDataset) {
  // Decoded images in memory (raw HWC pixels): nothing for nvJPEG to decode.
  std::vector<Bytes> images{Bytes(4 * 4 * 3, 7)};
  auto source = std::make_shared<DecodedTensorSource>(4, 4, 3, std::move(images), std::vector<std::int64_t>{0});
  StageConfig c;
  c.transform.decode_on_device = true;
  try {
    SampleStages stages(source, c, nullptr);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--decode gpu decodes JPEG images"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mlbench::pipeline
