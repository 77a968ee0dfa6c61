// Test support: servers for the tests of datasets read over HTTP (docs/pipeline.md, "Datasets over HTTP"): a
// real nginx on loopback over a folder, a proxy that adds latency per request
// (delay_proxy.h), and an in-process HTTP/1.1 server that misbehaves on purpose.
// Library mlbench_test_http (tests/support/CMakeLists.txt); its own tests are
// tests/support/http_fixtures_test.cc; docs/reliability.md, "Servers in the HTTP
// tests", says how they are used.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/delay_proxy.h"
#include "tests/support/tcp_service.h"

namespace mlbench::testing {

// --- nginx ---------------------------------------------------------------------------

struct NginxOptions {
  std::filesystem::path root;                                 // served as /
  std::vector<std::pair<std::string, int>> status_overrides;  // exact URL path -> status (e.g. {"/set/a/x.jpg", 500})
  std::string limit_rate;  // nginx limit_rate per connection ("" = none), e.g. "10m" (digits, then k or m)
};

// The nginx executable: $MLBENCH_NGINX when set, else /usr/sbin/nginx.
std::filesystem::path nginx_executable();

// Why nginx cannot be used here ("nginx not found at /usr/sbin/nginx (...)"), or ""
// when its executable is there.
std::string nginx_unavailable();

// Adds read (files) and read + search (folders) permission for others to `root`
// and everything under it, so that nginx running as `nobody` can serve it (a
// TempDir is made 0700). The folders above `root` are not changed.
void make_readable_by_others(const std::filesystem::path& root);

// nginx over a folder, on 127.0.0.1 at a free port. See NOTE [nginx in the tests].
//
// NOTE [nginx in the tests]
// One process (master_process off, daemon off), a child of the test, in a private
// temporary prefix (nginx.conf, error.log, stderr.log, pid, temp folders): no
// worker is left behind when the test dies (PR_SET_PDEATHSIG, SIGKILL; Linux sends
// it when the *thread* that started nginx exits, so start it from the main
// thread, e.g. in SetUpTestSuite), and stop() is immediate. Run as root, the test
// drops nginx to `nobody` between fork and exec (nginx's own `user` directive
// would leave a root master whose workers outlive a SIGKILL), so the root and
// every folder above it must be readable by `nobody`: start() checks that as
// `nobody` and names the first folder that is not (make_readable_by_others).
// keepalive_requests 100000, sendfile on, access log off, 404s not logged.
class NginxServer {
 public:
  // Starts nginx; waits until its port accepts connections (at most 10 s).
  // nullptr with `why_not` set (one line) when nginx is missing
  // (nginx_unavailable()), the options are wrong, or nginx fails to start (with
  // its error log's last line).
  static std::unique_ptr<NginxServer> start(const NginxOptions& opts, std::string& why_not);
  ~NginxServer();  // stop(), then removes the prefix
  NginxServer(const NginxServer&) = delete;
  NginxServer& operator=(const NginxServer&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& path = "/") const;  // "http://127.0.0.1:PORT" + path
  // Stops nginx now (SIGQUIT; SIGKILL after 5 s): the port refuses connections
  // from then on (a server that goes away mid-run). Idempotent.
  void stop();

  pid_t pid() const { return pid_; }  // 0 once stopped
  const std::filesystem::path& prefix() const { return prefix_; }
  std::string error_log() const;  // what nginx wrote to its error log (and stderr)

 private:
  NginxServer() = default;

  pid_t pid_ = 0;
  int port_ = 0;
  std::filesystem::path prefix_;
  bool keep_prefix_ = false;  // nginx itself failed to start: its config and logs stay for a look
};

// --- a misbehaving HTTP/1.1 server --------------------------------------------------

// What FaultyHttpServer does with each request (after reading its header).
enum class Fault {
  kTruncatedBody,      // 200 announcing the body's length, half of it sent, then the connection closed
                       // (curl: CURLE_PARTIAL_FILE)
  kNeverAnswers,       // no answer; the connection is held until the client or the server closes it
                       // (curl: CURLE_OPERATION_TIMEDOUT past its timeout)
  kCloseAtOnce,        // the connection closed without an answer (curl: CURLE_GOT_NOTHING)
  kStatus500,          // 500 with the body, keep-alive (curl: response code 500; CURLE_HTTP_RETURNED_ERROR
                       // with CURLOPT_FAILONERROR)
  kStallsMidBody,      // 200 announcing the body's length, half of it sent, then nothing more while the
                       // connection is held (a server that hangs mid-transfer: curl's timeout or low-speed limit)
  kNone,               // 200 with the body, keep-alive: a well-behaved control
  kHugeBody,           // 200 with no Content-Length and Connection: close, then kHugeBodyBytes of 'x' (a body
                       // far larger than listed: the client must cut it)
  kHugeContentLength,  // 200 announcing kHugeBodyBytes, then sending them (the client must refuse at the header)
};

// What kHugeBody and kHugeContentLength send: 600 MiB, as the objects that drove a run to 2 GB.
inline constexpr std::size_t kHugeBodyBytes = std::size_t{600} << 20;

// "truncated-body", "never-answers", ...: for test names and messages.
const char* fault_name(Fault fault);

// An in-process HTTP/1.1 server on 127.0.0.1 at a free port, a thread per
// connection, that answers every request (any method and path, but those of
// serve_file) with `fault`.
class FaultyHttpServer {
 public:
  explicit FaultyHttpServer(Fault fault, std::string body = std::string(1000, 'x'));
  ~FaultyHttpServer();  // unblocks every connection it holds, joins its threads
  FaultyHttpServer(const FaultyHttpServer&) = delete;
  FaultyHttpServer& operator=(const FaultyHttpServer&) = delete;

  int port() const { return service_->port(); }
  std::string url(const std::string& path = "/") const;  // "http://127.0.0.1:PORT" + path
  // Requests seen (counted when a request's header has arrived, before the fault
  // acts: a client that saw the fault sees the count).
  int requests() const { return requests_.load(); }
  int connections() const { return connections_.load(); }  // connections accepted
  // Body bytes the kernel took from the server (the huge bodies' whole 64 KiB chunks, and
  // serve_file's bodies): at least what a client was sent before it stopped reading, at
  // most that plus the socket buffers between them.
  std::uint64_t body_bytes_sent() const { return body_bytes_sent_.load(); }
  // Answers requests for exactly `path` (e.g. "/set/mlbench-listing.json") with 200 and `body`,
  // whatever the fault. Call before the requests.
  void serve_file(const std::string& path, std::string body);

 private:
  void serve(int fd, int stop_fd);
  // Streams kHugeBodyBytes in 64 KiB chunks until done, the client is gone or the server stops.
  void send_huge_body(int fd, int stop_fd);

  Fault fault_;
  std::string body_;
  std::mutex files_mu_;
  std::map<std::string, std::string> files_;  // serve_file's
  std::atomic<std::uint64_t> body_bytes_sent_{0};
  std::atomic<int> requests_{0};
  std::atomic<int> connections_{0};
  std::unique_ptr<TcpService> service_;  // last: stopped first, while the members above still exist
};

}  // namespace mlbench::testing

// In a test body or SetUp(): skips the test, printing why, when nginx is not
// installed (nginx_unavailable()).
#define MLBENCH_SKIP_WITHOUT_NGINX()                                                                     \
  do {                                                                                                   \
    if (const std::string mlbench_why_ = ::mlbench::testing::nginx_unavailable(); !mlbench_why_.empty()) \
      GTEST_SKIP() << mlbench_why_;                                                                      \
  } while (0)

// In a test body or SetUp(): `server` (a std::unique_ptr<NginxServer>) =
// NginxServer::start(opts); the test skips, printing why, when nginx is not
// installed, and fails with nginx's reason when it is but does not start.
#define MLBENCH_START_NGINX(server, opts)                                                 \
  do {                                                                                    \
    std::string mlbench_why_;                                                             \
    (server) = ::mlbench::testing::NginxServer::start((opts), mlbench_why_);              \
    if (!(server)) {                                                                      \
      if (!::mlbench::testing::nginx_unavailable().empty()) GTEST_SKIP() << mlbench_why_; \
      FAIL() << mlbench_why_;                                                             \
    }                                                                                     \
  } while (0)
