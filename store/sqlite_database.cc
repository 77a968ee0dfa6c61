// The SQLite back-end (database.h): one file, WAL journal so readers do not block the
// writer, a busy timeout so concurrent writers queue, BEGIN IMMEDIATE for writes.
#include <sqlite3.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "store/database.h"

namespace mlbench::store {

namespace {

// "file:" URI of `path` for sqlite3_open_v2 with SQLITE_OPEN_URI: '%', '?' and '#' escaped.
std::string file_uri(const std::string& path, const std::string& query) {
  std::string uri = "file:";
  for (const char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      uri += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    } else {
      uri += c;
    }
  }
  return uri + "?" + query;
}

// Whether nothing can be created beside `path` (a read-only mount, a folder without write
// permission): a WAL store's -shm file cannot be made, so only an immutable open reads it.
bool folder_is_read_only(const std::string& path) {
  const std::filesystem::path file(path);
  const std::string dir = file.has_parent_path() ? file.parent_path().string() : ".";
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) == 0 && (vfs.f_flag & ST_RDONLY) != 0) return true;
  return ::access(dir.c_str(), W_OK) != 0;
}

class SqliteDatabase final : public Database {
 public:
  SqliteDatabase(const std::string& path, int busy_timeout_ms, Access access) : path_(path) {
    int rc = SQLITE_OK;
    if (access == Access::kReadOnly && !path.starts_with("file:")) {
      // Read-only: the views never create the store, and read one on a read-only mount.
      std::error_code ec;
      if (!std::filesystem::exists(path, ec)) throw StoreError(fmt::format("{}: no such file", path_));
      const std::string uri = file_uri(path, folder_is_read_only(path) ? "mode=ro&immutable=1" : "mode=ro");
      rc = sqlite3_open_v2(uri.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
    } else {
      rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    }
    if (rc != SQLITE_OK) {
      const std::string why = db_ ? sqlite3_errmsg(db_) + system_cause() : sqlite3_errstr(rc);
      sqlite3_close(db_);
      db_ = nullptr;
      throw StoreError(fmt::format("{}: {}", path_, why));
    }
    sqlite3_extended_result_codes(db_, 0);
    sqlite3_busy_timeout(db_, busy_timeout_ms);
    // Reading the header here turns "not a database" into an error at open.
    query("SELECT count(*) FROM sqlite_master", {});
    // WAL: one writer and many readers at once. A read-only file keeps its journal mode
    // (readers still work; a write says "readonly database").
    if (access == Access::kReadWrite && !sqlite3_db_readonly(db_, "main")) {
      try {
        query("PRAGMA journal_mode=WAL", {});
        exec("PRAGMA synchronous=NORMAL");
      } catch (const StoreError&) {
        // e.g. a folder that does not allow the -wal file: rollback journal, still correct
      }
    }
    exec("PRAGMA foreign_keys=ON");
  }
  ~SqliteDatabase() override { sqlite3_close_v2(db_); }

  std::string kind() const override { return "sqlite"; }
  std::string name() const override { return path_; }

  void exec(const std::string& sql) override {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string why = err ? err : sqlite3_errmsg(db_);
      sqlite3_free(err);
      throw StoreError(fmt::format("{}: {}{}", path_, why, system_cause()));
    }
  }

  std::vector<Row> query(const std::string& sql, const std::vector<Value>& params) override {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) fail();
    struct Finalize {
      sqlite3_stmt* s;
      ~Finalize() { sqlite3_finalize(s); }
    } finalize{st};
    for (std::size_t i = 0; i < params.size(); ++i) {
      const int idx = static_cast<int>(i) + 1;
      const int rc = params[i] ? sqlite3_bind_text(st, idx, params[i]->c_str(), static_cast<int>(params[i]->size()),
                                                   SQLITE_TRANSIENT)
                               : sqlite3_bind_null(st, idx);
      if (rc != SQLITE_OK) fail();
    }
    std::vector<Row> rows;
    for (;;) {
      const int rc = sqlite3_step(st);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) fail();
      Row row;
      const int n = sqlite3_column_count(st);
      row.reserve(n);
      for (int c = 0; c < n; ++c) {
        const int type = sqlite3_column_type(st, c);
        if (type == SQLITE_NULL) {
          row.emplace_back(std::nullopt);
        } else if (type == SQLITE_FLOAT) {
          // SQLite's own text of a REAL has 15 significant digits; fmt's "{}" is the shortest
          // text that reads back as the same double.
          row.emplace_back(fmt::format("{}", sqlite3_column_double(st, c)));
        } else {
          const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(st, c));
          row.emplace_back(std::string(text, sqlite3_column_bytes(st, c)));
        }
      }
      rows.push_back(std::move(row));
    }
    return rows;
  }

  void begin_write() override { exec("BEGIN IMMEDIATE"); }
  void commit() override { exec("COMMIT"); }
  void rollback() noexcept override {
    if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }

 private:
  [[noreturn]] void fail() { throw StoreError(fmt::format("{}: {}{}", path_, sqlite3_errmsg(db_), system_cause())); }

  // The system's cause of SQLite's last I/O error, which it words only as "disk I/O error"
  // (a full disk while the -shm file grows): " (No space left on device)"; "" for others.
  std::string system_cause() const {
    if (db_ == nullptr) return "";
    const int code = sqlite3_errcode(db_);
    const int err = sqlite3_system_errno(db_);
    if ((code != SQLITE_IOERR && code != SQLITE_FULL && code != SQLITE_CANTOPEN) || err == 0) return "";
    return fmt::format(" ({})", std::strerror(err));
  }

  std::string path_;
  sqlite3* db_ = nullptr;
};

}  // namespace

std::unique_ptr<Database> open_sqlite(const std::string& path, int busy_timeout_ms, Access access) {
  return std::make_unique<SqliteDatabase>(path, busy_timeout_ms, access);
}

}  // namespace mlbench::store
