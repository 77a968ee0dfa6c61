// Datasets over HTTP (pipeline/http_source.h) against a real server: nginx on loopback over a
// temporary ImageFolder (tests/support/http_fixtures.h), and a server that misbehaves on purpose.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "pipeline/http_source.h"
#include "pipeline/loader.h"
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
  auto http = std::make_shared<HttpSource>(nginx->url("/set"));  // no trailing slash: one is added
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
  LoaderConfig strict = one_epoch(1, 0);
  strict.strict = true;
  strict.shuffle = false;
  Loader stops(http, strict);
  try {
    while (stops.next()) {
    }
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("HTTP 404"), std::string::npos) << e.what();
  }
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

}  // namespace
