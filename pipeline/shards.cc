#include "pipeline/shards.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <glob.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "pipeline/relative_path.h"

namespace mlbench::pipeline {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kScanBlockBytes = 10240;  // libarchive's reads while scanning (one tar record)
constexpr int kMaxOpenShards = 256;             // shard descriptors kept open at once
constexpr int kVerifiedLabelsPerShard = 4;      // .cls members whose offset the scan checks with a pread
constexpr std::size_t kMaxLabelBytes = 64;      // a longer .cls is not a label
constexpr std::size_t kMaxIovecs = 512;         // per preadv of a forward run (below IOV_MAX)

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// WebDataset's split of a member name: the key is the folder and the file name up to its
// first '.', the extension the rest ("a/b.seg.png" -> "a/b", "seg.png").
std::pair<std::string, std::string> split_key(const std::string& name) {
  const std::size_t slash = name.rfind('/');
  const std::size_t dot = name.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos) return {name, {}};
  return {name.substr(0, dot), name.substr(dot + 1)};
}

bool is_image_ext(const std::string& ext) {
  const std::string e = lower(ext);
  return e == "jpg" || e == "jpeg" || e == "png";
}

// A .cls member's text: a non-negative decimal integer, white space around it allowed.
std::optional<std::int64_t> parse_label(const std::string& text) {
  std::size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data() + b, text.data() + e, v);
  if (ec != std::errc() || end != text.data() + e || b == e || v < 0) return std::nullopt;
  return v;
}

// Reads exactly `len` bytes at `offset`; the bytes read (short: the file ends first), or -errno.
long pread_full(int fd, std::uint8_t* data, std::size_t len, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < len) {
    const ssize_t n = ::pread(fd, data + done, len - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return static_cast<long>(done);
}

// preadv until every iovec is full; the bytes read, or -errno. `iov` is consumed.
long preadv_full(int fd, std::vector<iovec>& iov, std::uint64_t offset) {
  std::size_t first = 0;
  long done = 0;
  while (first < iov.size()) {
    const ssize_t n =
        ::preadv(fd, iov.data() + first, static_cast<int>(iov.size() - first), static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) break;
    done += n;
    auto left = static_cast<std::size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (left > 0) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return done;
}

// FNV-1a, 64 bits (as source.cc's fingerprint).
struct Fnv {
  std::uint64_t h = 14695981039346656037ull;
  void add(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  void add(const std::string& s) { add(s.data(), s.size() + 1); }
  void add(std::uint64_t v) { add(&v, sizeof v); }
};

struct ArchiveFree {
  void operator()(archive* a) const { archive_read_free(a); }
};

}  // namespace

bool is_shard_spec(const std::string& spec) {
  return ends_with(spec, ".tar") || ends_with(spec, ".shards") || spec.find_first_of("*?[") != std::string::npos;
}

std::vector<fs::path> resolve_shard_spec(const std::string& spec) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (ends_with(spec, ".shards")) {
    std::ifstream in(spec);
    if (!in) throw DataError(fmt::format("cannot read the shard list {}: {}", spec, std::strerror(errno)));
    const fs::path base = fs::path(spec).parent_path();
    std::string line;
    for (std::size_t number = 1; std::getline(in, line); ++number) {
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
      std::size_t b = 0;
      while (b < line.size() && std::isspace(static_cast<unsigned char>(line[b]))) ++b;
      if (b == line.size() || line[b] == '#') continue;
      std::string_view entry(line);
      entry.remove_prefix(b);
      while (entry.starts_with("./")) entry.remove_prefix(2);  // "./shard.tar" is beside the list too
      // The list names shards in its folder or below it (docs/pipeline.md, "Paths that data names").
      if (const std::string why = relative_path_problem(entry); !why.empty()) {
        throw DataError(
            fmt::format("the shard list {}: line {} {}: {} (a listed shard is a path relative to the "
                        "list's folder, below it)",
                        spec, number, quoted_path(entry), why));
      }
      out.push_back(base / fs::path(entry));
      if (!fs::is_regular_file(out.back(), ec)) {
        throw DataError(fmt::format("shard {} listed in {} does not exist", out.back().string(), spec));
      }
    }
    if (out.empty()) throw DataError(fmt::format("the shard list {} names no shards", spec));
    return out;
  }
  if (spec.find_first_of("*?[") != std::string::npos) {
    glob_t g{};
    const int rc = ::glob(spec.c_str(), 0, nullptr, &g);
    for (std::size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) {
      if (fs::is_regular_file(g.gl_pathv[i], ec)) out.emplace_back(g.gl_pathv[i]);
    }
    ::globfree(&g);
    if (out.empty()) throw DataError(fmt::format("no shards match {}", spec));
    return out;  // glob(3) sorts its matches
  }
  if (!fs::is_regular_file(spec, ec)) throw DataError(fmt::format("shard {} does not exist", spec));
  out.emplace_back(spec);
  return out;
}

std::vector<std::vector<std::size_t>> lane_streams(const std::vector<std::size_t>& shard_items,
                                                   const EpochOrderRequest& r, std::size_t shuffle_buffer) {
  const std::size_t shards = shard_items.size();
  std::vector<std::size_t> first(shards + 1, 0);
  for (std::size_t s = 0; s < shards; ++s) first[s + 1] = first[s] + shard_items[s];
  std::vector<std::size_t> perm(shards);
  std::iota(perm.begin(), perm.end(), std::size_t{0});
  const std::uint64_t epoch_seed = mix_seed(r.seed, static_cast<std::uint64_t>(r.epoch));
  if (r.shuffle) {
    std::mt19937_64 rng(epoch_seed);
    for (std::size_t i = shards; i > 1; --i) {
      std::uniform_int_distribution<std::size_t> pick(0, i - 1);
      std::swap(perm[i - 1], perm[pick(rng)]);
    }
  }
  const auto lanes = static_cast<std::size_t>(std::max(1, r.lanes));
  const std::size_t n = r.shuffle ? shuffle_buffer : 0;
  std::vector<std::vector<std::size_t>> out(lanes);
  for (std::size_t k = 0; k < lanes; ++k) {
    std::mt19937_64 rng(mix_seed(epoch_seed, k + 1));
    std::vector<std::size_t>& lane = out[k];
    std::vector<std::size_t> buffer;
    buffer.reserve(std::min<std::size_t>(n, first[shards]));
    for (std::size_t p = k; p < shards; p += lanes) {
      const std::size_t s = perm[p];
      for (std::size_t i = first[s]; i < first[s + 1]; ++i) {
        if (n == 0) {
          lane.push_back(i);
        } else if (buffer.size() < n) {
          buffer.push_back(i);
        } else {
          std::uniform_int_distribution<std::size_t> pick(0, n - 1);
          std::size_t& slot = buffer[pick(rng)];
          lane.push_back(slot);
          slot = i;
        }
      }
    }
    while (!buffer.empty()) {
      std::uniform_int_distribution<std::size_t> pick(0, buffer.size() - 1);
      std::size_t& slot = buffer[pick(rng)];
      lane.push_back(slot);
      slot = buffer.back();
      buffer.pop_back();
    }
  }
  return out;
}

std::vector<std::size_t> shard_epoch_order(const std::vector<std::size_t>& shard_items, const EpochOrderRequest& r,
                                           std::size_t shuffle_buffer) {
  const auto lanes = lane_streams(shard_items, r, shuffle_buffer);
  const std::size_t bs = std::max<std::size_t>(1, r.batch_size);
  std::vector<std::size_t> order;
  order.reserve(std::accumulate(shard_items.begin(), shard_items.end(), std::size_t{0}));
  std::vector<std::size_t> pos(lanes.size(), 0);
  const auto take = [&](std::size_t k, std::size_t count) {
    const auto b = lanes[k].begin() + static_cast<std::ptrdiff_t>(pos[k]);
    order.insert(order.end(), b, b + static_cast<std::ptrdiff_t>(count));
    pos[k] += count;
  };
  for (bool any = true; any;) {
    any = false;
    for (std::size_t k = 0; k < lanes.size(); ++k) {
      if (lanes[k].size() - pos[k] < bs) continue;
      take(k, bs);
      any = true;
    }
  }
  for (std::size_t k = 0; k < lanes.size(); ++k) take(k, lanes[k].size() - pos[k]);
  return order;
}

// One shard's read stream (NOTE [Tar shard reads] in shards.h).
struct TarShardSource::Cursor {
  std::mutex mu;
  int fd = -1;
  std::size_t next = 0;               // the item the stream reads next (global index)
  std::map<std::size_t, Bytes> held;  // items read forward, not fetched yet
};

struct TarShardSource::Counters {
  std::atomic<std::uint64_t> shards_opened{0}, reads{0}, bytes_read{0}, sequential_items{0}, backward_items{0},
      skipped_ahead{0}, dropped_held{0}, rewinds{0}, held_items_peak{0}, held_now{0};
  void held_changed(long delta) {
    const std::uint64_t now = held_now.fetch_add(static_cast<std::uint64_t>(delta)) + static_cast<std::uint64_t>(delta);
    std::uint64_t peak = held_items_peak.load();
    while (now > peak && !held_items_peak.compare_exchange_weak(peak, now)) {
    }
  }
};

TarShardSource::TarShardSource(const std::string& spec, TarShardOptions options, const std::string& hint)
    : spec_(spec), options_(options), counters_(std::make_unique<Counters>()) {
  shards_ = resolve_shard_spec(spec);
  shard_first_.push_back(0);
  for (std::size_t s = 0; s < shards_.size(); ++s) {
    scan(s);
    shard_first_.push_back(items_.size());
  }
  if (items_.empty()) {
    throw DataError(fmt::format("the shards of {} hold no samples (KEY.jpg with KEY.cls){}", spec,
                                hint.empty() ? "" : " (" + hint + ")"));
  }
  if (skipped_samples_ > 0) {
    std::ostream& out = options_.warnings ? *options_.warnings : std::cerr;
    out << fmt::format(
        "warning: tar shards {}: skipped {} sample(s) without both an image and a .cls label, in {} of {} shards "
        "(first: {}); --strict-data makes this an error\n",
        spec, skipped_samples_, shards_with_skips_, shards_.size(), first_skip_);
  }
  std::ifstream classes(shards_.front().parent_path() / "classes.txt");
  for (std::string line; std::getline(classes, line);) classes_txt_ += line.empty() ? 0 : 1;
  delivered_.assign(items_.size(), 0);
  cursors_.reserve(shards_.size());
  for (std::size_t s = 0; s < shards_.size(); ++s) {
    cursors_.push_back(std::make_unique<Cursor>());
    cursors_.back()->next = shard_first_[s];
  }
}

TarShardSource::~TarShardSource() {
  for (auto& c : cursors_) {
    if (c->fd >= 0) ::close(c->fd);
  }
}

void TarShardSource::scan(std::size_t s) {
  const fs::path& path = shards_[s];
  std::error_code ec;
  const std::uintmax_t file_bytes = fs::file_size(path, ec);
  if (ec) throw DataError(fmt::format("cannot read shard {}: {}", path.string(), ec.message()));
  std::unique_ptr<archive, ArchiveFree> a(archive_read_new());
  archive_read_support_format_tar(a.get());
  // libarchive reads the first header here to recognise the format.
  if (archive_read_open_filename(a.get(), path.c_str(), kScanBlockBytes) != ARCHIVE_OK) {
    const char* why = archive_error_string(a.get());
    throw DataError(fmt::format("shard {}: not a tar file (bad tar header at byte 0): {}", path.string(),
                                why ? why : "unreadable"));
  }
  // For checking the data offsets libarchive reports against the file itself (see scan's use).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(fmt::format("cannot open shard {}: {}", path.string(), std::strerror(errno)));
  struct CloseFd {
    int fd;
    ~CloseFd() { ::close(fd); }
  } close_fd{fd};

  // The members of one key (consecutive in the shard, as WebDataset groups them).
  struct Sample {
    std::string key;
    std::uint64_t at = 0;  // its first header's byte offset
    std::optional<Item> image;
    bool has_label = false;
    std::optional<std::int64_t> label;
  } sample;
  std::size_t skipped_here = 0;
  int verified = 0;
  const auto finish = [&] {
    if (sample.key.empty()) return;
    if (sample.image && sample.label) {
      sample.image->label = *sample.label;
      total_bytes_ += sample.image->size;
      items_.push_back(std::move(*sample.image));
      return;
    }
    const char* why = !sample.image      ? (sample.has_label ? "a .cls but no image" : "no image and no .cls")
                      : sample.has_label ? "a .cls that is not a non-negative integer"
                                         : "an image but no .cls";
    if (options_.strict) {
      throw DataError(fmt::format("shard {}: sample {} (byte {}) has {} (--strict-data)", path.string(), sample.key,
                                  sample.at, why));
    }
    if (skipped_samples_ == 0) first_skip_ = fmt::format("shard {}, key {}: {}", path.string(), sample.key, why);
    ++skipped_samples_;
    ++skipped_here;
  };

  archive_entry* entry = nullptr;
  std::uint64_t next_header = 0;  // where the next header starts: after the last member's padded data
  while (true) {
    const int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    // Where this header (or the extended header before it) starts; after a fatal error
    // libarchive answers an error code, so the position is the one the last member implies.
    const la_int64_t position = archive_read_header_position(a.get());
    const std::uint64_t header_at = position >= 0 ? static_cast<std::uint64_t>(position) : next_header;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {  // ARCHIVE_RETRY too: a damaged header libarchive would skip
      throw DataError(fmt::format("shard {}: bad tar header at byte {}: {}", path.string(), header_at,
                                  archive_error_string(a.get()) ? archive_error_string(a.get()) : "unreadable"));
    }
    const auto offset = static_cast<std::uint64_t>(archive_filter_bytes(a.get(), 0));
    const auto size = static_cast<std::uint64_t>(std::max<la_int64_t>(0, archive_entry_size(entry)));
    next_header = offset + (size + 511) / 512 * 512;
    const char* name = archive_entry_pathname(entry);
    if (archive_entry_filetype(entry) != AE_IFREG || !name) continue;
    // Member names are data too (they name samples in messages and the report): the rule of
    // listing paths, after tar's own leading "./" (`tar -C dir -cf x.tar .`).
    std::string_view relative(name);
    while (relative.starts_with("./")) relative.remove_prefix(2);
    if (const std::string why = relative_path_problem(relative); !why.empty()) {
      throw DataError(fmt::format("shard {}: member {} at byte {}: {} (a member's name must be a relative path)",
                                  path.string(), quoted_path(name), header_at, why));
    }
    if (offset + size > file_bytes) {
      throw DataError(fmt::format("shard {}: truncated: member {} at byte {} needs {} bytes, the file ends at byte {}",
                                  path.string(), name, offset, size, file_bytes));
    }
    auto [key, ext] = split_key(name);
    if (key != sample.key) {
      finish();
      sample = Sample{};
      sample.key = key;
      sample.at = header_at;
    }
    if (is_image_ext(ext)) {
      if (!sample.image) sample.image = Item{offset, size, 0, static_cast<std::uint32_t>(s), name};
    } else if (lower(ext) == "cls" && !sample.has_label) {
      sample.has_label = true;
      if (size > kMaxLabelBytes) continue;  // not a label: the sample is skipped as malformed
      std::string text(size, '\0');
      const la_ssize_t got = archive_read_data(a.get(), text.data(), text.size());
      if (got != static_cast<la_ssize_t>(size)) {
        throw DataError(fmt::format("shard {}: cannot read member {} at byte {}: {}", path.string(), name, offset,
                                    got < 0 ? archive_error_string(a.get()) : "short read"));
      }
      sample.label = parse_label(text);
      // Reads go by these offsets (pread): check a few against the file, so that an archive
      // libarchive reads differently from how it reports offsets is an error here, not wrong bytes later.
      if (verified < kVerifiedLabelsPerShard) {
        ++verified;
        Bytes check(size);
        if (pread_full(fd, check.data(), size, offset) != static_cast<long>(size) ||
            !std::equal(check.begin(), check.end(), text.begin())) {
          throw DataError(fmt::format("shard {}: member {} is not at byte {} where its header says (not a plain tar?)",
                                      path.string(), name, offset));
        }
      }
    }
  }
  finish();
  if (skipped_here > 0) ++shards_with_skips_;
}

std::string TarShardSource::describe(std::size_t index) const {
  const Item& it = items_[index];
  return shards_[it.shard].string() + ":" + it.member;
}

std::uint64_t TarShardSource::fingerprint() const {
  Fnv f;
  f.add(static_cast<std::uint64_t>(items_.size()));
  for (const Item& it : items_) {
    f.add(shards_[it.shard].filename().string());
    f.add(it.member);
    f.add(it.size);
    f.add(static_cast<std::uint64_t>(it.label));
  }
  return f.h;
}

std::size_t TarShardSource::class_count() const {
  return std::max(classes_txt_, ItemSource::class_count());
}

std::optional<std::vector<std::size_t>> TarShardSource::epoch_order(const EpochOrderRequest& request) const {
  lanes_ = std::max(1, request.lanes);
  batch_size_ = request.batch_size;
  std::vector<std::size_t> shard_items(shards_.size());
  for (std::size_t s = 0; s < shards_.size(); ++s) shard_items[s] = shard_first_[s + 1] - shard_first_[s];
  return shard_epoch_order(shard_items, request, options_.shuffle_buffer);
}

std::size_t TarShardSource::hold_limit() const {
  const std::size_t bs = batch_size_.load();
  return options_.shuffle_buffer + 4 * (bs > 0 ? bs : 256) + 64;
}

TarShardSource::Cursor& TarShardSource::cursor(std::size_t shard) const {
  return *cursors_[shard];
}

int TarShardSource::open_fd(Cursor& c, std::size_t shard) const {
  if (c.fd >= 0) return c.fd;
  // Keep the descriptors bounded: close another shard's (one not in use right now).
  if (open_fds_.load() >= kMaxOpenShards) {
    for (auto& other : cursors_) {
      if (other.get() == &c || !other->mu.try_lock()) continue;
      std::lock_guard<std::mutex> lock(other->mu, std::adopt_lock);
      if (other->fd < 0) continue;
      ::close(other->fd);
      other->fd = -1;
      --open_fds_;
      break;
    }
  }
  c.fd = ::open(shards_[shard].c_str(), O_RDONLY | O_CLOEXEC);
  if (c.fd < 0) {
    throw DataError(fmt::format("cannot open shard {}: {}", shards_[shard].string(), std::strerror(errno)));
  }
  ::posix_fadvise(c.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  ++open_fds_;
  ++counters_->shards_opened;
  return c.fd;
}

void TarShardSource::fail_read(std::size_t index, const std::string& why) const {
  throw DataError(fmt::format("cannot read {} at byte {}: {}", describe(index), items_[index].offset, why));
}

void TarShardSource::read_member(Cursor& c, std::size_t index, Bytes& out) const {
  const Item& it = items_[index];
  const int fd = open_fd(c, it.shard);
  out.resize(it.size);
  const long got = pread_full(fd, out.data(), it.size, it.offset);
  if (got < 0) fail_read(index, std::strerror(static_cast<int>(-got)));
  if (static_cast<std::uint64_t>(got) < it.size) fail_read(index, "the shard is shorter than when it was scanned");
  ++counters_->reads;
  counters_->bytes_read += it.size;
  if (options_.drop_after_read) {
    ::posix_fadvise(fd, static_cast<off_t>(it.offset), static_cast<off_t>(it.size), POSIX_FADV_DONTNEED);
  }
}

void TarShardSource::read_forward(Cursor& c, std::size_t through) const {
  const Item& target = items_[through];
  const int fd = open_fd(c, target.shard);
  Bytes gap;  // the tar headers and other members between images: read, not kept
  while (c.next <= through) {
    // One run: consecutive items from c.next, up to kRunBytes (at least one item), read in one preadv.
    const std::size_t from = c.next;
    const std::uint64_t start = items_[from].offset;
    std::size_t to = from;
    while (to < through && to - from + 1 < kMaxIovecs / 2 &&
           items_[to + 1].offset + items_[to + 1].size - start <= kRunBytes) {
      ++to;
    }
    std::uint64_t max_gap = 0;
    for (std::size_t k = from + 1; k <= to; ++k) {
      max_gap = std::max(max_gap, items_[k].offset - (items_[k - 1].offset + items_[k - 1].size));
    }
    gap.resize(std::max<std::size_t>(1, max_gap));
    std::vector<Bytes> run(to - from + 1);
    std::vector<iovec> iov;
    for (std::size_t k = from; k <= to; ++k) {
      if (k > from) {
        const std::uint64_t g = items_[k].offset - (items_[k - 1].offset + items_[k - 1].size);
        if (g > 0) iov.push_back({gap.data(), g});
      }
      Bytes& b = run[k - from];
      b.resize(items_[k].size);
      if (!b.empty()) iov.push_back({b.data(), b.size()});
    }
    const std::uint64_t len = items_[to].offset + items_[to].size - start;
    const long got = preadv_full(fd, iov, start);
    if (got < 0) fail_read(from, std::strerror(static_cast<int>(-got)));
    if (static_cast<std::uint64_t>(got) < len) fail_read(from, "the shard is shorter than when it was scanned");
    ++counters_->reads;
    counters_->bytes_read += len;
    if (options_.drop_after_read) {
      ::posix_fadvise(fd, static_cast<off_t>(start), static_cast<off_t>(len), POSIX_FADV_DONTNEED);
    }
    for (std::size_t k = from; k <= to; ++k) {
      if (c.held.insert_or_assign(k, std::move(run[k - from])).second) counters_->held_changed(1);
    }
    c.next = to + 1;
  }
  // Bounded: the oldest held items go first (they are read again, backward, if still wanted).
  const std::size_t limit = hold_limit();
  while (c.held.size() > limit && c.held.begin()->first != through) {
    c.held.erase(c.held.begin());
    counters_->held_changed(-1);
    ++counters_->dropped_held;
  }
}

bool TarShardSource::take_held(Cursor& c, std::size_t index, Bytes& out) const {
  auto h = c.held.find(index);
  if (h == c.held.end()) return false;
  out = std::move(h->second);
  c.held.erase(h);
  counters_->held_changed(-1);
  ++counters_->sequential_items;
  delivered_[index] = 1;
  return true;
}

void TarShardSource::fetch(std::size_t index, Bytes& out) const {
  const Item& it = items_[index];
  Cursor& c = cursor(it.shard);
  std::lock_guard<std::mutex> lock(c.mu);
  if (take_held(c, index, out)) return;
  const std::size_t limit = hold_limit();
  const std::size_t first = shard_first_[it.shard];
  bool forward = index >= c.next && index - c.next <= limit;
  if (index < c.next && delivered_[index] && index - first <= limit) {
    // Asked for again, near the shard's start: a new pass over the shard (the next epoch,
    // as a planned order begins it). The stream starts over.
    std::fill(delivered_.begin() + static_cast<std::ptrdiff_t>(first),
              delivered_.begin() + static_cast<std::ptrdiff_t>(shard_first_[it.shard + 1]), 0);
    ++counters_->rewinds;
    c.next = first;
    forward = true;
  }
  if (forward) {
    read_forward(c, index);
    if (!take_held(c, index, out)) throw std::logic_error("tar shards: an item read forward was not held");
    return;
  }
  // Behind the stream and not held (dropped when the held ones reached their bound) or far
  // ahead of it (an order the source did not plan): a read of its own.
  read_member(c, index, out);
  delivered_[index] = 1;
  if (index >= c.next) {
    c.next = index + 1;
    ++counters_->skipped_ahead;
  } else {
    ++counters_->backward_items;
  }
}

bool TarShardSource::fetch_if_cached(std::size_t index, Bytes& out) const {
  Cursor& c = cursor(items_[index].shard);
  std::lock_guard<std::mutex> lock(c.mu);
  return take_held(c, index, out);
}

TarShardSource::Stats TarShardSource::stats() const {
  const Counters& k = *counters_;
  return {.shards_opened = k.shards_opened.load(),
          .reads = k.reads.load(),
          .bytes_read = k.bytes_read.load(),
          .sequential_items = k.sequential_items.load(),
          .backward_items = k.backward_items.load(),
          .skipped_ahead = k.skipped_ahead.load(),
          .dropped_held = k.dropped_held.load(),
          .rewinds = k.rewinds.load(),
          .held_items_peak = k.held_items_peak.load()};
}

nlohmann::json TarShardSource::describe_json() const {
  const Stats st = stats();
  const double mean = static_cast<double>(total_bytes_) / static_cast<double>(items_.size());
  const int lanes = lanes_.load();
  return {{"kind", "tar-shards"},
          {"spec", spec_},
          {"shards", shards_.size()},
          {"items", items_.size()},
          {"skipped_samples", skipped_samples_},
          {"dataset_bytes", total_bytes_},
          {"mean_sample_bytes", mean},
          {"shuffle_buffer", options_.shuffle_buffer},
          {"lanes", lanes},
          // What WebDataset's shuffle buffers hold: N samples per lane.
          {"shuffle_buffer_bytes",
           static_cast<std::uint64_t>(mean * static_cast<double>(options_.shuffle_buffer) * std::max(1, lanes))},
          {"shards_opened", st.shards_opened},
          {"reads", st.reads},
          {"bytes_read", st.bytes_read},
          {"sequential_items", st.sequential_items},
          {"backward_items", st.backward_items},
          {"skipped_ahead", st.skipped_ahead},
          {"dropped_held", st.dropped_held},
          {"rewinds", st.rewinds},
          {"held_items_peak", st.held_items_peak}};
}

}  // namespace mlbench::pipeline
