// mlbench-datagen's reuse of a complete dataset (docs/reliability.md, defect 21): what
// differs between the kept folder and the one asked for.
#include <gtest/gtest.h>

#include "datasets/recipe.h"
#include "tests/support/temp_dir.h"

namespace mlbench::datasets {
namespace {

TEST(DatasetsMessages, AKeptDatasetSaysHowItDiffersFromTheOneAsked) {
  testing_support::TempDir tmp("marker");
  RecipeOptions made;
  made.size = "tiny";
  made.seed = 0;
  write_marker(tmp.path(), "mnist", made);
  EXPECT_EQ(marker_differences(tmp.path(), "mnist", made), "");
  RecipeOptions asked = made;
  asked.size = "small";
  asked.seed = 7;
  EXPECT_EQ(marker_differences(tmp.path(), "mnist", asked), "size tiny, seed 0 where size small, seed 7 was asked");
  EXPECT_EQ(marker_differences(tmp.path(), "wmt16", made), "recipe mnist where recipe wmt16 was asked");
}

}  // namespace
}  // namespace mlbench::datasets
