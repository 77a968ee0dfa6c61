// Test support: nginx on loopback and the misbehaving HTTP server of http_fixtures.h.
#include "tests/support/http_fixtures.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "tests/support/temp_dir.h"

extern char** environ;

namespace mlbench::testing {

namespace {

constexpr auto kStartTimeout = std::chrono::seconds(10);
constexpr auto kStopGrace = std::chrono::seconds(5);
constexpr int kPortAttempts = 3;  // nginx binds a port found free a moment before: another process may take it

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

// A port on 127.0.0.1 that was free a moment ago (0 when none could be had).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

bool accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// A string as an nginx quoted string.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

bool valid_limit_rate(const std::string& rate) {
  if (rate.empty()) return true;
  std::size_t digits = 0;
  while (digits < rate.size() && rate[digits] >= '0' && rate[digits] <= '9') ++digits;
  if (digits == 0) return false;
  return digits == rate.size() ||
         (digits + 1 == rate.size() && std::string("kKmM").find(rate.back()) != std::string::npos);
}

std::string nginx_conf(const NginxOptions& opts, const std::filesystem::path& root, const std::filesystem::path& prefix,
                       int port) {
  const std::string p = prefix.string();
  std::string conf = fmt::format(
      "# Written by mlbench's tests (tests/support/http_fixtures.cc, NOTE [nginx in the tests]).\n"
      "daemon off;\n"
      "master_process off;\n"
      "pid {0}/nginx.pid;\n"
      "error_log {0}/error.log warn;\n"
      "events {{ worker_connections 4096; }}\n"
      "http {{\n"
      "  access_log off;\n"
      "  log_not_found off;\n"
      "  sendfile on;\n"
      "  tcp_nopush on;\n"
      "  tcp_nodelay on;\n"
      "  keepalive_requests 100000;\n"
      "  keepalive_timeout 75s;\n"
      "  server_tokens off;\n"
      "  default_type application/octet-stream;\n"
      "  client_body_temp_path {0}/client_body;\n"
      "  proxy_temp_path {0}/proxy;\n"
      "  fastcgi_temp_path {0}/fastcgi;\n"
      "  uwsgi_temp_path {0}/uwsgi;\n"
      "  scgi_temp_path {0}/scgi;\n"
      "  server {{\n"
      "    listen 127.0.0.1:{1};\n"
      "    server_name localhost;\n"
      "    root {2};\n",
      p, port, quoted(root.string()));
  if (!opts.limit_rate.empty()) conf += fmt::format("    limit_rate {};\n", opts.limit_rate);
  for (const auto& [path, status] : opts.status_overrides) {
    conf += fmt::format("    location = {} {{ return {}; }}\n", quoted(path), status);
  }
  return conf + "  }\n}\n";
}

// What the child reports through the status pipe when it fails before exec.
struct ChildFailure {
  int step;   // a Step
  int error;  // errno
  int index;  // kCheckPath: which of the checked paths
};
enum Step { kSetIds = 1, kCheckPath, kCheckPrefix, kExec };

struct Launch {
  pid_t pid = 0;
  std::string why_not;  // when pid == 0
};

// Forks and execs nginx over `prefix`, as `nobody` when this process is root.
// `search` are the folders above the root that nobody must be able to enter.
Launch launch(const std::filesystem::path& exe, const std::filesystem::path& prefix,
              const std::vector<std::string>& checked, bool as_nobody, uid_t uid, gid_t gid) {
  const std::string p = prefix.string();
  const std::string conf = p + "/nginx.conf", log = p + "/error.log", out = p + "/stderr.log";
  const std::string exe_s = exe.string();
  std::vector<const char*> argv = {exe_s.c_str(), "-p", p.c_str(), "-c", conf.c_str(), "-e", log.c_str(), nullptr};
  // NGINX=fd;fd; would be taken for sockets inherited from an old master.
  std::vector<const char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "NGINX=", 6) != 0) envp.push_back(*e);
  }
  envp.push_back(nullptr);
  std::vector<const char*> paths;
  for (const std::string& s : checked) paths.push_back(s.c_str());

  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int status_pipe[2];
  if (null_fd < 0 || out_fd < 0 || ::pipe2(status_pipe, O_CLOEXEC) != 0) {
    const std::string cause = std::strerror(errno);
    if (null_fd >= 0) ::close(null_fd);
    if (out_fd >= 0) ::close(out_fd);
    return {0, "cannot set up nginx's output in " + p + ": " + cause};
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The child: async-signal-safe calls only (the test may have other threads).
    auto fail = [&](int step, int index) {
      const ChildFailure f{step, errno, index};
      [[maybe_unused]] const ssize_t n = ::write(status_pipe[1], &f, sizeof(f));
      ::_exit(127);
    };
    ::setpgid(0, 0);
    ::dup2(null_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(out_fd, 2);
    if (as_nobody && (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0)) fail(kSetIds, -1);
    // After setuid, which clears the parent-death signal.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGCHLD}) ::signal(sig, SIG_DFL);
    for (std::size_t i = 0; i < paths.size(); ++i) {
      const int mode = i + 1 == paths.size() ? (R_OK | X_OK) : X_OK;  // the root is last
      if (::access(paths[i], mode) != 0) fail(kCheckPath, static_cast<int>(i));
    }
    if (::access(p.c_str(), R_OK | W_OK | X_OK) != 0) fail(kCheckPrefix, -1);
    ::execve(exe_s.c_str(), const_cast<char* const*>(argv.data()), const_cast<char* const*>(envp.data()));
    fail(kExec, -1);
  }
  const int fork_errno = errno;
  ::close(status_pipe[1]);
  ::close(null_fd);
  ::close(out_fd);
  if (pid < 0) {
    ::close(status_pipe[0]);
    return {0, std::string("cannot fork: ") + std::strerror(fork_errno)};
  }
  // Closed by the exec (O_CLOEXEC) when it succeeds: then nothing comes.
  ChildFailure f{};
  ssize_t n;
  do {
    n = ::read(status_pipe[0], &f, sizeof(f));
  } while (n < 0 && errno == EINTR);
  ::close(status_pipe[0]);
  if (n != static_cast<ssize_t>(sizeof(f))) return {pid, ""};
  ::waitpid(pid, nullptr, 0);
  const std::string cause = std::strerror(f.error);
  switch (f.step) {
    case kSetIds:
      return {0, "cannot switch to user nobody to run nginx: " + cause};
    case kCheckPath: {
      const bool is_root = static_cast<std::size_t>(f.index) + 1 == checked.size();
      return {0, fmt::format("nginx runs as nobody (the test runs as root), who cannot {} {} ({}): make the served "
                             "root and every folder above it readable by others (make_readable_by_others, chmod o+rx)",
                             is_root ? "read" : "enter", checked[static_cast<std::size_t>(f.index)], cause)};
    }
    case kCheckPrefix:
      return {0, fmt::format("nginx runs as nobody, who cannot write its prefix {} ({}): set TMPDIR to a folder "
                             "others can enter",
                             p, cause)};
    default:
      return {0, fmt::format("cannot run {}: {}", exe_s, cause)};
  }
}

// Waits for `pid` to end, up to `grace`; true when it did (and was reaped).
bool reaped_within(pid_t pid, std::chrono::milliseconds grace) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (;;) {
    const pid_t r = ::waitpid(pid, nullptr, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

std::filesystem::path nginx_executable() {
  const char* env = std::getenv("MLBENCH_NGINX");
  return env != nullptr && *env != '\0' ? std::filesystem::path(env) : std::filesystem::path("/usr/sbin/nginx");
}

std::string nginx_unavailable() {
  const std::filesystem::path exe = nginx_executable();
  if (::access(exe.c_str(), X_OK) == 0) return "";
  return fmt::format("nginx not found at {} ({}): install nginx-light (scripts/bootstrap.sh does) or set MLBENCH_NGINX",
                     exe.string(), std::strerror(errno));
}

void make_readable_by_others(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  const auto add = [](const fs::path& p, bool folder) {
    fs::permissions(p, folder ? fs::perms::others_read | fs::perms::others_exec : fs::perms::others_read,
                    fs::perm_options::add);
  };
  add(root, true);
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_symlink()) continue;
    add(e.path(), e.is_directory());
  }
}

std::unique_ptr<NginxServer> NginxServer::start(const NginxOptions& opts, std::string& why_not) {
  why_not.clear();
  if (std::string missing = nginx_unavailable(); !missing.empty()) {
    why_not = std::move(missing);
    return nullptr;
  }
  std::error_code ec;
  const std::filesystem::path root = std::filesystem::absolute(opts.root, ec).lexically_normal();
  if (ec || !std::filesystem::is_directory(root)) {
    why_not = "nginx root " + opts.root.string() + " is not a folder";
    return nullptr;
  }
  if (!valid_limit_rate(opts.limit_rate)) {
    why_not = "limit_rate '" + opts.limit_rate + "' is not an nginx rate (digits, then k or m: e.g. 10m)";
    return nullptr;
  }
  for (const auto& [path, status] : opts.status_overrides) {
    if (path.empty() || path[0] != '/' || status < 100 || status > 999) {
      why_not = fmt::format("status override {} -> {}: needs a path from / and a status 100..999", path, status);
      return nullptr;
    }
  }
  const bool as_nobody = ::geteuid() == 0;
  uid_t uid = 0;
  gid_t gid = 0;
  if (as_nobody) {
    const passwd* pw = ::getpwnam("nobody");
    if (pw == nullptr) {
      why_not = "the test runs as root and there is no user nobody to run nginx as";
      return nullptr;
    }
    uid = pw->pw_uid;
    gid = pw->pw_gid;
  }
  // The folders nobody must enter, from / down, then the root itself.
  std::vector<std::string> checked;
  for (std::filesystem::path p = root.parent_path();; p = p.parent_path()) {
    checked.insert(checked.begin(), p.string());
    if (p == p.root_path()) break;
  }
  checked.push_back(root.string());

  std::unique_ptr<NginxServer> server(new NginxServer());
  std::string pattern = (std::filesystem::temp_directory_path() / "mlbench_nginx_XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    why_not = "cannot make a folder for nginx (" + pattern + "): " + std::strerror(errno);
    return nullptr;
  }
  server->prefix_ = pattern;
  if (as_nobody && ::chown(pattern.c_str(), uid, gid) != 0) {
    why_not = "cannot give nginx's folder " + pattern + " to nobody: " + std::strerror(errno);
    return nullptr;  // the destructor removes the prefix
  }
  for (int attempt = 1;; ++attempt) {
    const int port = free_port();
    if (port == 0) {
      why_not = std::string("no free port on 127.0.0.1: ") + std::strerror(errno);
      return nullptr;
    }
    {
      std::ofstream conf(server->prefix_ / "nginx.conf");
      conf << nginx_conf(opts, root, server->prefix_, port);
      if (!conf) {
        why_not = "cannot write " + (server->prefix_ / "nginx.conf").string();
        return nullptr;
      }
    }
    std::filesystem::remove(server->prefix_ / "error.log", ec);
    Launch l = launch(nginx_executable(), server->prefix_, checked, as_nobody, uid, gid);
    if (l.pid == 0) {
      why_not = std::move(l.why_not);
      return nullptr;
    }
    server->pid_ = l.pid;
    server->port_ = port;
    // Ready once nginx has written its pid file (after binding its port) and the port accepts.
    const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
    bool exited = false;
    int status = 0;
    for (;;) {
      if (::waitpid(l.pid, &status, WNOHANG) == l.pid) {
        exited = true;
        break;
      }
      if (read_file(server->prefix_ / "nginx.pid").starts_with(std::to_string(l.pid) + "\n") && accepts(port)) {
        return server;
      }
      if (std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const std::string said = last_line(server->error_log());
    if (!exited) {
      server->stop();
      why_not = fmt::format(
          "nginx did not accept connections on 127.0.0.1:{} within {} s{}{} (its config and logs "
          "are kept in {})",
          port, kStartTimeout.count(), said.empty() ? "" : ": ", said, server->prefix_.string());
      server->keep_prefix_ = true;
      return nullptr;
    }
    server->pid_ = 0;
    if (said.find("Address already in use") != std::string::npos && attempt < kPortAttempts) continue;
    why_not =
        fmt::format("nginx exited at start ({} {}){}{} (its config and logs are kept in {})",
                    WIFEXITED(status) ? "status" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                    said.empty() ? "" : ": ", said, server->prefix_.string());
    server->keep_prefix_ = true;
    return nullptr;
  }
}

NginxServer::~NginxServer() {
  stop();
  if (!prefix_.empty() && !keep_prefix_) testing_support::remove_tree(prefix_);
}

std::string NginxServer::url(const std::string& path) const {
  return loopback_url(port_, path);
}

void NginxServer::stop() {
  if (pid_ == 0) return;
  ::kill(pid_, SIGQUIT);  // with master_process off nginx exits at once, open connections or not
  if (!reaped_within(pid_, kStopGrace)) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_ = 0;
}

std::string NginxServer::error_log() const {
  return read_file(prefix_ / "stderr.log") + read_file(prefix_ / "error.log");
}

// --- FaultyHttpServer ------------------------------------------------------------------

const char* fault_name(Fault fault) {
  switch (fault) {
    case Fault::kTruncatedBody:
      return "truncated-body";
    case Fault::kNeverAnswers:
      return "never-answers";
    case Fault::kCloseAtOnce:
      return "close-at-once";
    case Fault::kStatus500:
      return "status-500";
    case Fault::kStallsMidBody:
      return "stalls-mid-body";
    case Fault::kNone:
      return "none";
    case Fault::kHugeBody:
      return "huge-body";
    case Fault::kHugeContentLength:
      return "huge-content-length";
  }
  return "?";
}

FaultyHttpServer::FaultyHttpServer(Fault fault, std::string body) : fault_(fault), body_(std::move(body)) {
  service_ = std::make_unique<TcpService>(0, [this](int fd, int stop_fd) { serve(fd, stop_fd); });
}

FaultyHttpServer::~FaultyHttpServer() {
  service_->stop();
}

std::string FaultyHttpServer::url(const std::string& path) const {
  return loopback_url(port(), path);
}

void FaultyHttpServer::serve_file(const std::string& path, std::string body) {
  std::lock_guard<std::mutex> lock(files_mu_);
  files_[path] = std::move(body);
}

void FaultyHttpServer::send_huge_body(int fd, int stop_fd) {
  const std::string chunk(64u << 10, 'x');
  for (std::size_t sent = 0; sent < kHugeBodyBytes; sent += chunk.size()) {
    if (!send_all(fd, chunk, stop_fd)) return;
    body_bytes_sent_ += chunk.size();
  }
}

namespace {

// The value of header `name` (lower case) in a request's header block, "" when absent.
std::string header_value(const std::string& head, const std::string& name) {
  std::istringstream in(head);
  for (std::string line; std::getline(in, line);) {
    if (line.size() <= name.size() || line[name.size()] != ':') continue;
    bool same = true;
    for (std::size_t i = 0; i < name.size() && same; ++i) {
      same = std::tolower(static_cast<unsigned char>(line[i])) == name[i];
    }
    if (!same) continue;
    std::string v = line.substr(name.size() + 1);
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.erase(0, 1);
    while (!v.empty() && (v.back() == '\r' || v.back() == ' ' || v.back() == '\t')) v.pop_back();
    return v;
  }
  return "";
}

// Holds the connection until the client closes it or the server stops, reading and dropping what comes.
void hold(int fd, int stop_fd) {
  char buffer[4096];
  while (recv_some(fd, buffer, sizeof(buffer), stop_fd) > 0) {
  }
}

}  // namespace

void FaultyHttpServer::serve(int fd, int stop_fd) {
  ++connections_;
  constexpr std::size_t kMaxHeader = 1 << 20;
  std::string in;
  char buffer[16384];
  for (;;) {
    std::size_t end;
    while ((end = in.find("\r\n\r\n")) == std::string::npos) {
      if (in.size() > kMaxHeader) return;
      const long n = recv_some(fd, buffer, sizeof(buffer), stop_fd);
      if (n <= 0) return;
      in.append(buffer, static_cast<std::size_t>(n));
    }
    const std::string head = in.substr(0, end + 2);
    in.erase(0, end + 4);
    // A request body (a POST's), read and dropped so the next request starts where it should.
    std::size_t body_left = std::strtoull(header_value(head, "content-length").c_str(), nullptr, 10);
    while (body_left > 0) {
      if (in.empty()) {
        const long n = recv_some(fd, buffer, sizeof(buffer), stop_fd);
        if (n <= 0) return;
        in.append(buffer, static_cast<std::size_t>(n));
      }
      const std::size_t take = std::min(body_left, in.size());
      in.erase(0, take);
      body_left -= take;
    }
    ++requests_;
    const bool client_closes = header_value(head, "connection") == "close";
    const auto answer = [&](const char* status, std::size_t length) {
      return fmt::format("HTTP/1.1 {}\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n{}\r\n",
                         status, length, client_closes ? "Connection: close\r\n" : "");
    };
    // The request line's path: "GET /set/x.jpg HTTP/1.1".
    const std::size_t path_at = head.find(' ') + 1;
    const std::string path = head.substr(path_at, head.find(' ', path_at) - path_at);
    std::optional<std::string> file;
    {
      std::lock_guard<std::mutex> lock(files_mu_);
      if (auto it = files_.find(path); it != files_.end()) file = it->second;
    }
    if (file) {
      if (!send_all(fd, answer("200 OK", file->size()) + *file, stop_fd)) return;
      body_bytes_sent_ += file->size();
      if (client_closes) return;
      continue;
    }
    switch (fault_) {
      case Fault::kHugeBody:
        if (!send_all(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
                      stop_fd)) {
          return;
        }
        send_huge_body(fd, stop_fd);
        return;
      case Fault::kHugeContentLength:
        if (!send_all(fd, answer("200 OK", kHugeBodyBytes), stop_fd)) return;
        send_huge_body(fd, stop_fd);
        return;
      case Fault::kTruncatedBody:
      case Fault::kStallsMidBody: {
        // Half the body, and at least one byte fewer than announced (an empty body announces one).
        const std::size_t sent = body_.size() / 2;
        const std::size_t announced = std::max(body_.size(), sent + 1);
        if (!send_all(fd, answer("200 OK", announced) + body_.substr(0, sent), stop_fd)) return;
        if (fault_ == Fault::kStallsMidBody) hold(fd, stop_fd);
        return;
      }
      case Fault::kNeverAnswers:
        hold(fd, stop_fd);
        return;
      case Fault::kCloseAtOnce:
        return;
      case Fault::kStatus500:
        if (!send_all(fd, answer("500 Internal Server Error", body_.size()) + body_, stop_fd)) return;
        break;
      case Fault::kNone:
        if (!send_all(fd, answer("200 OK", body_.size()) + body_, stop_fd)) return;
        break;
    }
    if (client_closes) return;
  }
}

}  // namespace mlbench::testing
