// Torch-free parts of the sequence/tabular/RL benchmarks: CartPole dynamics
// against hand-computed steps, REINFORCE returns, loss scaling policy, and the
// IDX, wikitext, parallel-corpus and ratings.csv readers (good and bad input).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "benchmarks/common/cartpole.h"
#include "pipeline/formats/idx.h"
#include "benchmarks/common/loss_scaler.h"
#include "pipeline/formats/ratings.h"
#include "pipeline/formats/text_corpus.h"

namespace fs = std::filesystem;
using namespace mlbench::bench;     // CartPole, REINFORCE, loss scaling
using namespace mlbench::pipeline;  // the dataset readers

namespace {

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("mlbench_seq_data_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& content) const {
    std::ofstream(path_ / name, std::ios::binary) << content;
    return path_ / name;
  }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::string idx_bytes(std::uint8_t type, std::vector<std::uint32_t> dims, std::size_t data_bytes) {
  std::string s{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (auto d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((d >> shift) & 0xff));
  }
  for (std::size_t i = 0; i < data_bytes; ++i) s.push_back(static_cast<char>(i % 251));
  return s;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// From rest, pushing right: temp = F / (M + m) = 10 / 1.1; theta_acc =
// -temp / (l (4/3 - m / (M + m))) = -14.634146; x_acc = temp - m l theta_acc / (M + m) = 9.756098.
TEST(CartPole, FirstStepFromRestMatchesHandComputation) {
  const auto s = cartpole_dynamics({0, 0, 0, 0}, 1);
  EXPECT_DOUBLE_EQ(s[0], 0.0);
  EXPECT_NEAR(s[1], 0.02 * 9.7560976, 1e-7);
  EXPECT_DOUBLE_EQ(s[2], 0.0);
  EXPECT_NEAR(s[3], 0.02 * -14.6341463, 1e-7);
}

// Euler: positions move with the previous velocities; at theta = 0 the accelerations repeat.
TEST(CartPole, SecondStepUsesPreviousVelocities) {
  const auto s = cartpole_dynamics(cartpole_dynamics({0, 0, 0, 0}, 1), 1);
  EXPECT_NEAR(s[0], 0.02 * 0.19512195, 1e-8);
  EXPECT_NEAR(s[1], 0.39024390, 1e-7);
  EXPECT_NEAR(s[2], 0.02 * -0.29268293, 1e-8);
  EXPECT_NEAR(s[3], -0.58536585, 1e-7);
}

// Pole leaning 0.1 rad, pushing left: sin = 0.0998334, cos = 0.9950042, temp = -9.0909091,
// theta_acc = (9.8 sin - cos temp) / (0.5 (4/3 - 0.1 cos^2 / 1.1)) = 16.124167,
// x_acc = temp - 0.05 theta_acc cos / 1.1 = -9.8201789.
TEST(CartPole, LeaningPolePushedLeft) {
  const auto s = cartpole_dynamics({0.5, 0.0, 0.1, 0.0}, 0);
  EXPECT_DOUBLE_EQ(s[0], 0.5);
  EXPECT_NEAR(s[1], 0.02 * -9.8201789, 1e-6);
  EXPECT_DOUBLE_EQ(s[2], 0.1);
  EXPECT_NEAR(s[3], 0.02 * 16.124167, 1e-6);
}

TEST(CartPole, FailsPastTwelveDegreesAndAtStepCap) {
  CartPole env(1);
  env.reset_to({0, 0, 0.2094, 0.5});  // just under 12 degrees, falling further
  auto r = env.step(1);
  EXPECT_TRUE(r.done);
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.reward, 1.0);
  env.reset_to({2.39, 1.0, 0, 0});
  EXPECT_TRUE(env.step(1).failed);  // cart leaves +-2.4

  CartPoleParams p;
  p.max_steps = 3;
  CartPole capped(1, p);
  capped.reset_to({0, 0, 0, 0});
  int action = 0;
  EXPECT_FALSE(capped.step(action ^= 1).done);
  EXPECT_FALSE(capped.step(action ^= 1).done);
  auto last = capped.step(action ^= 1);
  EXPECT_TRUE(last.done);
  EXPECT_FALSE(last.failed);
}

TEST(CartPole, ResetIsSeededAndSmall) {
  CartPole a(7), b(7), c(8);
  const auto sa = a.reset();
  const auto sb = b.reset();
  const auto sc = c.reset();
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
  for (double v : sa) EXPECT_LE(std::abs(v), 0.05);
  EXPECT_THROW(cartpole_dynamics({0, 0, 0, 0}, 2), std::invalid_argument);
}

TEST(Reinforce, DiscountedReturns) {
  const auto raw = discounted_returns({1, 1, 1}, 0.5, false);
  ASSERT_EQ(raw.size(), 3u);
  EXPECT_DOUBLE_EQ(raw[2], 1.0);
  EXPECT_DOUBLE_EQ(raw[1], 1.5);
  EXPECT_DOUBLE_EQ(raw[0], 1.75);
  // Standardised with the sample sd: mean 1.41667, sd 0.381881.
  const auto z = discounted_returns({1, 1, 1}, 0.5, true);
  EXPECT_NEAR(z[0], (1.75 - 1.4166667) / 0.3818813, 1e-6);
  EXPECT_NEAR(z[2], (1.0 - 1.4166667) / 0.3818813, 1e-6);
}

TEST(LossScaler, BacksOffOnOverflowAndGrowsAfterInterval) {
  LossScaler s(1024.0, 3);
  EXPECT_FALSE(s.update(true));
  EXPECT_DOUBLE_EQ(s.scale(), 512.0);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_TRUE(s.update(false));
  EXPECT_TRUE(s.update(false));
  EXPECT_DOUBLE_EQ(s.scale(), 512.0);
  EXPECT_TRUE(s.update(false));
  EXPECT_DOUBLE_EQ(s.scale(), 1024.0);
}

TEST(IdxReader, ParsesMnistLayout) {
  TempDir dir;
  dir.write("train-images-idx3-ubyte", idx_bytes(0x08, {3, 28, 28}, 3 * 784));
  dir.write("train-labels-idx1-ubyte", idx_bytes(0x08, {3}, 3));
  const auto set = read_mnist(dir.path());
  EXPECT_EQ(set.count, 3);
  EXPECT_EQ(set.rows, 28);
  EXPECT_EQ(set.cols, 28);
  ASSERT_EQ(set.pixels.size(), 3u * 784);
  EXPECT_EQ(set.pixels[300], 300 % 251);
  EXPECT_EQ(set.labels.size(), 3u);
}

TEST(IdxReader, FindsTorchvisionRawFolder) {
  TempDir dir;
  fs::create_directories(dir.path() / "MNIST" / "raw");
  dir.write("MNIST/raw/t10k-images-idx3-ubyte", idx_bytes(0x08, {2, 28, 28}, 2 * 784));
  dir.write("MNIST/raw/t10k-labels-idx1-ubyte", idx_bytes(0x08, {2}, 2));
  EXPECT_EQ(read_mnist(dir.path(), "t10k").count, 2);
}

TEST(IdxReader, RejectsBadFilesWithTheirName) {
  TempDir dir;
  auto truncated = dir.write("a", idx_bytes(0x08, {3, 28, 28}, 100));
  EXPECT_NE(error_of([&] { read_idx_file(truncated); }).find(truncated.string() + ": IDX header promises 2352"),
            std::string::npos);
  auto gz = dir.write("b", std::string("\x1f\x8b\x08\x00", 4));
  EXPECT_NE(error_of([&] { read_idx_file(gz); }).find("gzip-compressed"), std::string::npos);
  auto floats = dir.write("c", idx_bytes(0x0D, {1}, 4));
  EXPECT_NE(error_of([&] { read_idx_file(floats); }).find("not supported"), std::string::npos);
  dir.write("train-images-idx3-ubyte", idx_bytes(0x08, {3, 28, 28}, 3 * 784));
  dir.write("train-labels-idx1-ubyte", idx_bytes(0x08, {2}, 2));
  EXPECT_NE(error_of([&] { read_mnist(dir.path()); }).find("3 images but"), std::string::npos);
  dir.write("train-labels-idx1-ubyte.gz", "x");
  fs::remove(dir.path() / "train-labels-idx1-ubyte");
  EXPECT_NE(error_of([&] { read_mnist(dir.path()); }).find("gunzip"), std::string::npos);
}

TEST(TextCorpus, Utf8AndTokens) {
  EXPECT_TRUE(valid_utf8_text("plain ascii"));
  EXPECT_TRUE(valid_utf8_text("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(valid_utf8_text(std::string("nul\0byte", 8)));
  EXPECT_FALSE(valid_utf8_text("bad \xff byte"));
  EXPECT_FALSE(valid_utf8_text("cut \xe2\x82"));
  EXPECT_FALSE(valid_utf8_text("\xc0\xaf"));  // overlong
  const auto toks = split_tokens("  a  bb\tc \r");
  ASSERT_EQ(toks.size(), 3u);
  EXPECT_EQ(toks[1], "bb");
}

TEST(TextCorpus, WikitextLayoutWithEos) {
  TempDir dir;
  dir.write("train.txt", " = Title = \n\n the cat sat \n");
  dir.write("valid.txt", "a dog\n");
  const auto c = read_wikitext(dir.path());
  // "=", "Title", "=", <eos>, <eos>, the, cat, sat, <eos>
  ASSERT_EQ(c.train.size(), 9u);
  const auto eos = c.vocab.find("<eos>");
  EXPECT_EQ(c.train[3], eos);
  EXPECT_EQ(c.train[4], eos);
  EXPECT_EQ(c.train[0], c.train[2]);
  EXPECT_EQ(c.valid.size(), 3u);
  EXPECT_EQ(c.vocab.size(), 8);  // <eos> = Title the cat sat a dog
  EXPECT_TRUE(c.test.empty());
}

TEST(TextCorpus, OriginalArchiveNamesAndErrors) {
  TempDir dir;
  dir.write("wiki.train.tokens", "x y\n");
  EXPECT_EQ(read_wikitext(dir.path()).train.size(), 3u);
  TempDir empty;
  EXPECT_NE(error_of([&] { read_wikitext(empty.path()); }).find("no train.txt"), std::string::npos);
  TempDir bad;
  bad.write("train.txt", "ok line\nsecond ok\nbroken \xff here\n");
  EXPECT_NE(error_of([&] { read_wikitext(bad.path()); }).find("train.txt:3: not valid UTF-8"), std::string::npos);
}

TEST(ParallelCorpus, SharedVocabularyCapAndSpecials) {
  const auto c = build_parallel_corpus({"a b a", "", "c a"}, {"x a", "y", "b"}, 6);
  EXPECT_EQ(c.vocab.size(), 6);  // 4 specials + the 2 most frequent: a (4), then b (2)
  EXPECT_EQ(c.vocab.find("<pad>"), kPad);
  EXPECT_EQ(c.vocab.find("</s>"), kEos);
  EXPECT_EQ(c.vocab.find("a"), 4);
  EXPECT_EQ(c.vocab.find("b"), 5);
  EXPECT_EQ(c.skipped_empty, 1);
  ASSERT_EQ(c.source.size(), 2u);
  EXPECT_EQ(c.source[0], (std::vector<std::int32_t>{4, 5, 4}));
  EXPECT_EQ(c.source[1], (std::vector<std::int32_t>{kUnk, 4}));  // c is beyond the cap
  EXPECT_EQ(c.target[0], (std::vector<std::int32_t>{kUnk, 4}));
  EXPECT_EQ(c.unknown_tokens, 2);  // x and c; the skipped pair's y is not counted
}

TEST(ParallelCorpus, FilesMustHaveEqualLineCounts) {
  TempDir dir;
  dir.write("train.en", "a b\nc d\n");
  dir.write("train.de", "x y\n");
  const auto msg = error_of([&] { read_parallel_corpus(dir.path(), {}); });
  EXPECT_NE(msg.find("train.en has 2 lines but"), std::string::npos) << msg;
  dir.write("train.de", "x y\nz\n");
  const auto c = read_parallel_corpus(dir.path(), {});
  EXPECT_EQ(c.source.size(), 2u);
  ParallelCorpusOptions one;
  one.max_pairs = 1;
  EXPECT_EQ(read_parallel_corpus(dir.path(), one).source.size(), 1u);
}

TEST(Ratings, ParsesMovieLensCsvWithDenseIds) {
  const auto r = parse_ratings_csv("userId,movieId,rating,timestamp\r\n1,2,3.5,1112486027\r\n1,29,3.5,1112484676\n\n7,2,4,1\n",
                                   "ratings.csv");
  EXPECT_EQ(r.users, (std::vector<std::int32_t>{0, 0, 1}));
  EXPECT_EQ(r.items, (std::vector<std::int32_t>{0, 1, 0}));
  EXPECT_EQ(r.num_users, 2);
  EXPECT_EQ(r.num_items, 2);
  EXPECT_EQ(parse_ratings_csv("1,2,3,4\n", "x").users.size(), 1u);  // no header
}

TEST(Ratings, MalformedLinesNameFileAndLine) {
  EXPECT_EQ(error_of([] { parse_ratings_csv("userId,movieId,rating,timestamp\n1,2,3.5,10\n1,2,3.5\n", "r.csv"); }),
            "r.csv:3: expected 4 comma-separated fields (userId,movieId,rating,timestamp), got 3");
  EXPECT_EQ(error_of([] { parse_ratings_csv("1,2,3,4,5\n", "r.csv"); }),
            "r.csv:1: expected 4 comma-separated fields (userId,movieId,rating,timestamp), got more than 4");
  EXPECT_EQ(error_of([] { parse_ratings_csv("1,2,3,4\n1,abc,3,4\n", "r.csv"); }), "r.csv:2: movieId 'abc' is not an integer");
  EXPECT_EQ(error_of([] { parse_ratings_csv("1,2,x,4\n", "r.csv"); }), "r.csv:1: rating 'x' is not a number");
  EXPECT_EQ(error_of([] { parse_ratings_csv("1,2,3,\n", "r.csv"); }), "r.csv:1: timestamp '' is not an integer");
  TempDir dir;
  dir.write("ratings.csv", "userId,movieId,rating,timestamp\n");
  EXPECT_NE(error_of([&] { read_ratings(dir.path()); }).find("no ratings"), std::string::npos);
}
