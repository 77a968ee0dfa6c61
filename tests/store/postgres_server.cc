// A private PostgreSQL server for tests (postgres_server.h).
#include "tests/store/postgres_server.h"

#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "core/environment.h"
#include "store/database.h"
#include "tests/support/temp_dir.h"

namespace mlbench::testing_support {

namespace fs = std::filesystem;

namespace {

// The highest /usr/lib/postgresql/<version>/bin with initdb and postgres (or
// $MLBENCH_POSTGRES_BIN); "" when there is none.
fs::path server_bin_dir() {
  if (const char* env = std::getenv("MLBENCH_POSTGRES_BIN"); env && *env) return env;
  fs::path best;
  double best_version = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const fs::path bin = e.path() / "bin";
    if (!fs::exists(bin / "initdb") || !fs::exists(bin / "postgres")) continue;
    double version = 0;
    try {
      version = std::stod(e.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    if (version > best_version) {
      best_version = version;
      best = bin;
    }
  }
  return best;
}

std::string random_password() {
  std::random_device rd;
  std::string pw;
  for (int i = 0; i < 4; ++i) pw += fmt::format("{:08x}", rd());
  return pw;
}

std::string tail_of(const fs::path& file, std::size_t max_chars = 2000) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  return s.size() > max_chars ? s.substr(s.size() - max_chars) : s;
}

}  // namespace

std::string PostgresServer::unavailable_reason() {
  if (!store::postgresql_available()) return "this mlbench was built without PostgreSQL (libpq-dev)";
  const fs::path bin = server_bin_dir();
  if (bin.empty()) return "PostgreSQL server not installed: no /usr/lib/postgresql/*/bin/initdb";
  if (!fs::exists(bin / "initdb") || !fs::exists(bin / "postgres")) {
    return "PostgreSQL server not installed: no initdb and postgres in MLBENCH_POSTGRES_BIN=" + bin.string();
  }
  return "";
}

PostgresServer::PostgresServer() : bin_(server_bin_dir()), password_(random_password()) {
  if (const std::string why = unavailable_reason(); !why.empty()) throw std::runtime_error(why);
  TempDir tmp("pg");  // removed again unless the server starts
  dir_ = tmp.path();
  // initdb and postgres refuse to run as root: as root, the server runs as nobody.
  if (geteuid() == 0) {
    const passwd* pw = getpwnam("nobody");
    if (pw == nullptr) throw std::runtime_error("running as root and there is no user 'nobody' to run PostgreSQL as");
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    if (chown(dir_.c_str(), *uid_, *gid_) != 0) throw std::runtime_error("chown " + dir_.string() + " failed");
  }
  const fs::path pwfile = dir_ / "password";
  std::ofstream(pwfile) << password_ << "\n";
  chmod(pwfile.c_str(), 0600);
  if (uid_ && chown(pwfile.c_str(), *uid_, *gid_) != 0) throw std::runtime_error("chown " + pwfile.string());
  run_tool((bin_ / "initdb").string(),
           {"-D", (dir_ / "data").string(), "-U", kUser, "--auth=scram-sha-256", "--pwfile=" + pwfile.string(), "-E",
            "UTF8", "--no-locale", "--no-sync"},
           "initdb");
  fs::remove(pwfile);
  start();
  create_database("results");
  tmp.keep();  // from here on the destructor removes it
}

PostgresServer::~PostgresServer() {
  try {
    stop();
  } catch (const std::exception&) {
    // the Process's destructor kills it
  }
  server_.reset();
  remove_tree(dir_);
}

std::string PostgresServer::url(const std::string& database) const {
  return url_with_password(database, password_);
}

std::string PostgresServer::url_with_password(const std::string& database, const std::string& password) const {
  return fmt::format("postgresql://{}:{}@/{}?host={}", kUser, password, database, dir_.string());
}

core::ProcessSpec PostgresServer::as_server_user(const std::string& program, std::vector<std::string> args) const {
  core::ProcessSpec spec;
  spec.executable = program;
  spec.args = std::move(args);
  spec.working_dir = dir_.string();  // the test's own folder may be closed to nobody
  if (uid_) {
    const uid_t uid = *uid_;
    const gid_t gid = *gid_;
    const pid_t parent = getpid();
    // After fork, before exec: drop to nobody, then ask again to die with the test
    // (changing the user clears the parent-death signal).
    spec.child_setup = [uid, gid, parent]() -> int {
      if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0) return errno;
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return errno;
      if (getppid() != parent) return ESRCH;
      return 0;
    };
    spec.child_setup_what = "switching to user nobody for PostgreSQL failed";
  }
  return spec;
}

void PostgresServer::run_tool(const std::string& program, std::vector<std::string> args,
                              const std::string& what) const {
  core::ProcessSpec spec = as_server_user(program, std::move(args));
  spec.output = core::Output::Capture;
  const core::CommandResult r = core::run_captured(spec, 120);
  if (r.timed_out || !r.status.exited || r.status.code != 0) {
    throw std::runtime_error(fmt::format("{} failed (exit {}{}):\n{}", what, r.status.shell_code(),
                                         r.timed_out ? ", timed out" : "", r.output));
  }
}

void PostgresServer::start() {
  if (server_) return;
  const fs::path data = dir_ / "data";
  const fs::path log = dir_ / "server.log";
  // Only a Unix socket in our folder; fsync off: a test's data need not survive a crash.
  core::ProcessSpec spec = as_server_user((bin_ / "postgres").string(),
                                          {"-D", data.string(), "-k", dir_.string(), "-c", "listen_addresses=", "-c",
                                           "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=50"});
  spec.output = core::Output::File;
  spec.log_path = log.string();
  server_.emplace(spec);
  // Ready when its postmaster.pid (of this pid, not a killed one's) says "ready" (as pg_ctl -w).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    if (const auto ended = server_->try_wait()) {
      server_.reset();
      throw std::runtime_error(
          fmt::format("postgres exited ({}) before it was ready:\n{}", ended->shell_code(), tail_of(log)));
    }
    std::ifstream pidfile(data / "postmaster.pid");
    std::vector<std::string> lines;
    for (std::string line; std::getline(pidfile, line);) lines.push_back(line);
    if (lines.size() >= 8 && lines[0] == std::to_string(server_->pid()) && lines[7].starts_with("ready")) return;
    if (std::chrono::steady_clock::now() > deadline) {
      server_->stop(1);
      server_.reset();
      throw std::runtime_error("postgres was not ready after 60 s:\n" + tail_of(log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void PostgresServer::stop() {
  if (!server_) return;
  // SIGQUIT: immediate shutdown (it signals its backends, which sit in their own sessions).
  ::kill(server_->pid(), SIGQUIT);
  if (!server_->wait_for(30)) server_->stop(1);
  server_.reset();
}

std::string PostgresServer::create_database(const std::string& name) {
  core::ProcessSpec spec;
  spec.executable = (bin_ / "createdb").string();
  spec.args = {"-h", dir_.string(), "-U", kUser, name};
  spec.env = core::current_environment();
  (*spec.env)["PGPASSWORD"] = password_;
  spec.output = core::Output::Capture;
  const core::CommandResult r = core::run_captured(spec, 60);
  if (r.timed_out || !r.status.exited || r.status.code != 0) {
    throw std::runtime_error(fmt::format("createdb {} failed (exit {}):\n{}", name, r.status.shell_code(), r.output));
  }
  return url(name);
}

PostgresServer& shared_postgres_server() {
  static std::unique_ptr<PostgresServer> server = std::make_unique<PostgresServer>();
  return *server;
}

void PostgresTest::SetUp() {
  if (const std::string why = PostgresServer::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  server_ = &shared_postgres_server();
  // Database names: lower case letters, digits and '_', 63 bytes at most.
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = fmt::format("{}_{}", test->test_suite_name(), test->name());
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '_';
  if (name.size() > 63) name = fmt::format("{}_{:016x}", name.substr(0, 46), std::hash<std::string>()(name));
  url_ = server_->create_database(name);
}

}  // namespace mlbench::testing_support
