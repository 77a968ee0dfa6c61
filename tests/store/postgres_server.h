// Test support: a private PostgreSQL server for the results store's tests. initdb in a
// temp folder, the server listening only on a Unix socket in that folder (no TCP port,
// no system service), a password-protected superuser, and one database per test.
// Started as an unprivileged user (nobody) when the tests run as root: initdb and
// postgres refuse root. The server is a child of the test process and dies with it
// (also when ctest kills a test that timed out).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/process.h"

namespace mlbench::testing_support {

class PostgresServer {
 public:
  static constexpr const char* kUser = "mlbench";

  // Why no server can be started here ("" when one can): a build without libpq, or no
  // PostgreSQL server binaries (the highest /usr/lib/postgresql/<version>/bin, or
  // $MLBENCH_POSTGRES_BIN).
  static std::string unavailable_reason();

  // initdb, start, wait until it accepts connections (60 s at most). Throws
  // std::runtime_error with the server's log when it cannot.
  PostgresServer();
  // Stops the server (immediate shutdown) and removes the folder.
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // postgresql://mlbench:<password>@/<database>?host=<socket dir>
  std::string url(const std::string& database) const;
  // The same with another password (a wrong one, for the fault tests).
  std::string url_with_password(const std::string& database, const std::string& password) const;
  const std::filesystem::path& socket_dir() const { return dir_; }
  const std::string& password() const { return password_; }

  // Creates an empty database (createdb); its URL.
  std::string create_database(const std::string& name);
  // Immediate shutdown, and start again on the same data (the fault tests).
  void stop();
  void start();
  bool running() const { return server_.has_value(); }

 private:
  core::ProcessSpec as_server_user(const std::string& program, std::vector<std::string> args) const;
  void run_tool(const std::string& program, std::vector<std::string> args, const std::string& what) const;

  std::filesystem::path bin_;
  std::filesystem::path dir_;
  std::string password_;
  std::optional<unsigned> uid_, gid_;  // the server's user when we are root
  std::optional<core::Process> server_;
};

// The one server of this test binary (ctest runs each test in its own process: one per
// test there), started on first use, stopped at exit. Throws what the start threw.
PostgresServer& shared_postgres_server();

// A fixture: the shared server and a fresh database named after the test (url_). Skips
// the test, saying why, where no server can be had.
class PostgresTest : public ::testing::Test {
 protected:
  void SetUp() override;
  PostgresServer* server_ = nullptr;
  std::string url_;
};

}  // namespace mlbench::testing_support
