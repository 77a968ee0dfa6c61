// One connection to a results database, whatever the server: SQLite (a file, the
// default) or PostgreSQL (a team's server). The store (results_store.h) writes its
// SQL once against this interface; the two back-ends differ only here.
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mlbench::store {

// A store that cannot be opened, read or written: one line naming the store and the
// cause ("results.db: database is locked", "postgresql://...: connection refused").
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A value as text (nullopt: SQL NULL). Numbers go in and come out as text; the
// columns' types make them numbers in the database.
using Value = std::optional<std::string>;
using Row = std::vector<Value>;

class Database {
 public:
  virtual ~Database() = default;
  // "sqlite" or "postgresql".
  virtual std::string kind() const = 0;
  // What error messages name: the file, or the URL with its password masked (core::mask_credentials).
  virtual std::string name() const = 0;
  // Statements without parameters or results (several, separated by ';').
  virtual void exec(const std::string& sql) = 0;
  // One statement with '?' placeholders bound to `params` in order; its rows.
  virtual std::vector<Row> query(const std::string& sql, const std::vector<Value>& params = {}) = 0;
  // A write transaction that holds the database's write lock from its start (SQLite:
  // BEGIN IMMEDIATE, waiting up to the busy timeout; PostgreSQL: BEGIN plus a
  // transaction-level advisory lock), so that concurrent writers queue instead of failing.
  virtual void begin_write() = 0;
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;
};

// How a store is opened: to write (and migrate), or only to read (the views of mlbench-report).
enum class Access { kReadWrite, kReadOnly };

// `path`: a SQLite file, created when missing (its folder must exist). WAL journal,
// busy timeout `busy_timeout_ms`. Throws StoreError: not a database, read-only, ...
// Access::kReadOnly opens an existing file read-only (SQLite's mode=ro), and immutable
// where its folder cannot be written (a read-only mount: no -shm file can be made there,
// and nothing can change the file under the reader); it creates nothing.
std::unique_ptr<Database> open_sqlite(const std::string& path, int busy_timeout_ms = 60000,
                                      Access access = Access::kReadWrite);

// `url`: postgresql://user:password@host:port/db?host=/socket/dir (libpq's URI).
// Throws StoreError (server down, password refused, ...) or, in a build without
// libpq, StoreError saying so.
std::unique_ptr<Database> open_postgresql(const std::string& url);
bool postgresql_available();

// Runs `work` in a write transaction: commits, or rolls back and rethrows.
template <typename F>
auto in_write_transaction(Database& db, F&& work) {
  db.begin_write();
  try {
    if constexpr (std::is_void_v<decltype(work())>) {
      work();
      db.commit();
    } else {
      auto result = work();
      db.commit();
      return result;
    }
  } catch (...) {
    db.rollback();
    throw;
  }
}

}  // namespace mlbench::store
