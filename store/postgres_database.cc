// The PostgreSQL back-end (database.h), on libpq's C API: a team's server, many writers.
// Values travel as text both ways; '?' placeholders become $1..$n; a write transaction
// takes one advisory lock so that writers (and migrations) queue as they do on SQLite.
#include <libpq-fe.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/credentials.h"
#include "store/database.h"

namespace mlbench::store {

namespace {

// The advisory lock every mlbench writer takes ("mlbench\0" in ASCII): any fixed key
// works, as long as every mlbench uses the same one.
constexpr long long kWriteLockKey = 0x6d6c62656e636800LL;
// Seconds a writer waits for the write lock (open_sqlite's default busy timeout).
constexpr int kWriteLockTimeoutS = 60;
// Seconds a connection may take when the URL sets no connect_timeout: a server that is
// down or unreachable is an error, not a hang.
constexpr const char* kDefaultConnectTimeoutS = "10";

// libpq's messages end in a newline and may carry more lines (a hint, the second
// host's attempt); the store's errors are one line.
std::string first_line(const char* text) {
  std::string s = text ? text : "";
  if (const auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  return s.empty() ? "unknown PostgreSQL error" : s;
}

// "? ... '?'" -> "$1 ... '?'": placeholders outside single-quoted literals and
// double-quoted identifiers ('' and "" escapes toggle twice and so stay inside).
std::string numbered_placeholders(const std::string& sql, std::size_t* count) {
  std::string out;
  out.reserve(sql.size() + 8);
  char quote = 0;
  std::size_t n = 0;
  for (const char c : sql) {
    if (quote) {
      if (c == quote) quote = 0;
      out += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c == '?') {
      out += '$';
      out += std::to_string(++n);
    } else {
      out += c;
    }
  }
  *count = n;
  return out;
}

class PostgresDatabase final : public Database {
 public:
  explicit PostgresDatabase(const std::string& url) : name_(core::mask_credentials(url)) {
    // Keywords in order, later ones winning: the default timeout before the URL, so that
    // the URL's own connect_timeout replaces it (and none when PGCONNECT_TIMEOUT says one).
    std::vector<const char*> keys = {"fallback_application_name"};
    std::vector<const char*> values = {"mlbench"};
    if (std::getenv("PGCONNECT_TIMEOUT") == nullptr) {
      keys.push_back("connect_timeout");
      values.push_back(kDefaultConnectTimeoutS);
    }
    keys.insert(keys.end(), {"dbname", nullptr});
    values.insert(values.end(), {url.c_str(), nullptr});
    conn_ = PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/1);
    if (conn_ == nullptr) throw StoreError(fmt::format("{}: out of memory connecting", name_));
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string why = first_line(PQerrorMessage(conn_));
      // "failed: FATAL:  password authentication failed ...": the server's tag says nothing more.
      if (const auto tag = why.find("FATAL:  "); tag != std::string::npos) why.erase(tag, 8);
      PQfinish(conn_);
      conn_ = nullptr;
      // libpq may quote the conninfo it could not parse.
      throw StoreError(fmt::format("{}: {}", name_, core::mask_credentials(why)));
    }
    // NOTICEs ("relation ... already exists, skipping") would go to stderr by default.
    PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);
  }
  ~PostgresDatabase() override { PQfinish(conn_); }

  std::string kind() const override { return "postgresql"; }
  std::string name() const override { return name_; }

  void exec(const std::string& sql) override { Result res(check(PQexec(conn_, sql.c_str()))); }

  std::vector<Row> query(const std::string& sql, const std::vector<Value>& params) override {
    std::size_t placeholders = 0;
    const std::string numbered = numbered_placeholders(sql, &placeholders);
    if (placeholders != params.size()) {
      throw StoreError(fmt::format("{}: {} values for {} placeholders in: {}", name_, params.size(), placeholders,
                                   first_line(sql.c_str())));
    }
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    Result res(check(PQexecParams(conn_, numbered.c_str(), static_cast<int>(values.size()), /*paramTypes=*/nullptr,
                                  values.data(), /*paramLengths=*/nullptr, /*paramFormats=*/nullptr,
                                  /*resultFormat: text*/ 0)));
    std::vector<Row> rows;
    const int nrows = PQntuples(res.get());
    const int ncols = PQnfields(res.get());
    rows.reserve(nrows);
    for (int r = 0; r < nrows; ++r) {
      Row row;
      row.reserve(ncols);
      for (int c = 0; c < ncols; ++c) {
        if (PQgetisnull(res.get(), r, c)) {
          row.emplace_back(std::nullopt);
        } else {
          row.emplace_back(std::string(PQgetvalue(res.get(), r, c), PQgetlength(res.get(), r, c)));
        }
      }
      rows.push_back(std::move(row));
    }
    return rows;
  }

  void begin_write() override {
    // The wait is bounded as SQLite's busy timeout bounds it: a writer stuck inside its
    // transaction (a hung process) is an error for the others, not a hang.
    exec(fmt::format("BEGIN; SET LOCAL lock_timeout = '{}s'", kWriteLockTimeoutS));
    try {
      query(fmt::format("SELECT pg_advisory_xact_lock({})", kWriteLockKey), {});
    } catch (const StoreError& e) {
      rollback();
      if (std::string(e.what()).find("lock timeout") == std::string::npos) throw;
      throw StoreError(
          fmt::format("{}: another writer held the store's write lock for over {} s", name_, kWriteLockTimeoutS));
    } catch (...) {
      rollback();
      throw;
    }
  }

  void commit() override {
    Result res(check(PQexec(conn_, "COMMIT")));
    // COMMIT of a transaction that an error aborted succeeds as a ROLLBACK.
    if (std::string(PQcmdStatus(res.get())) == "ROLLBACK") {
      throw StoreError(fmt::format("{}: the transaction was rolled back after an earlier error", name_));
    }
  }

  void rollback() noexcept override {
    if (PQtransactionStatus(conn_) == PQTRANS_IDLE || PQtransactionStatus(conn_) == PQTRANS_UNKNOWN) return;
    PQclear(PQexec(conn_, "ROLLBACK"));
  }

 private:
  // A PGresult that is cleared however the scope ends.
  class Result {
   public:
    explicit Result(PGresult* r) : r_(r) {}
    ~Result() { PQclear(r_); }
    Result(const Result&) = delete;
    Result& operator=(const Result&) = delete;
    PGresult* get() const { return r_; }

   private:
    PGresult* r_;
  };

  // Returns `res` when the command succeeded (the caller clears it), else clears it and
  // throws the server's one-line message.
  PGresult* check(PGresult* res) {
    const ExecStatusType status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY) return res;
    // The primary message has no "ERROR:  " prefix and no DETAIL/HINT lines.
    const char* primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
    const std::string why = first_line(primary ? primary : res ? PQresultErrorMessage(res) : PQerrorMessage(conn_));
    PQclear(res);
    throw StoreError(fmt::format("{}: {}", name_, why));
  }

  std::string name_;
  PGconn* conn_ = nullptr;
};

}  // namespace

std::unique_ptr<Database> open_postgresql(const std::string& url) {
  return std::make_unique<PostgresDatabase>(url);
}

bool postgresql_available() {
  return true;
}

}  // namespace mlbench::store
