// The readers of pipeline/formats used by the sequence/tabular benchmarks:
// IDX, wikitext, parallel-corpus and ratings.csv (good and bad input).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "pipeline/formats/idx.h"
#include "pipeline/formats/ratings.h"
#include "pipeline/formats/text_corpus.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace mlbench::pipeline;  // the dataset readers

namespace {

// The shared scratch directory (tests/support/temp_dir.h), plus a file writer.
class TempDir : public mlbench::testing_support::TempDir {
 public:
  TempDir() : mlbench::testing_support::TempDir("formats") {}
  fs::path write(const std::string& name, const std::string& content) const {
    std::ofstream(path() / name, std::ios::binary) << content;
    return path() / name;
  }
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
