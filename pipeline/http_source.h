// Datasets in object storage: an ImageFolder served over HTTP (`--data http://HOST:PORT/PREFIX/`).
// A listing at the prefix (mlbench-listing.json, written by `mlbench-datagen listing`) names the
// objects, their sizes and labels; each sample is one GET of PREFIX/<class>/<file> over keep-alive
// connections. Every GET goes through one libcurl multi handle on a thread of its own, so the
// requests in flight are as many as the threads that fetch at once: the loader's --io-depth I/O
// threads (or its workers with --io-depth 0). Transient failures (a 5xx or 429, a reset or
// refused connection, a truncated body, a timeout) are retried --fetch-retries times with a
// doubling back-off; what still fails is a DataError naming the object (the pipeline counts it as
// a corrupt sample and skips it, or stops with --strict-data), and a server that stops answering
// altogether (kFatalAfter requests in a row failing at the transport) ends the run with one line,
// not a run of skipped samples or a hang (docs/pipeline.md, "Datasets over HTTP").
//
// The listing is checked whole before the first object is requested (check_listing): its paths
// by relative_path_problem (pipeline/relative_path.h), its sizes and labels by range. A body is
// read only within body_margin of its listed size: past it, or with a Content-Length outside it,
// the request is cut and the sample is a bad one (HttpResult::Kind::Size), so a server cannot
// make the loader hold more than about the listed bytes.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/source.h"

namespace mlbench::pipeline {

// The listing's name at the prefix.
inline constexpr const char* kListingName = "mlbench-listing.json";
// Requests in a row that fail at the transport (after their retries) before the source gives up.
inline constexpr int kFatalAfter = 8;
// The largest object a listing may name, and the largest body read at all (the listing's too).
inline constexpr std::uint64_t kMaxObjectBytes = 1ull << 30;
// How far a body's length may be from its listed size: max(64 KiB, 1/8 of it).
std::uint64_t body_margin(std::uint64_t listed_bytes);

// Whether `data` names a dataset over HTTP (http:// or https://).
bool is_http_url(const std::string& data);

// The server is gone or not answering: the run cannot go on (not a bad sample).
class SourceUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct HttpOptions {
  double timeout_s = 30;    // --fetch-timeout: one attempt, connect and transfer
  int retries = 2;          // --fetch-retries: attempts after the first for a transient failure
  double backoff_s = 0.05;  // before the first retry; doubled for each next one
};

// One GET's outcome.
struct HttpResult {
  // Size: a 200 whose Content-Length or body is not within body_margin of the listed size (cut there).
  enum class Kind { Ok, Status, Timeout, Transport, Size };
  Kind kind = Kind::Transport;
  long status = 0;    // the HTTP status (0: no response)
  std::string error;  // what failed, one line ("" when Ok)
  int attempts = 0;
  double seconds = 0;  // the last attempt's time, request to last byte
};

// What an HttpClient did, summed over its life.
struct HttpCounters {
  std::int64_t requests = 0;  // GETs asked for
  std::int64_t attempts = 0;  // transfers made (requests + retries)
  std::int64_t retries = 0;
  std::int64_t failed = 0;            // requests that failed after their retries
  std::int64_t timeouts = 0;          // attempts that ran past the timeout
  std::int64_t status_errors = 0;     // attempts answered with a status other than 200
  std::int64_t transport_errors = 0;  // attempts that failed below HTTP (refused, reset, truncated)
  std::int64_t size_errors = 0;       // attempts whose body disagreed with its listed size (cut, not retried)
  std::int64_t bytes = 0;             // body bytes of successful requests
  double request_s = 0;               // the successful requests' time, summed (per_request: / (requests - failed))
  int max_in_flight = 0;              // the most transfers at once
  double transfer_cpu_s = 0;          // the CPU time of the thread that runs the transfers (libcurl's)
};

// GETs through one libcurl multi handle, driven by a thread of its own; get() may be called from
// any number of threads at once, each call one request in flight. A process forked from one
// that used it (a benchmark's memory probe forks before its run) gets a multi handle and thread
// of its own at its first call: the parent's thread does not exist there, and its connections
// are the parent's.
class HttpClient {
 public:
  explicit HttpClient(HttpOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // GETs `url` into `body`, retrying transient failures. `listed_bytes` > 0: the body's length
  // must be within body_margin of it (reserved up front; a Content-Length outside that range
  // fails at the header, a body that grows past it is cut there: Kind::Size, not retried);
  // 0: any length up to kMaxObjectBytes. The body of an answer other than 200 is not kept.
  // Blocks until done; never throws for what the server or network did.
  HttpResult get(const std::string& url, Bytes& body, std::uint64_t listed_bytes = 0);
  HttpCounters counters() const;
  const HttpOptions& options() const { return options_; }
  // Fails every request in flight or waiting ("the client was stopped") and ends the thread. Idempotent.
  void stop();

 private:
  struct Impl;
  // This process's Impl: a fresh one in a forked child (the parent's is left alone, leaked).
  Impl& impl() const;
  HttpOptions options_;
  mutable std::unique_ptr<Impl> impl_;
  mutable std::atomic<pid_t> pid_;  // the process impl_ belongs to
  mutable std::mutex reinit_mu_;
};

// The objects of an ImageFolder over HTTP.
class HttpSource : public ItemSource {
 public:
  // Reads the listing at `url` (a trailing '/' is added) and checks it whole (check_listing)
  // before any object is requested; throws DataError naming the URL and the cause (no listing:
  // with `hint`, how to write one; a bad entry: the first, by index and path), or
  // SourceUnavailable when nothing answers.
  HttpSource(std::string url, HttpOptions options = {}, const std::string& hint = {});
  ~HttpSource() override;

  std::size_t size() const override { return names_.size(); }
  std::int64_t label(std::size_t index) const override { return labels_[index]; }
  // One GET; throws DataError naming the object (a failed request, a body not of its listed
  // size), or SourceUnavailable after kFatalAfter transport failures in a row.
  void fetch(std::size_t index, Bytes& out) const override;
  Encoding encoding() const override { return Encoding::Jpeg; }
  std::string describe(std::size_t index) const override { return object_url(index); }

  const std::string& url() const { return url_; }
  std::string object_url(std::size_t index) const;
  const std::vector<std::string>& classes() const { return classes_; }
  std::size_t class_count() const override { return classes_.size(); }
  std::size_t object_bytes(std::size_t index) const { return sizes_[index]; }
  std::uint64_t total_bytes() const { return total_bytes_; }
  HttpCounters counters() const { return client_->counters(); }
  const HttpOptions& options() const { return client_->options(); }
  // The report's pipeline.source_detail (docs/pipeline.md, "Datasets over HTTP"): kind "http",
  // the URL, the requests and their failures.
  nlohmann::json describe_json() const override;

 private:
  std::string url_;  // ends with '/'
  std::unique_ptr<HttpClient> client_;
  std::vector<std::string> classes_;
  std::vector<std::string> names_;  // "<class>/<file>", URL-escaped per segment
  std::vector<std::size_t> sizes_;
  std::vector<std::int64_t> labels_;
  std::uint64_t total_bytes_ = 0;
  mutable std::atomic<int> failures_in_a_row_{0};
};

// A listing's contents, checked.
struct Listing {
  std::vector<std::string> classes;
  struct Object {
    std::string path;  // below the prefix, as listed ("<class>/<file>", not escaped)
    std::uint64_t bytes = 0;
    std::int64_t label = 0;
  };
  std::vector<Object> objects;
};
// Reads a listing (docs/pipeline.md, "Datasets over HTTP"): format "mlbench-listing", version 1,
// `classes` (strings), `objects` ([path, bytes, label] each). Every path must pass
// relative_path_problem, every size be an integer from 1 to kMaxObjectBytes, every label
// index `classes`. Throws std::invalid_argument, one line naming the first bad entry
// (`object 3 "../secret.txt": a '..' segment`).
Listing check_listing(const nlohmann::json& listing);

// The listing of the ImageFolder at `root` (its classes, and every file's path, size and label),
// as HttpSource reads it.
nlohmann::json folder_listing(const ImageFolderReader& folder);
// Writes it to root/mlbench-listing.json (atomically), after check_listing (a folder whose
// listing the loader would refuse, e.g. with an empty file, is a DataError naming the entry);
// returns the file.
std::filesystem::path write_folder_listing(const std::filesystem::path& root);

// How fast items come from `source` with `depth` fetches at once: `depth` threads fetch the
// items of `order` in turn (each once) until they are done or `seconds` have passed.
struct FetchProbe {
  int depth = 0;
  std::int64_t items = 0;
  std::int64_t failed = 0;
  double bytes = 0;
  double seconds = 0;
  double items_per_s() const { return seconds > 0 ? static_cast<double>(items) / seconds : 0; }
  double bytes_per_s() const { return seconds > 0 ? bytes / seconds : 0; }
};
FetchProbe probe_fetch(const ItemSource& source, const std::vector<std::size_t>& order, int depth, double seconds);

}  // namespace mlbench::pipeline
