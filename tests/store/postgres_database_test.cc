// The Database contract (store/database.h) on a real PostgreSQL server, and its faults:
// every error one line naming the store (its URL without the password).
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "core/credentials.h"
#include "store/database.h"
#include "store/results_store.h"
#include "tests/store/postgres_server.h"
#include "tests/support/temp_dir.h"

namespace mlbench::store {
namespace {

using testing_support::PostgresServer;
using testing_support::PostgresTest;
using testing_support::TempDir;

// The StoreError `f` throws (fails the test when it throws none).
template <typename F>
std::string store_error(F&& f) {
  try {
    f();
  } catch (const StoreError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no StoreError";
  return "";
}

// What a one-line error naming the store looks like; never the password.
void expect_one_line_naming(const std::string& message, const std::string& url, const std::string& password) {
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_TRUE(message.starts_with(core::mask_credentials(url) + ": ")) << message;
  EXPECT_EQ(message.find(password), std::string::npos) << message;
}

// Runs `f` on a thread and waits up to `limit` for it: a hang fails the test instead of
// the test hanging (the thread is left behind; the process ends with the test).
template <typename F>
bool returns_within(std::chrono::seconds limit, F f) {
  auto done = std::make_shared<std::promise<void>>();
  auto finished = done->get_future();
  std::thread([done, f]() mutable {
    f();
    done->set_value();
  }).detach();
  return finished.wait_for(limit) == std::future_status::ready;
}

using PostgresDatabase = PostgresTest;

TEST_F(PostgresDatabase, ExecRunsSeveralStatementsAndQueryBindsValuesAndNulls) {
  auto db = open_postgresql(url_);
  EXPECT_EQ(db->kind(), "postgresql");
  EXPECT_EQ(db->name(), core::mask_credentials(url_));
  EXPECT_EQ(db->name().find(server_->password()), std::string::npos);
  db->exec("CREATE TABLE t (a TEXT, b BIGINT, c DOUBLE PRECISION); CREATE INDEX t_by_a ON t (a);");
  db->query("INSERT INTO t (a, b, c) VALUES (?, ?, ?)", {"x", "42", "1.5"});
  db->query("INSERT INTO t (a, b, c) VALUES (?, ?, ?)", {"y", std::nullopt, std::nullopt});
  const auto rows = db->query("SELECT a, b, c FROM t WHERE a = ? OR b IS NULL ORDER BY a", {"x"});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (Row{"x", "42", "1.5"}));
  EXPECT_EQ(rows[1], (Row{"y", std::nullopt, std::nullopt}));
  EXPECT_TRUE(db->query("SELECT a FROM t WHERE a = ?", {"none"}).empty());
}

TEST_F(PostgresDatabase, QuestionMarksInQuotesAreNotPlaceholders) {
  auto db = open_postgresql(url_);
  const auto rows = db->query("SELECT '?', 'it''s ?', ?, \"?col\" FROM (SELECT 1 AS \"?col\") s", {"v"});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0], (Row{"?", "it's ?", "v", "1"}));
  const std::string e = store_error([&] { db->query("SELECT ?, ?", {"only one"}); });
  expect_one_line_naming(e, url_, server_->password());
  EXPECT_NE(e.find("1 values for 2 placeholders"), std::string::npos) << e;
}

TEST_F(PostgresDatabase, AFailingStatementIsOneLineNamingTheStore) {
  auto db = open_postgresql(url_);
  const std::string e = store_error([&] { db->query("SELECT * FROM no_such_table WHERE a = ?", {"x"}); });
  expect_one_line_naming(e, url_, server_->password());
  EXPECT_NE(e.find("relation \"no_such_table\" does not exist"), std::string::npos) << e;
  const std::string syntax = store_error([&] { db->exec("CREATE TABLE ok (a TEXT); SELEC 1"); });
  expect_one_line_naming(syntax, url_, server_->password());
  EXPECT_NE(syntax.find("syntax error"), std::string::npos) << syntax;
  // The connection stays usable.
  EXPECT_EQ(db->query("SELECT 1 + 1"), (std::vector<Row>{{"2"}}));
}

TEST_F(PostgresDatabase, AWriteTransactionRollsBackOnAnException) {
  auto db = open_postgresql(url_);
  db->exec("CREATE TABLE t (a TEXT PRIMARY KEY)");
  EXPECT_THROW(in_write_transaction(*db,
                                    [&] {
                                      db->query("INSERT INTO t VALUES (?)", {"kept?"});
                                      throw std::runtime_error("the work failed");
                                    }),
               std::runtime_error);
  EXPECT_TRUE(db->query("SELECT a FROM t").empty());
  // A failed statement aborts the transaction: its rows are gone, the error is the statement's.
  const std::string e = store_error([&] {
    in_write_transaction(*db, [&] {
      db->query("INSERT INTO t VALUES (?)", {"a"});
      db->query("INSERT INTO t VALUES (?)", {"a"});
    });
  });
  EXPECT_NE(e.find("duplicate key"), std::string::npos) << e;
  EXPECT_TRUE(db->query("SELECT a FROM t").empty());
  // A commit after a failure inside the transaction is an error, not a silent rollback.
  db->begin_write();
  EXPECT_THROW(db->query("SELECT * FROM no_such_table"), StoreError);
  const std::string commit = store_error([&] { db->commit(); });
  EXPECT_NE(commit.find("rolled back"), std::string::npos) << commit;
  in_write_transaction(*db, [&] { db->query("INSERT INTO t VALUES (?)", {"b"}); });
  EXPECT_EQ(db->query("SELECT a FROM t"), (std::vector<Row>{{"b"}}));
}

TEST_F(PostgresDatabase, WritersQueueOnTheAdvisoryLock) {
  auto first = open_postgresql(url_);
  auto second = open_postgresql(url_);
  auto watcher = open_postgresql(url_);
  first->exec("CREATE TABLE t (n BIGINT)");
  first->begin_write();
  std::atomic<bool> second_in = false;
  std::thread t([&] {
    in_write_transaction(*second, [&] {
      second_in = true;
      second->query("INSERT INTO t VALUES (2)");
    });
  });
  // Wait (bounded) until the second writer waits for the lock the first one holds.
  bool waiting = false;
  for (int i = 0; i < 600 && !waiting; ++i) {
    waiting = watcher->query("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")[0][0] == "1";
    if (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(waiting);
  EXPECT_FALSE(second_in);
  first->query("INSERT INTO t VALUES (1)");
  first->commit();
  t.join();
  EXPECT_TRUE(second_in);
  EXPECT_EQ(first->query("SELECT n FROM t ORDER BY n"), (std::vector<Row>{{"1"}, {"2"}}));
}

// Faults (docs/reliability.md): a store that cannot be reached is one line, soon.

TEST(PostgresFaults, NoServerAtTheSocketIsOneLineNamingTheStore) {
  if (!postgresql_available()) GTEST_SKIP() << "this mlbench was built without PostgreSQL (libpq-dev)";
  TempDir empty("pg_none");
  const std::string url = "postgresql://mlbench:secret@/results?host=" + empty.path().string();
  const std::string e = store_error([&] { ResultsStore::open(url); });
  expect_one_line_naming(e, url, "secret");
  EXPECT_TRUE(e.starts_with("postgresql://mlbench:***@/results?host=")) << e;
  EXPECT_NE(e.find("No such file or directory"), std::string::npos) << e;
}

// A server that accepts the connection and never answers (a hung host): the connect
// timeout, the URL's or the default one, ends the wait.
class SilentServer {
 public:
  SilentServer() : dir_("pg_silent") {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = (dir_.path() / ".s.PGSQL.5432").string();
    path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd_, 8) != 0) {
      throw std::runtime_error("cannot listen on " + path);
    }
  }
  ~SilentServer() { ::close(fd_); }
  std::string url(const std::string& query = "") const {
    return "postgresql://mlbench:secret@/results?host=" + dir_.path().string() + query;
  }

 private:
  TempDir dir_;
  int fd_ = -1;
};

TEST(PostgresFaults, AServerThatNeverAnswersTimesOutAtTheUrlsConnectTimeout) {
  if (!postgresql_available()) GTEST_SKIP() << "this mlbench was built without PostgreSQL (libpq-dev)";
  SilentServer silent;
  const std::string url = silent.url("&connect_timeout=2");
  auto message = std::make_shared<std::string>();
  ASSERT_TRUE(returns_within(std::chrono::seconds(60), [url, message] {
    *message = store_error([&] { open_postgresql(url); });
  })) << "open_postgresql hung on a server that never answers";
  expect_one_line_naming(*message, url, "secret");
  EXPECT_NE(message->find("timeout"), std::string::npos) << *message;
}

TEST(PostgresFaults, AServerThatNeverAnswersTimesOutWithoutAConnectTimeoutInTheUrl) {
  if (!postgresql_available()) GTEST_SKIP() << "this mlbench was built without PostgreSQL (libpq-dev)";
  if (std::getenv("PGCONNECT_TIMEOUT")) GTEST_SKIP() << "PGCONNECT_TIMEOUT is set: the default is not used";
  SilentServer silent;
  const std::string url = silent.url();
  auto message = std::make_shared<std::string>();
  ASSERT_TRUE(returns_within(std::chrono::seconds(60), [url, message] {
    *message = store_error([&] { open_postgresql(url); });
  })) << "open_postgresql hung on a server that never answers";
  expect_one_line_naming(*message, url, "secret");
  EXPECT_NE(message->find("timeout"), std::string::npos) << *message;
}

using PostgresServerFaults = PostgresTest;

TEST_F(PostgresServerFaults, AWrongPasswordIsOneLine) {
  const std::string url = server_->url_with_password("results", "not-the-password");
  const std::string e = store_error([&] { ResultsStore::open(url); });
  expect_one_line_naming(e, url, "not-the-password");
  EXPECT_NE(e.find("password authentication failed for user \"mlbench\""), std::string::npos) << e;
}

TEST_F(PostgresServerFaults, NoSuchDatabaseIsOneLine) {
  const std::string url = server_->url("no_such_database");
  const std::string e = store_error([&] { ResultsStore::open(url); });
  expect_one_line_naming(e, url, server_->password());
  EXPECT_NE(e.find("database \"no_such_database\" does not exist"), std::string::npos) << e;
}

TEST_F(PostgresServerFaults, AServerStoppedUnderAnOpenStoreIsOneLineAndAReopenWorksOnceItIsBack) {
  auto store = ResultsStore::open(url_);
  RunRecord run;
  run.run_id = "r1";
  run.suite = "fast";
  store->record_run(run);
  server_->stop();
  struct Restart {
    PostgresServer* s;
    ~Restart() { s->start(); }
  } restart{server_};
  const std::string e = store_error([&] { store->runs(); });
  expect_one_line_naming(e, url_, server_->password());
  const std::string reopen = store_error([&] { ResultsStore::open(url_); });
  expect_one_line_naming(reopen, url_, server_->password());
  server_->start();
  auto again = ResultsStore::open(url_);
  ASSERT_EQ(again->runs().size(), 1u);
  EXPECT_EQ(again->runs()[0].run_id, "r1");
}

}  // namespace
}  // namespace mlbench::store
