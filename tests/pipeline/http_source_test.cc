// Datasets over HTTP (pipeline/http_source.h) against a real server: nginx on loopback over a
// temporary ImageFolder (tests/support/http_fixtures.h), and a server that misbehaves on purpose.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pipeline/http_source.h"
#include "pipeline/loader.h"
#include "pipeline/relative_path.h"
#include "tests/support/delay_proxy.h"
#include "tests/support/http_fixtures.h"
#include "tests/support/jpeg_folder.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace mlbench::pipeline;
using mlbench::testing_support::TempDir;
namespace fs = std::filesystem;
namespace mt = mlbench::testing;

// An ImageFolder of `classes` x `per_class` JPEGs with its listing, readable by nginx's worker.
fs::path served_folder(const TempDir& tmp, int classes, int per_class) {
  mt::make_readable_by_others(tmp.path());
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path() / "set", classes, per_class);
  write_folder_listing(root);
  return root;
}

std::unique_ptr<mt::NginxServer> start_nginx(const fs::path& root, mt::NginxOptions options = {}) {
  options.root = root;
  std::string why;
  auto server = mt::NginxServer::start(options, why);
  if (!server) ADD_FAILURE() << "nginx did not start: " << why;
  return server;
}

Bytes file_bytes(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

LoaderConfig one_epoch(int workers, int io_depth) {
  LoaderConfig c;
  c.batch_size = 4;
  c.workers = workers;
  c.io_depth = io_depth;
  c.transform.image_size = 16;
  c.max_epochs = 1;
  c.drop_last = false;
  return c;
}

// The error that stops a --strict-data loader (one thread, files in order) over `http` in its first
// epoch, or "no error".
std::string strict_loader_error(const std::shared_ptr<HttpSource>& http) {
  LoaderConfig strict = one_epoch(1, 0);
  strict.strict = true;
  strict.shuffle = false;
  Loader stops(http, strict);
  try {
    while (stops.next()) {
    }
  } catch (const DataError& e) {
    return e.what();
  }
  return "no error";
}

TEST(HttpSource, ServesTheFoldersObjectsAndLabelsOverKeepAlive) {
  MLBENCH_SKIP_WITHOUT_NGINX();
  const TempDir tmp("http_serve");
  const fs::path root = served_folder(tmp, 3, 4);
  auto nginx = start_nginx(root.parent_path());
  ASSERT_TRUE(nginx);
  const ImageFolderReader folder(root);
  const HttpSource http(nginx->url("/set/"));
  ASSERT_EQ(http.size(), folder.size());
  EXPECT_EQ(http.classes(), folder.classes());
  Bytes got;
  for (std::size_t i = 0; i < folder.size(); ++i) {
    EXPECT_EQ(http.label(i), folder.label(i));
    http.fetch(i, got);
    EXPECT_EQ(got, file_bytes(folder.path(i))) << http.describe(i);
  }
  const HttpCounters c = http.counters();
  EXPECT_EQ(c.requests, static_cast<std::int64_t>(folder.size()) + 1);  // and the listing
  EXPECT_EQ(c.failed, 0);
  EXPECT_EQ(c.retries, 0);
  EXPECT_EQ(http.describe_json().at("requests").get<std::int64_t>(), c.requests);
}

TEST(HttpSource, ALoaderReadsEveryObjectWithRequestsInFlight) {
  MLBENCH_SKIP_WITHOUT_NGINX();
  const TempDir tmp("http_loader");
  const fs::path root = served_folder(tmp, 2, 10);
  auto nginx = start_nginx(root.parent_path());
  ASSERT_TRUE(nginx);
  // 20 ms a request: the 6 threads' requests overlap however loaded the machine (straight to nginx
  // on loopback, one could end before the next began, and max_in_flight stay 1).
  mt::DelayProxy proxy("127.0.0.1", nginx->port(), std::chrono::milliseconds(20));
  auto http = std::make_shared<HttpSource>(proxy.url("/set"));  // no trailing slash: one is added
  Loader loader(http, one_epoch(2, 6));
  std::map<std::int64_t, int> labels;
  while (auto b = loader.next()) {
    for (int k = 0; k < b->size; ++k) labels[b->labels[k]] += 1;
  }
  EXPECT_EQ(labels, (std::map<std::int64_t, int>{{0, 10}, {1, 10}}));
  EXPECT_EQ(loader.stats().corrupt(), 0);
  EXPECT_GE(http->counters().max_in_flight, 2);
  const auto report = loader.to_json();
  EXPECT_EQ(report.at("source"), "http");
  EXPECT_EQ(report.at("source_detail").at("kind"), "http");
  EXPECT_EQ(report.at("source_detail").at("failed"), 0);
  EXPECT_EQ(report.at("root"), http->url());
}

TEST(HttpSource, AUrlWithNoListingSaysHowToWriteOne) {
  MLBENCH_SKIP_WITHOUT_NGINX();
  const TempDir tmp("http_nolisting");
  const fs::path root = served_folder(tmp, 1, 2);
  fs::remove(root / kListingName);
  auto nginx = start_nginx(root.parent_path());
  ASSERT_TRUE(nginx);
  try {
    HttpSource http(nginx->url("/set/"));
    FAIL() << "no error";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("HTTP 404"), std::string::npos) << what;
    EXPECT_NE(what.find("mlbench-datagen listing"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(HttpSource, AListingThatIsNotOneIsAnErrorNamingIt) {
  MLBENCH_SKIP_WITHOUT_NGINX();
  const TempDir tmp("http_badlisting");
  const fs::path root = served_folder(tmp, 1, 2);
  std::ofstream(root / kListingName, std::ios::trunc)
      << "{\"format\": \"mlbench-listing\", \"version\": 1, \"classes\": [";
  auto nginx = start_nginx(root.parent_path());
  ASSERT_TRUE(nginx);
  EXPECT_THROW(HttpSource(nginx->url("/set/")), DataError);
}

TEST(HttpSource, MissingObjectsAre404sCountedAsBadSamples) {
  MLBENCH_SKIP_WITHOUT_NGINX();
  const TempDir tmp("http_404");
  const fs::path root = served_folder(tmp, 2, 6);
  fs::remove(root / "c0" / "1.jpg");
  fs::remove(root / "c1" / "4.jpg");
  auto nginx = start_nginx(root.parent_path());
  ASSERT_TRUE(nginx);
  auto http = std::make_shared<HttpSource>(nginx->url("/set/"));
  Loader loader(http, one_epoch(2, 4));
  long items = 0;
  while (auto b = loader.next()) items += b->size;
  EXPECT_EQ(loader.stats().corrupt(), 2);
  EXPECT_EQ(http->counters().failed, 2);
  EXPECT_EQ(http->counters().retries, 0);  // a 404 is not retried
  // --strict-data: the first one stops the run, naming the object and the status.
  const std::string error = strict_loader_error(http);
  EXPECT_NE(error.find("HTTP 404"), std::string::npos) << error;
}

TEST(HttpSource, A500IsRetriedThenCountedAsABadSample) {
  MLBENCH_SKIP_WITHOUT_NGINX();
  const TempDir tmp("http_500");
  const fs::path root = served_folder(tmp, 1, 4);
  mt::NginxOptions o;
  o.status_overrides = {{"/set/c0/2.jpg", 500}};
  auto nginx = start_nginx(root.parent_path(), o);
  ASSERT_TRUE(nginx);
  HttpOptions h;
  h.retries = 2;
  h.backoff_s = 0.001;
  const HttpSource http(nginx->url("/set/"), h);
  Bytes got;
  std::size_t bad = http.size();
  for (std::size_t i = 0; i < http.size(); ++i) {
    if (http.describe(i).ends_with("/c0/2.jpg")) bad = i;
  }
  ASSERT_LT(bad, http.size());
  try {
    http.fetch(bad, got);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("HTTP 500 (3 attempts)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(http.counters().retries, 2);
  EXPECT_EQ(http.counters().status_errors, 3);
  http.fetch((bad + 1) % http.size(), got);  // the others are served
}

TEST(HttpClient, ATruncatedBodyIsRetriedThenFails) {
  mt::FaultyHttpServer server(mt::Fault::kTruncatedBody);
  HttpOptions h;
  h.retries = 1;
  h.backoff_s = 0.001;
  HttpClient client(h);
  Bytes body;
  const HttpResult r = client.get(server.url("/x.jpg"), body);
  EXPECT_EQ(r.kind, HttpResult::Kind::Transport);
  EXPECT_EQ(r.attempts, 2);
  EXPECT_FALSE(r.error.empty());
  EXPECT_EQ(server.requests(), 2);
  EXPECT_EQ(client.counters().failed, 1);
}

TEST(HttpClient, ASlowServerPastTheTimeoutFailsInsteadOfHanging) {
  mt::FaultyHttpServer server(mt::Fault::kNeverAnswers);
  HttpOptions h;
  h.timeout_s = 0.2;
  h.retries = 1;
  h.backoff_s = 0.001;
  HttpClient client(h);
  Bytes body;
  const HttpResult r = client.get(server.url("/x.jpg"), body);
  EXPECT_EQ(r.kind, HttpResult::Kind::Timeout);
  EXPECT_EQ(r.attempts, 2);
  EXPECT_NE(r.error.find("--fetch-timeout 0.2 s"), std::string::npos) << r.error;
  EXPECT_EQ(client.counters().timeouts, 2);
}

TEST(HttpClient, StopFailsWhatIsInFlight) {
  mt::FaultyHttpServer server(mt::Fault::kNeverAnswers);
  HttpOptions h;
  h.timeout_s = 60;
  HttpClient client(h);
  HttpResult r;
  std::thread t([&] {
    Bytes body;
    r = client.get(server.url("/x"), body);
  });
  while (server.requests() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  client.stop();
  t.join();
  EXPECT_EQ(r.error, "the HTTP client was stopped");
}

// A benchmark's memory probe forks its set-up and one step (benchmarks/support/torch_runtime.cc):
// the child's requests must not wait for the parent's multi-handle thread, which the child does
// not have (they did: the probe hung until its 120 s timeout).
TEST(HttpClient, AForkedChildGetsItsOwnThreadAndConnections) {
  mt::FaultyHttpServer server(mt::Fault::kNone, "hello");
  HttpClient client;
  Bytes body;
  ASSERT_EQ(client.get(server.url("/a"), body).kind, HttpResult::Kind::Ok);  // the parent's thread is running
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(20);  // a hang dies of SIGALRM
    Bytes child_body;
    const HttpResult r = client.get(server.url("/b"), child_body);
    ::_exit(r.kind == HttpResult::Kind::Ok && std::string(child_body.begin(), child_body.end()) == "hello" ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
  ASSERT_EQ(client.get(server.url("/c"), body).kind, HttpResult::Kind::Ok);  // the parent's still works
}

TEST(HttpSource, AServerThatGoesAwayEndsTheRunWithOneLine) {
  MLBENCH_SKIP_WITHOUT_NGINX();
  const TempDir tmp("http_gone");
  const fs::path root = served_folder(tmp, 2, 20);
  auto nginx = start_nginx(root.parent_path());
  ASSERT_TRUE(nginx);
  HttpOptions h;
  h.retries = 1;
  h.backoff_s = 0.001;
  h.timeout_s = 5;
  auto http = std::make_shared<HttpSource>(nginx->url("/set/"), h);
  LoaderConfig c = one_epoch(2, 2);
  c.max_epochs = 0;  // endless: only the server's end stops it
  Loader loader(http, c);
  ASSERT_TRUE(loader.next());
  nginx->stop();
  try {
    for (int i = 0; i < 10000; ++i) loader.next();
    FAIL() << "the loader went on without its server";
  } catch (const SourceUnavailable& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("stopped answering"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(HttpSource, ObjectNamesAreEscapedInUrls) {
  MLBENCH_SKIP_WITHOUT_NGINX();
  const TempDir tmp("http_escape");
  const fs::path root = served_folder(tmp, 1, 1);
  fs::create_directories(root / "d 1");
  fs::copy_file(root / "c0" / "0.jpg", root / "d 1" / "a#b.jpg");
  write_folder_listing(root);
  auto nginx = start_nginx(root.parent_path());
  ASSERT_TRUE(nginx);
  const HttpSource http(nginx->url("/set/"));
  ASSERT_EQ(http.size(), 2u);
  EXPECT_NE(http.describe(1).find("/d%201/a%23b.jpg"), std::string::npos) << http.describe(1);
  Bytes got;
  http.fetch(1, got);
  EXPECT_EQ(got, file_bytes(root / "d 1" / "a#b.jpg"));
}

TEST(FetchProbe, CountsItemsAndBytesAtADepth) {
  MLBENCH_SKIP_WITHOUT_NGINX();
  const TempDir tmp("http_probe");
  const fs::path root = served_folder(tmp, 2, 8);
  auto nginx = start_nginx(root.parent_path());
  ASSERT_TRUE(nginx);
  const HttpSource http(nginx->url("/set/"));
  std::vector<std::size_t> order(http.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const FetchProbe p = probe_fetch(http, order, 4, 60.0);
  EXPECT_EQ(p.items, 16);
  EXPECT_EQ(p.failed, 0);
  EXPECT_DOUBLE_EQ(p.bytes, static_cast<double>(http.total_bytes()));
  EXPECT_GT(p.items_per_s(), 0);
}

TEST(RelativePath, PlainRelativePathsPass) {
  for (const std::string ok : {"a.jpg", "n01440764/n01440764_10026.JPEG", "d 1/a#b.jpg", "c0/a:b.jpg", "c0/%41.jpg",
                               "c0/100%.jpg", "c0/..a.jpg", "c0/a..", "\xc3\xa9t\xc3\xa9/photo.jpg"}) {
    EXPECT_EQ(relative_path_problem(ok), "") << ok;
  }
}

TEST(RelativePath, EscapesAbsolutePathsUrlsAndControlCharactersAreRefused) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"../secret.txt", "a '..' segment"},
      {"../../../../etc/passwd", "a '..' segment"},
      {"c0/../../x.jpg", "a '..' segment"},
      {"./x.jpg", "a '.' segment"},
      {"c0/./x.jpg", "a '.' segment"},
      {"c0/..", "a '..' segment"},
      {"/etc/passwd", "absolute"},
      {"", "empty path"},
      {"c0//x.jpg", "empty segment"},
      {"c0/", "empty segment"},
      {"c0\\..\\x.jpg", "backslash"},
      {std::string("c0/a\0b.jpg", 10), "control character (\\x00)"},
      {"c0/a\nb.jpg", "control character (\\x0a)"},
      {"c0/\x1b[2J.jpg", "control character (\\x1b)"},
      {"c0/a\x7f.jpg", "control character (\\x7f)"},
      {"http://evil.example/x.jpg", "':' in its first segment"},
      {"file:x.jpg", "':' in its first segment"},
      {"%2e%2e/secret.txt", "decode to a '..' segment"},
      {"c0/%2E/x.jpg", "decode to a '.' segment"},
      {"c0/%252e%252e/x.jpg", "decode to a '..' segment"},
      {"c0/a%2fb.jpg", "decode to a '/'"},
      {"c0/a%5cb.jpg", "decode to a backslash"},
      {"c0/a%00.jpg", "decode to a control character"},
      {"http%3a/x.jpg", "':' in its first segment"},
      {std::string(kMaxRelativePathBytes + 1, 'a'), "more than 4096"},
  };
  for (const auto& [path, why] : refused) {
    const std::string got = relative_path_problem(path);
    EXPECT_NE(got.find(why), std::string::npos) << quoted_path(path) << " -> " << got;
  }
}

TEST(RelativePath, QuotedPathsShowControlCharactersAsEscapesAndAreCut) {
  EXPECT_EQ(quoted_path("c0/a\x1b[2J\n\"\\.jpg"), R"("c0/a\x1b[2J\x0a\x22\x5c.jpg")");
  const std::string q = quoted_path(std::string(1000, 'a'));
  EXPECT_EQ(q.size(), 1u + 200 + 3 + 1);
  EXPECT_TRUE(q.ends_with("...\""));
}

// A listing as a test writes it: `objects` as given, 2 classes.
std::string listing_json(const nlohmann::json& objects) {
  return nlohmann::json{{"format", "mlbench-listing"}, {"version", 1}, {"classes", {"c0", "c1"}}, {"objects", objects}}
      .dump();
}

// The DataError HttpSource throws for a listing with `objects` (served by `server` at /set/), "" when none.
std::string listing_error(mt::FaultyHttpServer& server, const nlohmann::json& objects) {
  server.serve_file("/set/" + std::string(kListingName), listing_json(objects));
  try {
    HttpSource http(server.url("/set/"));
    return "";
  } catch (const DataError& e) {
    return e.what();
  }
}

// Objects named ../secret.txt made the loader request /secret.txt from the server. The listing is
// checked whole before any object is requested; the first bad entry is named in one line.
TEST(HttpSource, AListingPathOutsideThePrefixIsRefusedBeforeAnyRequest) {
  mt::FaultyHttpServer server(mt::Fault::kNone, "a secret");
  for (const std::string bad :
       {"../secret.txt", "../../../../etc/passwd", "c0/../../secret.txt", "/etc/passwd", "http://127.0.0.1:9/x.jpg",
        "c0/./x.jpg", "c0//x.jpg", "c0\\x.jpg", "c0/\x1b[2J.jpg", "%2e%2e/secret.txt", "c0/%252e%252e/x.jpg"}) {
    SCOPED_TRACE(quoted_path(bad));
    const int before = server.requests();
    const std::string e = listing_error(server, {{"c0/ok.jpg", 8, 0}, {bad, 8, 1}, {"c1/ok.jpg", 8, 1}});
    EXPECT_NE(
        e.find("dataset listing " + server.url("/set/mlbench-listing.json") + ": object 1 " + quoted_path(bad) + ": "),
        std::string::npos)
        << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_TRUE(std::none_of(e.begin(), e.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; })) << e;
    EXPECT_EQ(server.requests(), before + 1);  // the listing, nothing else
  }
}

// Sizes of 10^18 and -5 ended in std::bad_alloc and std::length_error (exit 134, no report).
// A size is an integer from 1 to 1 GiB; a label indexes `classes`.
TEST(HttpSource, AListingSizeOrLabelOutOfRangeIsRefusedNamingTheObject) {
  mt::FaultyHttpServer server(mt::Fault::kNone, "12345678");
  const std::vector<std::pair<nlohmann::json, std::string>> refused = {
      {{"c0/a.jpg", 1000000000000000000ull, 0}, "size 1000000000000000000 is not an integer from 1 to 1073741824"},
      {{"c0/a.jpg", -5, 0}, "size -5 is not"},
      {{"c0/a.jpg", 0, 0}, "size 0 is not"},
      {{"c0/a.jpg", 1.5, 0}, "size 1.5 is not"},
      {{"c0/a.jpg", 1e18, 0}, "is not an integer"},
      {{"c0/a.jpg", (1ull << 30) + 1, 0}, "size 1073741825 is not"},
      {{"c0/a.jpg", "8", 0}, "size \"8\" is not"},
      {{"c0/a.jpg", 8, 2}, "label 2 is not one of the 2 classes"},
      {{"c0/a.jpg", 8, -1}, "label -1 is not"},
      {{"c0/a.jpg", 8, 0.5}, "label 0.5 is not"},
      {{"c0/a.jpg", 8}, "object 1 is not [path, bytes, label]"},
  };
  for (const auto& [object, why] : refused) {
    SCOPED_TRACE(object.dump());
    const std::string e = listing_error(server, {{"c0/ok.jpg", 8, 0}, object});
    EXPECT_NE(e.find(why), std::string::npos) << e;
    if (object.size() == 3) {
      EXPECT_NE(e.find("object 1 \"c0/a.jpg\": "), std::string::npos) << e;
    }
  }
  EXPECT_EQ(listing_error(server, {{"c0/ok.jpg", 8, 0}, {"c1/big.jpg", 1ull << 30, 1}}), "");
}

// `mlbench-datagen listing` writes no listing the loader would refuse.
TEST(HttpSource, AFolderWhoseListingWouldBeRefusedIsNotListed) {
  const TempDir tmp("http_listing_refused");
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path() / "set", 1, 2);
  std::ofstream(root / "c0" / "empty.jpg").flush();
  try {
    write_folder_listing(root);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("\"c0/empty.jpg\": size 0 is not"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(root / kListingName));
}

// 600 MB bodies for objects listed at ~100 KB drove a 32-item run to 2 GB. A body is read only
// up to its listed size plus body_margin: cut there, not retried (the server would send it again).
TEST(HttpClient, ABodyFarLargerThanListedIsCutAtTheListedSizePlusTheMargin) {
  mt::FaultyHttpServer server(mt::Fault::kHugeBody);
  HttpOptions h;
  h.backoff_s = 0.001;
  HttpClient client(h);
  Bytes body;
  const std::uint64_t listed = 100000;
  const HttpResult r = client.get(server.url("/c0/x.jpg"), body, listed);
  EXPECT_NE(r.kind, HttpResult::Kind::Ok);
  EXPECT_NE(
      r.error.find(fmt::format("the body passed {} bytes, but the listing says {}", listed + (64u << 10), listed)),
      std::string::npos)
      << r.error;
  EXPECT_EQ(r.attempts, 1);
  EXPECT_TRUE(body.empty());
  EXPECT_LE(body.capacity(), 2 * (listed + (64u << 10)));
  // The client stopped reading: what the server got out is the cut plus the sockets' buffers, not 600 MiB.
  EXPECT_LT(server.body_bytes_sent(), std::uint64_t{64} << 20);
  EXPECT_EQ(server.requests(), 1);
}

// A Content-Length that disagrees with the listing fails at the header: no body byte is kept.
TEST(HttpClient, AContentLengthThatDisagreesWithTheListingFailsAtTheHeader) {
  mt::FaultyHttpServer server(mt::Fault::kHugeContentLength);
  HttpOptions h;
  h.backoff_s = 0.001;
  HttpClient client(h);
  Bytes body;
  const HttpResult r = client.get(server.url("/c0/x.jpg"), body, 100000);
  EXPECT_NE(r.kind, HttpResult::Kind::Ok);
  EXPECT_NE(r.error.find(fmt::format("Content-Length {}, but the listing says 100000 bytes", mt::kHugeBodyBytes)),
            std::string::npos)
      << r.error;
  EXPECT_EQ(r.attempts, 1);
  EXPECT_TRUE(body.empty());
  EXPECT_LT(server.body_bytes_sent(), std::uint64_t{64} << 20);
  // Shorter than listed by more than the margin: refused too (the object is not the one listed).
  mt::FaultyHttpServer small(mt::Fault::kNone, std::string(1000, 'x'));
  const HttpResult s = client.get(small.url("/c0/y.jpg"), body, 100000);
  EXPECT_NE(s.kind, HttpResult::Kind::Ok);
  EXPECT_NE(s.error.find("Content-Length 1000, but the listing says 100000"), std::string::npos) << s.error;
  // Within the margin: read.
  EXPECT_EQ(client.get(small.url("/c0/z.jpg"), body, 1200).kind, HttpResult::Kind::Ok);
  EXPECT_EQ(body.size(), 1000u);
  EXPECT_EQ(client.counters().size_errors, 2);
}

// In a run such a body is a bad sample: counted and replaced, or under --strict-data an error naming the URL.
TEST(HttpSource, ABodyNotOfItsListedSizeIsABadSampleOrAnErrorUnderStrict) {
  const TempDir tmp("http_huge_body");
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path() / "set", 2, 4);
  mt::FaultyHttpServer server(mt::Fault::kHugeBody);
  const ImageFolderReader folder(root);
  nlohmann::json objects = nlohmann::json::array();
  for (std::size_t i = 0; i < folder.size(); ++i) {
    const std::string rel = fs::path(folder.path(i)).lexically_relative(root).generic_string();
    const Bytes b = file_bytes(folder.path(i));
    server.serve_file("/set/" + rel, std::string(b.begin(), b.end()));
    objects.push_back({rel, b.size(), folder.label(i)});
  }
  objects.push_back({"c0/huge.jpg", 100000, 0});
  objects.push_back({"c1/huge.jpg", 100000, 1});
  server.serve_file("/set/" + std::string(kListingName), listing_json(objects));
  auto http = std::make_shared<HttpSource>(server.url("/set/"));
  Loader loader(http, one_epoch(2, 4));
  long items = 0;
  while (auto b = loader.next()) items += b->size;
  EXPECT_EQ(items, 10);
  EXPECT_EQ(loader.stats().corrupt(), 2);
  EXPECT_EQ(loader.to_json().at("source_detail").at("size_errors"), 2);
  EXPECT_LT(server.body_bytes_sent(), std::uint64_t{128} << 20);  // two bodies cut, not 1.2 GB read
  const std::string error = strict_loader_error(http);
  EXPECT_NE(error.find("/huge.jpg: the body passed"), std::string::npos) << error;
}

}  // namespace
