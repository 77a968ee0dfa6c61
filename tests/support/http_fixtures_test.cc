// Tests of the HTTP test servers (tests/support/http_fixtures.h): nginx serves exact
// bytes with keep-alive and its status overrides and rate limit; the delaying proxy
// adds at least its delay per keep-alive request; each FaultyHttpServer fault does
// what its name says; a stopped server refuses; mlbench-delay-proxy runs and stops.
// Time is only ever bounded from below: CI machines are loaded.
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "tests/support/http_fixtures.h"
#include "tests/support/temp_dir.h"

namespace {

using mlbench::testing::DelayProxy;
using mlbench::testing::Fault;
using mlbench::testing::FaultyHttpServer;
using mlbench::testing::NginxOptions;
using mlbench::testing::NginxServer;
using mlbench::testing_support::TempDir;
using Clock = std::chrono::steady_clock;

// Before any thread: curl_global_init is not thread-safe.
const bool curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;

extern "C" size_t append_to_string(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

// One libcurl easy handle: its connection is kept between get()s (keep-alive).
class Client {
 public:
  Client() : curl_(curl_easy_init()) { EXPECT_TRUE(curl_ready && curl_ != nullptr); }
  ~Client() { curl_easy_cleanup(curl_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  struct Result {
    CURLcode code = CURLE_OK;
    long status = 0;
    long new_connections = 0;  // connections this transfer opened: 0 when it reused one
    std::string body;
    std::chrono::microseconds took{0};
  };

  Result get(const std::string& url, long timeout_ms = 5000, bool fail_on_error = false) {
    Result r;
    curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, append_to_string);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl_, CURLOPT_FAILONERROR, fail_on_error ? 1L : 0L);
    curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
    const auto start = Clock::now();
    r.code = curl_easy_perform(curl_);
    r.took = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &r.status);
    curl_easy_getinfo(curl_, CURLINFO_NUM_CONNECTS, &r.new_connections);
    return r;
  }

 private:
  CURL* curl_;
};

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

// One nginx for the whole binary (NOTE [nginx in the tests]) over a small tree.
class HttpFixtures : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("http_fixtures");
    const auto root = dir_->path() / "root";
    write_file(root / "set/a/x.jpg", "not served: overridden with 500");
    write_file(root / "set/a/y.bin", random_bytes(300000, 1));
    write_file(root / "small.txt", "hello\n");
    mlbench::testing::make_readable_by_others(dir_->path());
    NginxOptions opts;
    opts.root = root;
    opts.status_overrides = {{"/set/a/x.jpg", 500}};
    nginx_ = NginxServer::start(opts, why_not_).release();
  }
  static void TearDownTestSuite() {
    delete nginx_;
    nginx_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (nginx_ == nullptr) {
      if (!mlbench::testing::nginx_unavailable().empty()) GTEST_SKIP() << why_not_;
      FAIL() << why_not_;
    }
  }
  static std::filesystem::path root() { return dir_->path() / "root"; }

  static TempDir* dir_;
  static NginxServer* nginx_;
  static std::string why_not_;
};
TempDir* HttpFixtures::dir_ = nullptr;
NginxServer* HttpFixtures::nginx_ = nullptr;
std::string HttpFixtures::why_not_;

TEST_F(HttpFixtures, NginxServesAFilesExactBytesOnOneKeepAliveConnection) {
  Client client;
  const std::string expected = random_bytes(300000, 1);
  for (int i = 0; i < 3; ++i) {
    const auto r = client.get(nginx_->url("/set/a/y.bin"));
    ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.body == expected) << "got " << r.body.size() << " bytes, expected " << expected.size();
    if (i > 0) {
      EXPECT_EQ(r.new_connections, 0) << "request " << i << " did not reuse the connection";
    }
  }
  const auto missing = client.get(nginx_->url("/no/such/file"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.new_connections, 0);
  EXPECT_EQ(nginx_->url("/a"), "http://127.0.0.1:" + std::to_string(nginx_->port()) + "/a");
}

TEST_F(HttpFixtures, AStatusOverrideAnswersItsStatus) {
  Client client;
  const auto r = client.get(nginx_->url("/set/a/x.jpg"));
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(client.get(nginx_->url("/small.txt")).body, "hello\n");
}

TEST_F(HttpFixtures, NginxRunsAsNobodyWhenTheTestIsRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "not root: nginx runs as this user";
  struct stat st {};
  ASSERT_EQ(::stat(("/proc/" + std::to_string(nginx_->pid())).c_str(), &st), 0);
  const passwd* nobody = ::getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  EXPECT_EQ(st.st_uid, nobody->pw_uid) << "nginx runs as uid " << st.st_uid;
}

TEST_F(HttpFixtures, TheProxyAddsAtLeastItsDelayToEveryKeepAliveRequest) {
  constexpr auto kDelay = std::chrono::milliseconds(30);
  DelayProxy proxy("127.0.0.1", nginx_->port(), kDelay);
  Client client;
  const std::string expected = random_bytes(300000, 1);
  for (int i = 0; i < 4; ++i) {
    const auto r = client.get(proxy.url("/set/a/y.bin"));
    ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
    EXPECT_TRUE(r.body == expected) << "request " << i << ": " << r.body.size() << " bytes";
    EXPECT_GE(r.took, kDelay) << "request " << i;
    if (i > 0) {
      EXPECT_EQ(r.new_connections, 0) << "request " << i << " did not reuse the connection";
    }
  }
  EXPECT_EQ(proxy.connections(), 1);
  EXPECT_EQ(proxy.url("/x"), "http://127.0.0.1:" + std::to_string(proxy.port()) + "/x");
}

TEST(DelayProxy, AnUpstreamThatIsDownClosesTheClientsConnection) {
  int down_port = 0;
  {
    FaultyHttpServer gone(Fault::kNone);
    down_port = gone.port();
  }
  DelayProxy proxy("127.0.0.1", down_port, std::chrono::milliseconds(1));
  Client client;
  const auto r = client.get(proxy.url("/"));
  EXPECT_NE(r.code, CURLE_OK);
  EXPECT_EQ(proxy.upstream_failures(), 1);
}

TEST(DelayProxy, AnUnknownHostIsOneLine) {
  try {
    DelayProxy proxy("no-such-host.invalid", 80, std::chrono::milliseconds(1));
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-host.invalid"), std::string::npos) << e.what();
  }
}

TEST_F(HttpFixtures, LimitRateSlowsATransfer) {
  // nginx lets one second's worth through at once, then rate per second since the
  // request's second: 2.5 x rate needs two more seconds to begin, more than one.
  TempDir dir("http_fixtures_rate");
  write_file(dir.path() / "f.bin", random_bytes(250 * 1024, 2));
  mlbench::testing::make_readable_by_others(dir.path());
  std::unique_ptr<NginxServer> slow;
  MLBENCH_START_NGINX(slow, (NginxOptions{dir.path(), {}, "100k"}));
  Client client;
  const auto r = client.get(slow->url("/f.bin"));
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.body.size(), 250u * 1024);
  EXPECT_GE(r.took, std::chrono::milliseconds(900));
}

TEST_F(HttpFixtures, ABadLimitRateOrStatusOverrideIsRefused) {
  std::string why;
  EXPECT_EQ(NginxServer::start({root(), {}, "10m; evil"}, why), nullptr);
  EXPECT_NE(why.find("limit_rate"), std::string::npos) << why;
  EXPECT_EQ(NginxServer::start({root(), {{"no-slash", 500}}, ""}, why), nullptr);
  EXPECT_NE(why.find("no-slash"), std::string::npos) << why;
  EXPECT_EQ(NginxServer::start({root() / "missing", {}, ""}, why), nullptr);
  EXPECT_NE(why.find("not a folder"), std::string::npos) << why;
}

TEST_F(HttpFixtures, StopMakesThePortRefuse) {
  MLBENCH_SKIP_WITHOUT_NGINX();  // (SetUp has skipped already; this shows the macro's use)
  std::unique_ptr<NginxServer> server;
  MLBENCH_START_NGINX(server, (NginxOptions{root(), {}, ""}));
  Client client;
  ASSERT_EQ(client.get(server->url("/small.txt")).status, 200);
  const auto prefix = server->prefix();
  server->stop();
  EXPECT_EQ(server->pid(), 0);
  Client fresh;
  EXPECT_EQ(fresh.get(server->url("/small.txt")).code, CURLE_COULDNT_CONNECT);
  server.reset();
  EXPECT_FALSE(std::filesystem::exists(prefix));
}

TEST_F(HttpFixtures, ARootNobodyCannotReadIsNamed) {
  if (::geteuid() != 0) GTEST_SKIP() << "not root: nginx runs as this user";
  TempDir dir("http_fixtures_private");  // 0700
  std::filesystem::create_directories(dir.path() / "served");
  std::string why;
  EXPECT_EQ(NginxServer::start({dir.path() / "served", {}, ""}, why), nullptr);
  EXPECT_NE(why.find("nobody"), std::string::npos) << why;
  EXPECT_NE(why.find("enter " + dir.path().string() + " "), std::string::npos) << why;
}

TEST(NginxServer, AMissingNginxIsNamed) {
  const char* old = std::getenv("MLBENCH_NGINX");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("MLBENCH_NGINX", "/no/such/nginx", 1);
  std::string why;
  const auto server = NginxServer::start({"/tmp", {}, ""}, why);
  if (old != nullptr) {
    ::setenv("MLBENCH_NGINX", saved.c_str(), 1);
  } else {
    ::unsetenv("MLBENCH_NGINX");
  }
  EXPECT_EQ(server, nullptr);
  EXPECT_NE(why.find("/no/such/nginx"), std::string::npos) << why;
}

// --- FaultyHttpServer ------------------------------------------------------------------

TEST(FaultyHttpServer, TruncatedBodyIsAPartialFile) {
  FaultyHttpServer server(Fault::kTruncatedBody);
  Client client;
  const auto r = client.get(server.url("/a.jpg"));
  EXPECT_EQ(r.code, CURLE_PARTIAL_FILE) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.body.size(), 500u);
  EXPECT_EQ(server.requests(), 1);
}

TEST(FaultyHttpServer, NeverAnswersTimesOutAndTheServerStillStopsWhileHoldingAConnection) {
  auto server = std::make_unique<FaultyHttpServer>(Fault::kNeverAnswers);
  Client client;
  const auto r = client.get(server->url("/a.jpg"), 200);
  EXPECT_EQ(r.code, CURLE_OPERATION_TIMEDOUT) << curl_easy_strerror(r.code);
  EXPECT_GE(r.took, std::chrono::milliseconds(200));
  EXPECT_EQ(server->requests(), 1);
  // A connection the server still holds when it is destroyed: the destructor must not wait for it.
  std::thread holder([url = server->url("/b.jpg")] {
    Client c;
    c.get(url, 30000);
  });
  while (server->requests() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server.reset();
  holder.join();
}

TEST(FaultyHttpServer, CloseAtOnceGetsNothing) {
  FaultyHttpServer server(Fault::kCloseAtOnce);
  Client client;
  const auto r = client.get(server.url("/a.jpg"));
  EXPECT_EQ(r.code, CURLE_GOT_NOTHING) << curl_easy_strerror(r.code);
  EXPECT_EQ(server.requests(), 1);
}

TEST(FaultyHttpServer, Status500KeepsTheConnection) {
  FaultyHttpServer server(Fault::kStatus500, "oops");
  Client client;
  const auto r = client.get(server.url("/a.jpg"));
  EXPECT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "oops");
  const auto again = client.get(server.url("/b.jpg"), 5000, /*fail_on_error=*/true);
  EXPECT_EQ(again.code, CURLE_HTTP_RETURNED_ERROR) << curl_easy_strerror(again.code);
  EXPECT_EQ(server.requests(), 2);
  EXPECT_EQ(server.connections(), 1);
}

TEST(FaultyHttpServer, StallsMidBodyTimesOutWithHalfTheBody) {
  FaultyHttpServer server(Fault::kStallsMidBody);
  Client client;
  const auto r = client.get(server.url("/a.jpg"), 200);
  EXPECT_EQ(r.code, CURLE_OPERATION_TIMEDOUT) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.body.size(), 500u);
}

TEST(FaultyHttpServer, NoneAnswersTheBody) {
  FaultyHttpServer server(Fault::kNone, "body");
  Client client;
  EXPECT_EQ(client.get(server.url("/")).body, "body");
  EXPECT_EQ(client.get(server.url("/")).new_connections, 0);
  EXPECT_EQ(server.requests(), 2);
  EXPECT_STREQ(mlbench::testing::fault_name(Fault::kTruncatedBody), "truncated-body");
}

// --- mlbench-delay-proxy ---------------------------------------------------------------

pid_t spawn(const std::vector<std::string>& args, const std::filesystem::path& log) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : 0;
}

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(DelayProxyCommand, ForwardsWithItsDelayWritesItsPortAndStopsOnSigterm) {
  TempDir dir("delay_proxy_cmd");
  FaultyHttpServer upstream(Fault::kNone, "through");
  const auto log = dir.path() / "log";
  const auto port_file = dir.path() / "port";
  const pid_t pid = spawn({MLBENCH_DELAY_PROXY, "--upstream", "127.0.0.1:" + std::to_string(upstream.port()),
                           "--delay-ms", "20", "--port-file", port_file.string()},
                          log);
  ASSERT_NE(pid, 0);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!std::filesystem::exists(port_file) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(std::filesystem::exists(port_file)) << read_all(log);
  const std::string port = read_all(port_file);
  Client client;
  const auto r = client.get("http://127.0.0.1:" + port.substr(0, port.find('\n')) + "/");
  EXPECT_EQ(r.body, "through");
  EXPECT_GE(r.took, std::chrono::milliseconds(20));
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 0);
  EXPECT_EQ(read_all(log), "listening on 127.0.0.1:" + port);
}

TEST(DelayProxyCommand, BadFlagsAreOneLineAndExit2) {
  TempDir dir("delay_proxy_bad");
  const auto log = dir.path() / "log";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{MLBENCH_DELAY_PROXY, "--upstream", "nohostport", "--delay-ms", "2"},
        std::vector<std::string>{MLBENCH_DELAY_PROXY, "--upstream", "127.0.0.1:80", "--delay-ms", "-1"},
        std::vector<std::string>{MLBENCH_DELAY_PROXY, "--delay-ms", "2"}}) {
    const pid_t pid = spawn(args, log);
    ASSERT_NE(pid, 0);
    EXPECT_EQ(wait_exit(pid), 2) << read_all(log);
    const std::string out = read_all(log);
    EXPECT_EQ(out.rfind("mlbench-delay-proxy: error: ", 0), 0u) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  }
  const pid_t help = spawn({MLBENCH_DELAY_PROXY, "--help"}, log);
  EXPECT_EQ(wait_exit(help), 0);
  EXPECT_NE(read_all(log).find("--delay-ms"), std::string::npos);
}

}  // namespace
