// Tar shards (pipeline/shards.h) and mlbench-datagen shards (datasets/shard_writer.h):
// the writer is deterministic and round-trips an ImageFolder; the planned epoch order
// (lanes, shuffle buffer); a loader over shards; and bad shards (docs/reliability.md):
// a corrupt header, a truncated shard, a sample without its label, a pattern that
// matches nothing, each one line.
#include <archive.h>
#include <archive_entry.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "datasets/shard_writer.h"
#include "pipeline/loader.h"
#include "pipeline/options.h"
#include "pipeline/relative_path.h"
#include "pipeline/shards.h"
#include "tests/support/jpeg_folder.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace mlbench::pipeline;
using mlbench::testing_support::TempDir;

namespace {

std::string read_all(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// 3 classes x 5 JPEGs (~2.5 KB each: 4.6 KB in a shard) into shards of at most 16 KiB: 3 samples each.
mlbench::datasets::ShardWriteResult make_shards(const fs::path& folder, const fs::path& out, std::uint64_t seed = 7,
                                                std::uint64_t shard_bytes = 16 << 10) {
  fs::create_directories(out);
  return mlbench::datasets::write_shards(
      {.from = folder, .out = out, .shard_bytes = shard_bytes, .seed = seed, .show_progress = false});
}

// A plain tar of `members` (name, content) written with libarchive, as another tool would.
void write_tar(const fs::path& file, const std::vector<std::pair<std::string, std::string>>& members) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_open_filename(a, file.c_str());
  for (const auto& [name, data] : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_write_header(a, e);
    archive_write_data(a, data.data(), data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

// The multiset of (bytes, label) of a source's items.
std::multiset<std::pair<std::string, std::int64_t>> contents(const ItemSource& s) {
  std::multiset<std::pair<std::string, std::int64_t>> out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    Bytes b;
    s.fetch(i, b);
    out.emplace(std::string(b.begin(), b.end()), s.label(i));
  }
  return out;
}

// The shards test fixture: a JPEG folder and its shards.
class TarShards : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = mlbench::testing_support::temp_dir_for_current_test("shards");
    folder_ = mlbench::testing_support::make_jpeg_folder(tmp_->path() / "folder", 3, 5);
    shards_ = tmp_->path() / "shards";
    written_ = make_shards(folder_, shards_);
  }
  void TearDown() override {
    if (HasFailure()) tmp_->keep();
  }
  fs::path shard(int k) const { return shards_ / fmt::format("shard-{:06d}.tar", k); }

  std::unique_ptr<TempDir> tmp_;
  fs::path folder_, shards_;
  mlbench::datasets::ShardWriteResult written_;
};

TEST_F(TarShards, DatagenIsDeterministicAndRoundTripsTheFolder) {
  ASSERT_EQ(written_.samples, 15u);
  ASSERT_GT(written_.shards, 2u);
  EXPECT_EQ(written_.classes, 3u);
  // Twice: the same bytes, file for file.
  const fs::path again = tmp_->path() / "again";
  make_shards(folder_, again);
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(shards_)) {
    ++files;
    EXPECT_EQ(read_all(e.path()), read_all(again / e.path().filename())) << e.path();
  }
  EXPECT_EQ(files, written_.shards + 2);  // the shards, classes.txt, shards.shards
  EXPECT_EQ(read_all(shards_ / "classes.txt"), "c0\nc1\nc2\n");
  // Every shard within the size asked for; members of fixed metadata.
  for (std::size_t k = 0; k < written_.shards; ++k) EXPECT_LE(fs::file_size(shard(static_cast<int>(k))), 16u << 10);

  // Every item's bytes and label are the folder's, through the list, a glob and one .tar.
  const ImageFolderReader folder(folder_);
  const TarShardSource listed((shards_ / "shards.shards").string());
  EXPECT_EQ(listed.size(), 15u);
  EXPECT_EQ(listed.shards().size(), written_.shards);
  EXPECT_EQ(listed.class_count(), 3u);
  EXPECT_EQ(listed.skipped_samples(), 0u);
  EXPECT_EQ(contents(listed), contents(folder));
  const TarShardSource globbed((shards_ / "*.tar").string());
  EXPECT_EQ(globbed.fingerprint(), listed.fingerprint());
  EXPECT_NE(listed.fingerprint(), folder.fingerprint());
  const TarShardSource one(shard(0).string());
  EXPECT_LT(one.size(), 15u);
  EXPECT_EQ(one.describe(0), shard(0).string() + ":" + "00000000.jpg");

  // Another seed: the same items in another order.
  const fs::path other = tmp_->path() / "other";
  make_shards(folder_, other, 8);
  EXPECT_NE(read_all(other / "shard-000000.tar"), read_all(shard(0)));
  EXPECT_EQ(contents(TarShardSource((other / "shards.shards").string())), contents(folder));
}

TEST_F(TarShards, ReadsInAnyOrderGiveEachItemsBytes) {
  const TarShardSource s((shards_ / "shards.shards").string(), {.shuffle_buffer = 2});
  std::vector<Bytes> expected(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) s.fetch(i, expected[i]);  // file order: one pass
  const auto first = s.stats();
  EXPECT_EQ(first.sequential_items, s.size());
  EXPECT_EQ(first.backward_items + first.skipped_ahead, 0u);
  EXPECT_GE(first.shards_opened, written_.shards);
  // Backward, repeated and again forward: the same bytes, each read counted as what it was.
  std::vector<std::size_t> order(s.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::reverse(order.begin(), order.end());
  order.insert(order.end(), {3, 3, 0, 14, 7});
  for (std::size_t i : order) {
    Bytes b;
    s.fetch(i, b);
    EXPECT_EQ(b, expected[i]) << "item " << i;
  }
  const auto after = s.stats();
  EXPECT_GT(after.rewinds + after.backward_items, 0u);
  const nlohmann::json j = s.describe_json();
  EXPECT_EQ(j["kind"], "tar-shards");
  EXPECT_EQ(j["shards"], written_.shards);
  EXPECT_EQ(j["shuffle_buffer"], 2);
  EXPECT_GT(j["bytes_read"].get<std::uint64_t>(), 0u);
}

TEST(ShardOrder, IsAPermutationDeterministicAndNewEachEpoch) {
  const std::vector<std::size_t> shards{7, 13, 5, 9, 11};
  const EpochOrderRequest r{.epoch = 0, .seed = 3, .shuffle = true, .batch_size = 4, .lanes = 3};
  const auto order = shard_epoch_order(shards, r, 6);
  std::vector<std::size_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::size_t> all(45);
  std::iota(all.begin(), all.end(), std::size_t{0});
  EXPECT_EQ(sorted, all);
  EXPECT_EQ(shard_epoch_order(shards, r, 6), order);
  EXPECT_NE(shard_epoch_order(shards, {.epoch = 1, .seed = 3, .shuffle = true, .batch_size = 4, .lanes = 3}, 6), order);
  EXPECT_NE(shard_epoch_order(shards, {.epoch = 0, .seed = 4, .shuffle = true, .batch_size = 4, .lanes = 3}, 6), order);
  // No shuffle: shards in file order, lanes sequential, whatever the buffer.
  const auto plain = lane_streams(shards, {.epoch = 5, .seed = 3, .shuffle = false, .batch_size = 4, .lanes = 1}, 6);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0], all);
}

TEST(ShardOrder, WithoutABufferEachLaneReadsItsShardsInFileOrder) {
  const std::vector<std::size_t> shards{7, 13, 5, 9, 11, 4, 6};
  std::vector<std::size_t> first{0};
  for (std::size_t n : shards) first.push_back(first.back() + n);
  const auto shard_of = [&](std::size_t i) {
    return static_cast<std::size_t>(std::upper_bound(first.begin(), first.end(), i) - first.begin() - 1);
  };
  for (int lanes : {1, 2, 3, 8}) {
    const auto streams =
        lane_streams(shards, {.epoch = 2, .seed = 9, .shuffle = true, .batch_size = 4, .lanes = lanes}, 0);
    ASSERT_EQ(streams.size(), static_cast<std::size_t>(lanes));
    std::set<std::size_t> lane_shards_seen;
    for (const auto& lane : streams) {
      for (std::size_t p = 0; p < lane.size(); ++p) {
        const std::size_t i = lane[p];
        // Each shard whole and in order: an item follows its predecessor, or starts a shard after one ended.
        if (p > 0 && lane[p - 1] + 1 != i) {
          EXPECT_EQ(i, first[shard_of(i)]) << "lanes " << lanes;
          EXPECT_EQ(lane[p - 1] + 1, first[shard_of(lane[p - 1]) + 1]) << "lanes " << lanes;
        }
        if (i == first[shard_of(i)]) {
          EXPECT_TRUE(lane_shards_seen.insert(shard_of(i)).second);
        }
      }
    }
    EXPECT_EQ(lane_shards_seen.size(), shards.size());
  }
}

TEST(ShardOrder, EachLaneIsNeverMoreThanTheBufferAheadOfFileOrder) {
  const std::vector<std::size_t> shards{40, 25, 33, 18, 50, 27};
  for (std::size_t buffer : {1, 5, 20, 100}) {
    const EpochOrderRequest r{.epoch = 1, .seed = 11, .shuffle = true, .batch_size = 8, .lanes = 2};
    const auto files = lane_streams(shards, r, 0);  // each lane's stream as read from its shards
    const auto shuffled = lane_streams(shards, r, buffer);
    for (std::size_t k = 0; k < files.size(); ++k) {
      std::map<std::size_t, std::size_t> in_pos;
      for (std::size_t p = 0; p < files[k].size(); ++p) in_pos[files[k][p]] = p;
      ASSERT_EQ(shuffled[k].size(), files[k].size());
      for (std::size_t p = 0; p < shuffled[k].size(); ++p) {
        ASSERT_TRUE(in_pos.count(shuffled[k][p])) << "lane " << k << " took an item of another lane";
        // An item comes out no earlier than `buffer` places before its place in the stream.
        EXPECT_GE(p + buffer, in_pos[shuffled[k][p]]) << "buffer " << buffer;
      }
      if (buffer > 1) {
        EXPECT_NE(shuffled[k], files[k]) << "buffer " << buffer << ": not shuffled";
      }
    }
  }
}

TEST(ShardOrder, WholeBatchesComeFromOneLaneInTurn) {
  const std::vector<std::size_t> shards{10, 10, 10, 10};
  const EpochOrderRequest r{.epoch = 0, .seed = 1, .shuffle = true, .batch_size = 4, .lanes = 2};
  const auto lanes = lane_streams(shards, r, 3);
  const auto order = shard_epoch_order(shards, r, 3);
  // Lanes of 20 items: batches alternate lane 0, lane 1 for 4 rounds, then each lane's last 4.
  std::vector<std::size_t> expected;
  for (std::size_t b = 0; b < 5; ++b) {
    for (const auto& lane : lanes) expected.insert(expected.end(), lane.begin() + 4 * b, lane.begin() + 4 * b + 4);
  }
  EXPECT_EQ(order, expected);
}

TEST_F(TarShards, ALoaderOverShardsYieldsTheFoldersLabels) {
  const auto folder = std::make_shared<ImageFolderReader>(folder_);
  const auto shards =
      std::make_shared<TarShardSource>((shards_ / "*.tar").string(), TarShardOptions{.shuffle_buffer = 4});
  const auto labels = [](std::shared_ptr<const ItemSource> source, int workers, int io_depth) {
    LoaderConfig c;
    c.batch_size = 4;
    c.workers = workers;
    c.io_depth = io_depth;
    c.transform.image_size = 16;
    c.max_epochs = 2;
    c.drop_last = false;
    c.seed = 5;
    Loader loader(std::move(source), c);
    std::vector<std::multiset<std::int64_t>> per_epoch(2);
    while (auto b = loader.next())
      per_epoch.at(static_cast<std::size_t>(b->epoch)).insert(b->labels.begin(), b->labels.end());
    EXPECT_EQ(loader.stats().corrupt(), 0);
    const nlohmann::json report = loader.to_json();
    return std::make_pair(per_epoch, report);
  };
  const auto [want, folder_report] = labels(folder, 0, 0);
  EXPECT_EQ(folder_report["source"], "image-folder");
  EXPECT_TRUE(folder_report["source_detail"].is_null());
  // Inline, in planned order: every item read by a stream moving forward, each shard once per epoch.
  const auto [inline_labels, inline_report] = labels(shards, 0, 0);
  EXPECT_EQ(inline_labels, want);
  const auto st = shards->stats();
  EXPECT_EQ(st.sequential_items, 30u);
  EXPECT_EQ(st.backward_items + st.skipped_ahead, 0u);
  EXPECT_EQ(st.rewinds, shards->shards().size());
  EXPECT_EQ(inline_report["source"], "tar-shards");
  EXPECT_EQ(inline_report["source_detail"]["kind"], "tar-shards");
  EXPECT_EQ(inline_report["source_detail"]["lanes"], 1);
  // Workers and read-ahead fetch a batch's items out of order and at once: the same labels.
  const auto [threaded, report] = labels(shards, 3, 4);
  EXPECT_EQ(threaded, want);
  EXPECT_EQ(report["source_detail"]["lanes"], 3);
}

TEST_F(TarShards, OpenImageSourcePicksShardsForAShardSpec) {
  PipelineOptions o;
  o.shuffle_buffer = 3;
  EXPECT_TRUE(is_shard_spec("d/*.tar"));
  EXPECT_TRUE(is_shard_spec("d/a.tar"));
  EXPECT_TRUE(is_shard_spec("d/list.shards"));
  EXPECT_FALSE(is_shard_spec("d/train"));
  const auto s = open_image_source((shards_ / "shards.shards").string(), "", o);
  ASSERT_NE(dynamic_cast<const TarShardSource*>(s.get()), nullptr);
  EXPECT_EQ(dynamic_cast<const TarShardSource&>(*s).shuffle_buffer(), 3u);
  EXPECT_NE(dynamic_cast<const ImageFolderReader*>(open_image_source(folder_.string(), "", o).get()), nullptr);
  o.hold_page_cache = true;
  EXPECT_ANY_THROW(open_image_source((shards_ / "*.tar").string(), "", o));
}

// --- Bad shards (label reliability) ---

// The one-line message of the DataError `make` throws.
template <class F>
std::string data_error(F make) {
  try {
    make();
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no DataError";
  return {};
}

TEST_F(TarShards, ACorruptHeaderIsOneLineNamingTheShardAndOffset) {
  // shard 0: sample 0's image header at 0, its data, its .cls header, the .cls block, then sample 1's header.
  Bytes first;
  TarShardSource(shard(0).string()).fetch(0, first);
  const std::uint64_t second_header = mlbench::datasets::shard_sample_bytes(first.size());
  {
    std::fstream f(shard(0), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(second_header) + 100);  // mode, uid, gid, size, mtime, checksum
    const std::string junk(60, 'Z');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  const std::string e = data_error([&] { TarShardSource((shards_ / "*.tar").string()); });
  EXPECT_NE(e.find(shard(0).string()), std::string::npos) << e;
  EXPECT_NE(e.find(fmt::format("byte {}", second_header)), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST_F(TarShards, ATruncatedShardIsOneLineNamingIt) {
  const auto full = fs::file_size(shard(1));
  for (const std::uintmax_t keep : {full / 2, std::uintmax_t{700}, std::uintmax_t{100}}) {
    const fs::path cut = tmp_->path() / "cut.tar";
    fs::copy_file(shard(1), cut, fs::copy_options::overwrite_existing);
    fs::resize_file(cut, keep);
    const std::string e = data_error([&] { TarShardSource(cut.string()); });
    EXPECT_NE(e.find(cut.string()), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  // A shard cut after the scan: the read fails with one line naming the item.
  const fs::path later = tmp_->path() / "later.tar";
  fs::copy_file(shard(1), later);
  const TarShardSource s(later.string());
  fs::resize_file(later, 600);
  Bytes b;
  const std::string e = data_error([&] { s.fetch(s.size() - 1, b); });
  EXPECT_NE(e.find(later.string()), std::string::npos) << e;
  EXPECT_NE(e.find("shorter"), std::string::npos) << e;
}

TEST_F(TarShards, ASampleMissingItsLabelIsSkippedAndCountedOrAnErrorUnderStrict) {
  const fs::path odd = tmp_->path() / "odd";
  fs::create_directories(odd);
  const std::string jpeg = read_all(folder_ / "c1" / "0.jpg");
  write_tar(odd / "a.tar", {{"s0.jpg", jpeg},
                            {"s0.cls", "1\n"},
                            {"s1.jpg", jpeg},
                            {"s2.cls", "2"},
                            {"s3.jpeg", jpeg},
                            {"s3.cls", " 2 "},
                            {"s3.json", "{}"},
                            {"s4.jpg", jpeg},
                            {"s4.cls", "x"}});
  // A name past ustar's 100 characters: a pax extended header before the member's own shifts its data.
  const std::string dir = "dir/" + std::string(120, 'd');
  write_tar(odd / "b.tar", {{dir + "/t0.jpg", jpeg}, {dir + "/t0.cls", "0"}});
  std::ostringstream warnings;
  const TarShardSource s((odd / "*.tar").string(), {.warnings = &warnings});
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s.label(0), 1);
  EXPECT_EQ(s.label(1), 2);
  EXPECT_EQ(s.label(2), 0);
  EXPECT_EQ(s.describe(2), (odd / "b.tar").string() + ":" + dir + "/t0.jpg");
  EXPECT_EQ(s.skipped_samples(), 3u);  // s1 (no .cls), s2 (no image), s4 (a label that is no number)
  for (std::size_t i = 0; i < s.size(); ++i) {
    Bytes b;
    s.fetch(i, b);
    EXPECT_EQ(std::string(b.begin(), b.end()), jpeg) << s.describe(i);
  }
  const std::string w = warnings.str();
  EXPECT_EQ(std::count(w.begin(), w.end(), '\n'), 1) << w;
  EXPECT_NE(w.find("skipped 3"), std::string::npos) << w;
  EXPECT_NE(w.find((odd / "a.tar").string()), std::string::npos) << w;
  EXPECT_NE(w.find("s1"), std::string::npos) << w;
  EXPECT_EQ(s.describe_json()["skipped_samples"], 3);

  const std::string e = data_error([&] { TarShardSource((odd / "*.tar").string(), {.strict = true}); });
  EXPECT_NE(e.find("s1"), std::string::npos) << e;
  EXPECT_NE(e.find("no .cls"), std::string::npos) << e;
  EXPECT_NE(e.find("--strict-data"), std::string::npos) << e;
}

TEST_F(TarShards, NoShardsIsOneLineNamingThePattern) {
  const std::string pattern = (tmp_->path() / "nothing" / "*.tar").string();
  EXPECT_EQ(data_error([&] { TarShardSource{pattern}; }), "no shards match " + pattern);
  const std::string missing = (tmp_->path() / "missing.tar").string();
  EXPECT_EQ(data_error([&] { TarShardSource{missing}; }), "shard " + missing + " does not exist");
  std::ofstream(tmp_->path() / "empty.shards") << "# nothing here\n\n";
  EXPECT_NE(data_error([&] { TarShardSource{(tmp_->path() / "empty.shards").string()}; }).find("names no shards"),
            std::string::npos);
  std::ofstream(tmp_->path() / "bad.shards") << "shards/shard-000000.tar\nshards/nope.tar\n";
  EXPECT_NE(data_error([&] { TarShardSource{(tmp_->path() / "bad.shards").string()}; }).find("nope.tar"),
            std::string::npos);
  // A tar with no samples at all, and a file that is no tar.
  write_tar(tmp_->path() / "other.tar", {{"readme.txt", "hello"}});
  EXPECT_NE(data_error([&] { TarShardSource{(tmp_->path() / "other.tar").string()}; }).find("hold no samples"),
            std::string::npos);
  std::ofstream(tmp_->path() / "junk.tar") << std::string(3000, 'j');
  const std::string junk = data_error([&] { TarShardSource{(tmp_->path() / "junk.tar").string()}; });
  EXPECT_NE(junk.find("junk.tar"), std::string::npos) << junk;
  EXPECT_EQ(junk.find('\n'), std::string::npos) << junk;
}

// A member's name is data the shard's author chose: the rule of listing paths (pipeline/relative_path.h)
// holds for it too, after tar's own leading "./". The first bad one refuses the shard, naming it.
TEST_F(TarShards, AMemberNameThatIsNotARelativePathRefusesTheShardNamingIt) {
  const fs::path odd = tmp_->path() / "odd";
  fs::create_directories(odd);
  const std::string jpeg = read_all(folder_ / "c1" / "0.jpg");
  for (const std::string bad : {"../evil", "../../../../etc/passwd", "/abs/s0", "a/./s0", "a//s0", "a\\s0", "a\x01/s0",
                                "a\x1b[2Js0", "http:/x/s0", "%2e%2e/s0"}) {
    SCOPED_TRACE(bad);
    const fs::path tar = odd / "bad.tar";
    write_tar(tar, {{"good.jpg", jpeg}, {"good.cls", "1"}, {bad + ".jpg", jpeg}, {bad + ".cls", "1"}});
    const std::string e = data_error([&] { TarShardSource(tar.string()); });
    EXPECT_NE(e.find("shard " + tar.string() + ": member "), std::string::npos) << e;
    EXPECT_NE(e.find("member " + quoted_path(bad + ".jpg") + " at byte "), std::string::npos) << e;
    // One line, and no control character of the name in it (a terminal would act on it).
    EXPECT_TRUE(std::none_of(e.begin(), e.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; })) << e;
  }
  // tar -C dir -cf x.tar . writes "./name": read as "name".
  const fs::path dotted = odd / "dotted.tar";
  write_tar(dotted, {{"./s0.jpg", jpeg}, {"./s0.cls", "2"}, {"./sub/s1.jpg", jpeg}, {"./sub/s1.cls", "0"}});
  const TarShardSource s(dotted.string());
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s.label(0), 2);
}

// A .shards list names shards in its folder or below it: an entry with a '..' segment (the file
// it names exists), an absolute path, a URL or a control character is refused by line and entry.
TEST_F(TarShards, AShardListEntryOutsideItsFolderIsRefusedNamingTheLine) {
  const fs::path lists = tmp_->path() / "lists";
  fs::create_directories(lists / "sub");
  fs::copy_file(shard(0), lists / "sub" / "s.tar");
  for (const std::string& bad :
       std::vector<std::string>{"../shards/shard-000000.tar", shard(0).string(), "sub/../sub/s.tar", "sub/./s.tar",
                                "http://127.0.0.1:9/s.tar", "sub/s\x01.tar", "sub\\s.tar"}) {
    SCOPED_TRACE(bad);
    const fs::path list = lists / "bad.shards";
    std::ofstream(list, std::ios::trunc) << "# shards\nsub/s.tar\n" << bad << "\n";
    const std::string e = data_error([&] { TarShardSource(list.string()); });
    EXPECT_NE(e.find("the shard list " + list.string() + ": line 3 \""), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  std::ofstream(lists / "good.shards") << "sub/s.tar\n  ./sub/s.tar  \n";
  EXPECT_EQ(TarShardSource((lists / "good.shards").string()).shards().size(), 2u);
}

}  // namespace
