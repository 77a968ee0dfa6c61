// The mlbench-datagen recipes of the sequence/tabular benchmarks (mnist,
// wikitext2, ml20m, wmt16): tiny size generated through ensure_dataset, read
// back with the benchmarks' own readers, deterministic for a seed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "pipeline/formats/idx.h"
#include "pipeline/formats/ratings.h"
#include "pipeline/formats/text_corpus.h"
#include "datasets/recipe.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace mlbench;

namespace {

class Recipes : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = std::make_unique<mlbench::testing_support::TempDir>("seq_recipes");
    root_ = tmp_->path();
  }

  fs::path make(const std::string& recipe, std::uint64_t seed, const std::string& tag = "") {
    const auto* r = datasets::find_recipe(recipe);
    EXPECT_NE(r, nullptr) << recipe;
    datasets::RecipeOptions o;
    o.seed = seed;
    o.size = "tiny";
    o.threads = 2;
    o.show_progress = false;
    const fs::path dir = root_ / (recipe + "-tiny" + tag);
    EXPECT_TRUE(datasets::ensure_dataset(*r, dir, o));
    EXPECT_TRUE(datasets::is_complete(dir));
    return dir;
  }

  static std::string slurp(const fs::path& f) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::unique_ptr<mlbench::testing_support::TempDir> tmp_;
  fs::path root_;
};

}  // namespace

TEST_F(Recipes, MnistIsReadableIdxWithAllDigits) {
  const auto dir = make("mnist", 1);
  const auto train = pipeline::read_mnist(dir, "train");
  EXPECT_EQ(train.count, 256);
  EXPECT_EQ(train.rows, 28);
  const auto test = pipeline::read_mnist(dir, "t10k");
  EXPECT_EQ(test.count, 64);
  std::vector<int> per_digit(10);
  for (auto l : train.labels) ++per_digit.at(l);
  for (int d = 0; d < 10; ++d) EXPECT_GT(per_digit[d], 5) << d;
  // Strokes on a dark background: mostly zeros, some full-intensity pixels.
  long zeros = 0, bright = 0;
  for (auto p : train.pixels) zeros += p == 0, bright += p > 200;
  EXPECT_GT(zeros, static_cast<long>(train.pixels.size() / 2));
  EXPECT_GT(bright, static_cast<long>(train.pixels.size() / 20));
  const auto again = make("mnist", 1, "-again");
  EXPECT_EQ(slurp(dir / "train-images-idx3-ubyte"), slurp(again / "train-images-idx3-ubyte"));
}

TEST_F(Recipes, Wikitext2IsZipfianInWikitextLayout) {
  const auto dir = make("wikitext2", 2);
  const auto c = pipeline::read_wikitext(dir);
  EXPECT_GT(c.train.size(), 20000u);
  EXPECT_FALSE(c.valid.empty());
  EXPECT_FALSE(c.test.empty());
  EXPECT_LE(c.vocab.size(), 520);
  std::map<std::int32_t, long> freq;
  for (auto id : c.train) ++freq[id];
  std::vector<long> counts;
  for (auto& [id, n] : freq) counts.push_back(n);
  std::sort(counts.rbegin(), counts.rend());
  EXPECT_GT(counts[0], 10 * counts[50]);  // heavy head
  EXPECT_NE(slurp(dir / "train.txt"), slurp(make("wikitext2", 3, "-other") / "train.txt"));
  EXPECT_EQ(slurp(dir / "train.txt"), slurp(make("wikitext2", 2, "-same") / "train.txt"));
}

TEST_F(Recipes, Ml20mRatingsHavePowerLawPopularity) {
  const auto dir = make("ml20m", 4);
  const auto r = pipeline::read_ratings(dir);
  EXPECT_EQ(r.num_users, 100);
  EXPECT_LE(r.num_items, 200);
  EXPECT_GE(r.users.size(), 100u * 20);
  std::map<std::int32_t, long> pop;
  for (auto i : r.items) ++pop[i];
  std::vector<long> counts;
  for (auto& [i, n] : pop) counts.push_back(n);
  std::sort(counts.rbegin(), counts.rend());
  EXPECT_GT(counts.front(), 5 * counts[counts.size() / 2]);
  EXPECT_EQ(slurp(dir / "ratings.csv").rfind("userId,movieId,rating,timestamp\n", 0), 0u);
}

TEST_F(Recipes, Wmt16IsAParallelCorpus) {
  const auto dir = make("wmt16", 5);
  pipeline::ParallelCorpusOptions o;
  const auto c = pipeline::read_parallel_corpus(dir, o);
  EXPECT_EQ(c.source.size(), 500u);
  EXPECT_EQ(c.skipped_empty, 0);
  o.prefix = "newstest2014";
  EXPECT_EQ(pipeline::read_parallel_corpus(dir, o).source.size(), 100u);
}
