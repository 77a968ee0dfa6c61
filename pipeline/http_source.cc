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
#include "core/process.h"
#include "pipeline/relative_path.h"

namespace mlbench::pipeline {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::uint64_t body_margin(std::uint64_t listed_bytes) {
  return std::max<std::uint64_t>(64u << 10, listed_bytes / 8);
}

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
    case HttpResult::Kind::Size:  // the server sends what it has: asking again gets the same
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

}  // namespace

struct HttpClient::Impl {
  struct Request {
    std::string url;
    Bytes* body = nullptr;
    std::uint64_t listed = 0;  // 0: not listed (the listing itself)
    HttpResult result;
    // The attempt's body so far (the write callback's).
    bool answered = false;   // the first body bytes came: status and Content-Length known
    bool status_ok = false;  // a 200: the body is kept
    std::uint64_t seen = 0;  // body bytes received (kept or not)
    bool cut = false;        // the callback stopped the transfer (CURLE_WRITE_ERROR)
    std::string size_error;  // why the 200's length disagrees with the listing ("" when it does not)
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

  HttpResult get(const std::string& url, Bytes& body, std::uint64_t listed) {
    auto r = std::make_shared<Request>();
    r->url = url;
    r->body = &body;
    r->listed = std::min(listed, kMaxObjectBytes);
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
      transfer_cpu_ns.store(core::this_thread_cpu_ns(), std::memory_order_relaxed);
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
    // Reserved up to 16 MiB: a listing may name objects of up to 1 GiB, and the requests in
    // flight reserve at once (beyond, the body grows as it comes, within most_bytes).
    if (r.listed > 0) r.body->reserve(std::min<std::uint64_t>(r.listed, 16u << 20));
    r.answered = r.status_ok = r.cut = false;
    r.seen = 0;
    r.size_error.clear();
    r.error[0] = '\0';
    curl_easy_setopt(e, CURLOPT_URL, r.url.c_str());
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &r);
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

  // The most body bytes r reads, and the fewest a 200 may have.
  static std::uint64_t most_bytes(const Request& r) {
    return r.listed > 0 ? r.listed + body_margin(r.listed) : kMaxObjectBytes;
  }
  static std::uint64_t fewest_bytes(const Request& r) {
    return r.listed > 0 ? r.listed - std::min(r.listed, body_margin(r.listed)) : 0;
  }

  // libcurl's write callback: keeps a 200's body while it stays within most_bytes (checking
  // the Content-Length at the first bytes, before keeping any), drops other answers' bodies;
  // returning fewer bytes than given stops the transfer (CURLE_WRITE_ERROR).
  static std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
    auto& r = *static_cast<Request*>(user);
    const std::size_t bytes = size * n;
    if (!r.answered) {
      r.answered = true;
      long status = 0;
      curl_easy_getinfo(r.easy, CURLINFO_RESPONSE_CODE, &status);
      r.status_ok = status == 200;
      curl_off_t length = -1;
      curl_easy_getinfo(r.easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
      if (r.status_ok && length >= 0 &&
          (static_cast<std::uint64_t>(length) > most_bytes(r) ||
           static_cast<std::uint64_t>(length) < fewest_bytes(r))) {
        r.size_error = r.listed > 0 ? fmt::format(
                                          "Content-Length {}, but the listing says {} bytes (a body is read "
                                          "only within {} bytes of its listed size)",
                                          length, r.listed, body_margin(r.listed))
                                    : fmt::format("Content-Length {}, more than {} bytes", length, kMaxObjectBytes);
        r.cut = true;
        return 0;
      }
    }
    r.seen += bytes;
    if (r.seen > most_bytes(r)) {
      if (r.status_ok) {
        r.size_error = r.listed > 0 ? fmt::format(
                                          "the body passed {} bytes, but the listing says {} (cut at its "
                                          "listed size + {})",
                                          most_bytes(r), r.listed, body_margin(r.listed))
                                    : fmt::format("the body passed {} bytes", kMaxObjectBytes);
      }
      r.cut = true;
      return 0;
    }
    if (r.status_ok) {
      try {
        r.body->insert(r.body->end(), reinterpret_cast<const std::uint8_t*>(data),
                       reinterpret_cast<const std::uint8_t*>(data) + bytes);
      } catch (const std::bad_alloc&) {  // not through libcurl's C frames
        r.size_error = fmt::format("no memory for a body of {} bytes", r.seen);
        r.cut = true;
        return 0;
      }
    }
    return bytes;
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
    if (code == CURLE_OK && status == 200 && r.body->size() < fewest_bytes(r)) {
      r.size_error = fmt::format(
          "a body of {} bytes, but the listing says {} (a body is read only within {} bytes "
          "of its listed size)",
          r.body->size(), r.listed, body_margin(r.listed));
    }
    if (!r.size_error.empty()) {
      res.kind = HttpResult::Kind::Size;
      res.error = r.size_error;
      r.body->clear();
    } else if (code == CURLE_OK && status == 200) {
      res.kind = HttpResult::Kind::Ok;
      res.error.clear();
    } else if (code == CURLE_OK || (r.cut && status != 200 && status != 0)) {
      // (an answer other than 200 whose body ran past the bound was cut: its status is the error)
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
    if (res.kind == HttpResult::Kind::Size) ++counters.size_errors;
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
  // This thread's CPU time so far (docs/pipeline.md, "Datasets over HTTP": transfer_cpu_s), as of
  // its last pass; read by counters() from any thread.
  std::atomic<std::int64_t> transfer_cpu_ns{0};
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

HttpResult HttpClient::get(const std::string& url, Bytes& body, std::uint64_t listed_bytes) {
  return impl().get(url, body, listed_bytes);
}

HttpCounters HttpClient::counters() const {
  Impl& i = impl();
  HttpCounters c;
  {
    std::lock_guard<std::mutex> lock(i.mu);
    c = i.counters;
  }
  c.transfer_cpu_s = 1e-9 * static_cast<double>(i.transfer_cpu_ns.load(std::memory_order_relaxed));
  return c;
}

void HttpClient::stop() {
  impl().stop();
}

Listing check_listing(const nlohmann::json& j) {
  if (!j.is_object() || j.value("format", "") != "mlbench-listing") {
    throw std::invalid_argument("not an mlbench listing (no format)");
  }
  if (j.at("version") != 1) {
    throw std::invalid_argument(fmt::format("listing version {} (this mlbench reads 1)", j.at("version").dump()));
  }
  Listing out;
  out.classes = j.at("classes").get<std::vector<std::string>>();
  const nlohmann::json& objects = j.at("objects");
  if (!objects.is_array()) throw std::invalid_argument("objects is not a list");
  out.objects.reserve(objects.size());
  for (std::size_t i = 0; i < objects.size(); ++i) {
    const nlohmann::json& o = objects[i];
    if (!o.is_array() || o.size() != 3 || !o[0].is_string()) {
      throw std::invalid_argument(
          fmt::format("object {} is not [path, bytes, label]: {}", i, quoted_path(o.dump().substr(0, 200))));
    }
    Listing::Object object;
    object.path = o[0].get<std::string>();
    const std::string name = fmt::format("object {} {}", i, quoted_path(object.path));
    if (const std::string why = relative_path_problem(object.path); !why.empty()) {
      throw std::invalid_argument(fmt::format("{}: {} (an object's path must stay below the prefix)", name, why));
    }
    // is_number_unsigned: a non-negative integer (JSON's -5, 1.5 and 1e18 are not).
    if (!o[1].is_number_unsigned() || o[1].get<std::uint64_t>() < 1 || o[1].get<std::uint64_t>() > kMaxObjectBytes) {
      throw std::invalid_argument(fmt::format("{}: size {} is not an integer from 1 to {} (1 GiB)", name,
                                              o[1].dump().substr(0, 40), kMaxObjectBytes));
    }
    object.bytes = o[1].get<std::uint64_t>();
    if (!o[2].is_number_integer() || o[2].get<std::int64_t>() < 0 ||
        o[2].get<std::int64_t>() >= static_cast<std::int64_t>(out.classes.size())) {
      throw std::invalid_argument(fmt::format("{}: label {} is not one of the {} classes (0 to {})", name,
                                              o[2].dump().substr(0, 40), out.classes.size(),
                                              static_cast<std::int64_t>(out.classes.size()) - 1));
    }
    object.label = o[2].get<std::int64_t>();
    out.objects.push_back(std::move(object));
  }
  return out;
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
    if (r.kind == HttpResult::Kind::Status || r.kind == HttpResult::Kind::Size) throw DataError(why);
    throw SourceUnavailable(why);
  }
  Listing listing;
  try {
    listing = check_listing(nlohmann::json::parse(body.begin(), body.end()));
  } catch (const std::exception& e) {
    throw DataError(fmt::format("dataset listing {}: {}", listing_url, e.what()));
  }
  classes_ = std::move(listing.classes);
  for (const Listing::Object& o : listing.objects) {
    names_.push_back(escape_path(o.path));
    sizes_.push_back(o.bytes);
    labels_.push_back(o.label);
    total_bytes_ += o.bytes;
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
  if (r.kind == HttpResult::Kind::Status || r.kind == HttpResult::Kind::Size) {
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
          {"size_errors", c.size_errors},
          {"bytes", c.bytes},
          {"per_request_ms", ok > 0 ? nlohmann::json(1e3 * c.request_s / static_cast<double>(ok)) : nlohmann::json()},
          {"max_in_flight", c.max_in_flight},
          {"transfer_cpu_s", c.transfer_cpu_s},
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
  const nlohmann::json listing = folder_listing(folder);
  try {
    check_listing(listing);
  } catch (const std::invalid_argument& e) {
    throw DataError(fmt::format("{}: the loader would refuse this listing: {}", root.string(), e.what()));
  }
  core::write_file_atomic(file, listing.dump() + "\n");
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
