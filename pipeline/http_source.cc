#include "pipeline/http_source.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "core/atomic_file.h"

namespace mlbench::pipeline {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

bool is_http_url(const std::string& data) {
  return data.rfind("http://", 0) == 0 || data.rfind("https://", 0) == 0;
}

namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw std::runtime_error("libcurl: global init failed");
  });
}

// A transfer's failure that another attempt may cure.
bool transient(HttpResult::Kind kind, long status, CURLcode code) {
  switch (kind) {
    case HttpResult::Kind::Ok:
      return false;
    case HttpResult::Kind::Status:
      return status >= 500 || status == 429 || status == 408;
    case HttpResult::Kind::Timeout:
      return true;
    case HttpResult::Kind::Transport:
      return code == CURLE_COULDNT_CONNECT || code == CURLE_PARTIAL_FILE || code == CURLE_RECV_ERROR ||
             code == CURLE_SEND_ERROR || code == CURLE_GOT_NOTHING || code == CURLE_COULDNT_RESOLVE_HOST;
  }
  return false;
}

std::size_t append_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* body = static_cast<Bytes*>(user);
  const std::size_t bytes = size * n;
  body->insert(body->end(), reinterpret_cast<const std::uint8_t*>(data),
               reinterpret_cast<const std::uint8_t*>(data) + bytes);
  return bytes;
}

}  // namespace

struct HttpClient::Impl {
  struct Request {
    std::string url;
    Bytes* body = nullptr;
    std::size_t size_hint = 0;
    HttpResult result;
    bool done = false;
    Clock::time_point due;  // a retry waits until then
    CURL* easy = nullptr;
    char error[CURL_ERROR_SIZE] = {};
  };

  explicit Impl(const HttpOptions& o) : options(o) {
    global_init();
    multi = curl_multi_init();
    if (!multi) throw std::runtime_error("libcurl: cannot create a multi handle");
    // HTTP/1.1 keep-alive: one connection per request in flight, kept for the next request.
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, 1024L);
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, static_cast<long>(CURLPIPE_NOTHING));
    thread = std::thread([this] { loop(); });
  }
  ~Impl() { stop(); }

  void stop() {
    std::lock_guard<std::mutex> once(stop_mu);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!multi) return;
      stopping = true;
      curl_multi_wakeup(multi);
    }
    if (thread.joinable()) thread.join();
    std::lock_guard<std::mutex> lock(mu);
    for (CURL* e : spare) curl_easy_cleanup(e);
    spare.clear();
    curl_multi_cleanup(multi);
    multi = nullptr;
  }

  HttpResult get(const std::string& url, Bytes& body, std::size_t size_hint) {
    auto r = std::make_shared<Request>();
    r->url = url;
    r->body = &body;
    r->size_hint = size_hint;
    std::unique_lock<std::mutex> lock(mu);
    ++counters.requests;
    if (stopping) {
      r->result.error = "the HTTP client was stopped";
      ++counters.failed;
      return r->result;
    }
    incoming.push_back(r);
    curl_multi_wakeup(multi);  // thread-safe; under the lock so that stop() cannot free it meanwhile
    done_cv.wait(lock, [&] { return r->done; });
    return r->result;
  }

  // The multi handle's thread: adds what came in and the retries that are due, runs the
  // transfers, finishes those that ended; sleeps in curl_multi_poll until a socket or a wakeup.
  void loop() {
    std::map<CURL*, std::shared_ptr<Request>> running;
    std::deque<std::shared_ptr<Request>> waiting;  // retries, by due time
    for (;;) {
      std::vector<std::shared_ptr<Request>> add;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stopping) break;
        while (!incoming.empty()) {
          add.push_back(std::move(incoming.front()));
          incoming.pop_front();
        }
      }
      const auto now = Clock::now();
      while (!waiting.empty() && waiting.front()->due <= now) {
        add.push_back(std::move(waiting.front()));
        waiting.pop_front();
      }
      for (auto& r : add) {
        start(*r);
        running[r->easy] = r;
      }
      if (!add.empty()) {
        std::lock_guard<std::mutex> lock(mu);
        counters.attempts += static_cast<std::int64_t>(add.size());
        counters.max_in_flight = std::max(counters.max_in_flight, static_cast<int>(running.size()));
      }
      int still = 0;
      curl_multi_perform(multi, &still);
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        CURL* easy = msg->easy_handle;
        const CURLcode code = msg->data.result;
        auto it = running.find(easy);
        if (it == running.end()) continue;
        auto r = it->second;
        running.erase(it);
        curl_multi_remove_handle(multi, easy);
        if (finish(*r, code)) {
          r->due =
              Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                                 options.backoff_s * static_cast<double>(1 << std::min(r->result.attempts - 1, 16))));
          auto pos = std::upper_bound(waiting.begin(), waiting.end(), r,
                                      [](const auto& a, const auto& b) { return a->due < b->due; });
          waiting.insert(pos, r);
        }
      }
      int timeout_ms = 1000;
      if (!waiting.empty()) {
        const auto until = std::chrono::duration_cast<std::chrono::milliseconds>(waiting.front()->due - Clock::now());
        timeout_ms = static_cast<int>(std::clamp<long>(until.count(), 0, 1000));
      }
      curl_multi_poll(multi, nullptr, 0, timeout_ms, nullptr);
    }
    // Stopped: fail what is in flight or waiting.
    std::vector<std::shared_ptr<Request>> all;
    for (auto& [easy, r] : running) {
      curl_multi_remove_handle(multi, easy);
      all.push_back(r);
    }
    all.insert(all.end(), waiting.begin(), waiting.end());
    std::lock_guard<std::mutex> lock(mu);
    for (auto& r : incoming) all.push_back(r);
    incoming.clear();
    for (auto& r : all) {
      if (r->easy) spare.push_back(r->easy);
      r->easy = nullptr;
      r->result.kind = HttpResult::Kind::Transport;
      r->result.error = "the HTTP client was stopped";
      r->done = true;
      ++counters.failed;
    }
    done_cv.notify_all();
  }

  // Sets up r's transfer (a spare handle when there is one) and adds it to the multi handle.
  void start(Request& r) {
    if (!r.easy) {
      std::lock_guard<std::mutex> lock(mu);
      if (!spare.empty()) {
        r.easy = spare.back();
        spare.pop_back();
      }
    }
    if (!r.easy) r.easy = curl_easy_init();
    CURL* e = r.easy;
    curl_easy_reset(e);
    r.body->clear();
    if (r.size_hint > 0) r.body->reserve(r.size_hint);
    r.error[0] = '\0';
    curl_easy_setopt(e, CURLOPT_URL, r.url.c_str());
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r.body);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r.error);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    const long timeout_ms = std::max(1L, static_cast<long>(options.timeout_s * 1000));
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, std::min(timeout_ms, 10000L));
    r.result.attempts += 1;
    curl_multi_add_handle(multi, e);
  }

  // Records r's attempt; true when it is to be retried, else r is done (its waiter woken).
  bool finish(Request& r, CURLcode code) {
    long status = 0;
    curl_easy_getinfo(r.easy, CURLINFO_RESPONSE_CODE, &status);
    curl_off_t total_us = 0;
    curl_easy_getinfo(r.easy, CURLINFO_TOTAL_TIME_T, &total_us);
    HttpResult& res = r.result;
    res.status = status;
    res.seconds = static_cast<double>(total_us) * 1e-6;
    if (code == CURLE_OK && status == 200) {
      res.kind = HttpResult::Kind::Ok;
      res.error.clear();
    } else if (code == CURLE_OK) {
      res.kind = HttpResult::Kind::Status;
      res.error = fmt::format("HTTP {}", status);
    } else if (code == CURLE_OPERATION_TIMEDOUT) {
      res.kind = HttpResult::Kind::Timeout;
      res.error = fmt::format("no answer within --fetch-timeout {:g} s", options.timeout_s);
    } else {
      res.kind = HttpResult::Kind::Transport;
      res.error = r.error[0] ? std::string(r.error) : std::string(curl_easy_strerror(code));
    }
    const bool again = transient(res.kind, status, code) && res.attempts <= options.retries;
    std::lock_guard<std::mutex> lock(mu);
    if (res.kind == HttpResult::Kind::Timeout) ++counters.timeouts;
    if (res.kind == HttpResult::Kind::Status) ++counters.status_errors;
    if (res.kind == HttpResult::Kind::Transport) ++counters.transport_errors;
    if (again) {
      ++counters.retries;
      return true;
    }
    if (res.kind == HttpResult::Kind::Ok) {
      counters.bytes += static_cast<std::int64_t>(r.body->size());
      counters.request_s += res.seconds;
    } else {
      ++counters.failed;
      if (res.attempts > 1) res.error += fmt::format(" ({} attempts)", res.attempts);
    }
    spare.push_back(r.easy);
    r.easy = nullptr;
    r.done = true;
    done_cv.notify_all();
    return false;
  }

  HttpOptions options;
  CURLM* multi = nullptr;
  std::thread thread;
  std::mutex mu;
  std::mutex stop_mu;
  std::condition_variable done_cv;
  std::deque<std::shared_ptr<Request>> incoming;
  std::vector<CURL*> spare;
  bool stopping = false;
  HttpCounters counters;
};

HttpClient::HttpClient(HttpOptions options)
    : options_(options), impl_(std::make_unique<Impl>(options)), pid_(::getpid()) {}
HttpClient::~HttpClient() {
  // In a forked child that never used it, impl_ is the parent's: its thread is not here to join.
  if (pid_.load() != ::getpid()) (void)impl_.release();
}

HttpClient::Impl& HttpClient::impl() const {
  const pid_t now = ::getpid();
  if (pid_.load(std::memory_order_acquire) == now) return *impl_;
  std::lock_guard<std::mutex> lock(reinit_mu_);
  if (pid_.load(std::memory_order_relaxed) != now) {
    (void)impl_.release();  // the parent's: its mutex may be held by a thread that is not here
    impl_ = std::make_unique<Impl>(options_);
    pid_.store(now, std::memory_order_release);
  }
  return *impl_;
}

HttpResult HttpClient::get(const std::string& url, Bytes& body, std::size_t size_hint) {
  return impl().get(url, body, size_hint);
}

HttpCounters HttpClient::counters() const {
  Impl& i = impl();
  std::lock_guard<std::mutex> lock(i.mu);
  return i.counters;
}

void HttpClient::stop() {
  impl().stop();
}

namespace {

std::string with_slash(std::string url) {
  if (url.empty() || url.back() != '/') url += '/';
  return url;
}

// "a b/c.jpg" -> "a%20b/c.jpg": each path segment escaped.
std::string escape_path(const std::string& path) {
  std::string out;
  std::size_t begin = 0;
  while (begin <= path.size()) {
    const std::size_t end = std::min(path.find('/', begin), path.size());
    const std::string segment = path.substr(begin, end - begin);
    char* esc = curl_easy_escape(nullptr, segment.c_str(), static_cast<int>(segment.size()));
    if (!esc) throw std::bad_alloc();
    if (!out.empty() || begin > 0) out += '/';
    out += esc;
    curl_free(esc);
    begin = end + 1;
  }
  return out;
}

}  // namespace

HttpSource::HttpSource(std::string url, HttpOptions options, const std::string& hint)
    : url_(with_slash(std::move(url))), client_(std::make_unique<HttpClient>(options)) {
  const std::string listing_url = url_ + kListingName;
  Bytes body;
  const HttpResult r = client_->get(listing_url, body);
  if (r.kind != HttpResult::Kind::Ok) {
    const std::string why = fmt::format("dataset listing {}: {}", listing_url, r.error);
    if (r.kind == HttpResult::Kind::Status && r.status == 404) {
      throw DataError(why + " (write one with: mlbench-datagen listing --root DIR, in the folder the server serves" +
                      (hint.empty() ? std::string(")") : "; " + hint + ")"));
    }
    if (r.kind == HttpResult::Kind::Status) throw DataError(why);
    throw SourceUnavailable(why);
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body.begin(), body.end());
    if (j.value("format", "") != "mlbench-listing") throw std::runtime_error("not an mlbench listing (no format)");
    if (j.at("version").get<int>() != 1) {
      throw std::runtime_error(fmt::format("listing version {} (this mlbench reads 1)", j.at("version").dump()));
    }
    classes_ = j.at("classes").get<std::vector<std::string>>();
    for (const auto& o : j.at("objects")) {
      const auto path = o.at(0).get<std::string>();
      const auto size = o.at(1).get<std::size_t>();
      const auto label = o.at(2).get<std::int64_t>();
      if (label < 0 || label >= static_cast<std::int64_t>(classes_.size())) {
        throw std::runtime_error(
            fmt::format("object {} has label {}, not one of the {} classes", path, label, classes_.size()));
      }
      names_.push_back(escape_path(path));
      sizes_.push_back(size);
      labels_.push_back(label);
      total_bytes_ += size;
    }
  } catch (const std::exception& e) {
    throw DataError(fmt::format("dataset listing {}: {}", listing_url, e.what()));
  }
  if (names_.empty()) throw DataError(fmt::format("dataset listing {} names no objects", listing_url));
}

HttpSource::~HttpSource() {
  client_->stop();
}

std::string HttpSource::object_url(std::size_t index) const {
  return url_ + names_[index];
}

void HttpSource::fetch(std::size_t index, Bytes& out) const {
  const std::string url = object_url(index);
  const HttpResult r = client_->get(url, out, sizes_[index]);
  if (r.kind == HttpResult::Kind::Ok) {
    failures_in_a_row_.store(0, std::memory_order_relaxed);
    return;
  }
  if (r.kind == HttpResult::Kind::Status) {
    failures_in_a_row_.store(0, std::memory_order_relaxed);  // the server answers
  } else if (failures_in_a_row_.fetch_add(1, std::memory_order_relaxed) + 1 >= kFatalAfter) {
    throw SourceUnavailable(
        fmt::format("the HTTP server at {} stopped answering: {} requests in a row failed, the "
                    "last {}: {}",
                    url_, kFatalAfter, url, r.error));
  }
  throw DataError(fmt::format("{}: {}", url, r.error));
}

nlohmann::json HttpSource::describe_json() const {
  const HttpCounters c = counters();
  const std::int64_t ok = c.requests - c.failed;
  return {{"kind", "http"},
          {"url", url_},
          {"dataset_bytes", total_bytes_},
          {"objects", names_.size()},
          {"requests", c.requests},
          {"attempts", c.attempts},
          {"retries", c.retries},
          {"failed", c.failed},
          {"timeouts", c.timeouts},
          {"status_errors", c.status_errors},
          {"transport_errors", c.transport_errors},
          {"bytes", c.bytes},
          {"per_request_ms", ok > 0 ? nlohmann::json(1e3 * c.request_s / static_cast<double>(ok)) : nlohmann::json()},
          {"max_in_flight", c.max_in_flight},
          {"timeout_s", options().timeout_s},
          {"retries_allowed", options().retries}};
}

nlohmann::json folder_listing(const ImageFolderReader& folder) {
  nlohmann::json objects = nlohmann::json::array();
  const std::string root = folder.root().string();
  for (std::size_t i = 0; i < folder.size(); ++i) {
    const fs::path rel = fs::path(folder.path(i)).lexically_relative(folder.root());
    std::error_code ec;
    const auto size = fs::file_size(folder.path(i), ec);
    if (ec) throw DataError(fmt::format("{}: {}", folder.path(i).string(), ec.message()));
    objects.push_back({rel.generic_string(), size, folder.label(i)});
  }
  return {{"format", "mlbench-listing"}, {"version", 1}, {"classes", folder.classes()}, {"objects", objects}};
}

fs::path write_folder_listing(const fs::path& root) {
  const ImageFolderReader folder(root);
  const fs::path file = root / kListingName;
  core::write_file_atomic(file, folder_listing(folder).dump() + "\n");
  return file;
}

FetchProbe probe_fetch(const ItemSource& source, const std::vector<std::size_t>& order, int depth, double seconds) {
  FetchProbe p;
  p.depth = std::max(1, depth);
  std::atomic<std::size_t> next{0};
  std::atomic<std::int64_t> items{0}, failed{0};
  std::atomic<std::uint64_t> bytes{0};
  const auto t0 = Clock::now();
  const auto until = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::exception_ptr fatal;
  std::mutex fatal_mu;
  std::vector<std::thread> threads;
  for (int t = 0; t < p.depth; ++t) {
    threads.emplace_back([&] {
      Bytes buf;
      for (;;) {
        if (Clock::now() >= until) return;
        const std::size_t k = next.fetch_add(1);
        if (k >= order.size()) return;
        try {
          source.fetch(order[k], buf);
          items.fetch_add(1);
          bytes.fetch_add(buf.size());
        } catch (const DataError&) {
          failed.fetch_add(1);
        } catch (...) {
          std::lock_guard<std::mutex> lock(fatal_mu);
          if (!fatal) fatal = std::current_exception();
          next.store(order.size());
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  if (fatal) std::rethrow_exception(fatal);
  p.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  p.items = items.load();
  p.failed = failed.load();
  p.bytes = static_cast<double>(bytes.load());
  return p;
}

}  // namespace mlbench::pipeline
