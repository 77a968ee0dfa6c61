// The C++ twin of probe/mlbench_probe.py (docs/stall.md, "Your own training script"): times a
// training loop's own loader — a LibTorch data loader or any range of batches — and writes the
// same mlbench instance report
// (docs/report-format.md, "Reports written by the probe"), so `mlbench-stall --exec` can analyse
// a LibTorch user's program as it analyses a Python script. Header-only, no LibTorch:
//
//   mlbench::pipeline::Probe probe;                  // settings from MLBENCH_PROBE_* (mlbench-stall sets them)
//   while (!probe.done())
//     for (auto& batch : probe.wrap(*data_loader)) { ... train on batch ... }
//   probe.finish();                                  // also done by the destructor
//
// Per iteration: wait = time inside the loader's begin()/operator++ (the next batch), compute =
// from there to the next call. In compute-only mode the first K batches are kept and replayed,
// so the loader is not touched again (the ingestion rate G). With an iteration target the range
// ends once warm-up + target iterations are probed and done() turns true.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/report.h"

namespace mlbench::pipeline {

struct ProbeOptions {
  enum class Mode { kNormal, kComputeOnly };
  std::filesystem::path report_dir = "mlbench-probe";
  Mode mode = Mode::kNormal;
  int cache_batches = 8;       // compute-only: batches kept and replayed
  long iterations = 0;         // timed iterations; 0 = no target (record until finish())
  int number = 10;             // iterations per observation
  int warmup = 2;              // observations dropped as warm-up
  double interval_s = 5;       // seconds between snapshot reports
  std::string name = "probe";  // report name
  long epoch_batches = 0;      // compute-only: replayed batches per epoch (0 = until the target)
  // Seconds on a steady clock; tests inject their own.
  std::function<double()> clock = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };

  // The same variables as the Python probe: MLBENCH_PROBE_REPORT (else $OUTPUT_DIRECTORY),
  // _MODE (normal | compute-only), _CACHE_BATCHES, _ITERATIONS, _NUMBER, _WARMUP, _INTERVAL,
  // _NAME. Throws std::invalid_argument naming a bad value.
  static ProbeOptions from_env() {
    ProbeOptions o;
    const auto get = [](const char* n) -> std::string {
      const char* v = std::getenv(n);
      return v ? v : "";
    };
    const auto integer = [&](const char* n, long fallback) {
      const std::string v = get(n);
      if (v.empty()) return fallback;
      std::size_t used = 0;
      long x = 0;
      try {
        x = std::stol(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size()) throw std::invalid_argument(std::string(n) + "=" + v + " is not an integer");
      return x;
    };
    if (const std::string d = get("MLBENCH_PROBE_REPORT"); !d.empty()) {
      o.report_dir = d;
    } else if (const std::string od = get("OUTPUT_DIRECTORY"); !od.empty()) {
      o.report_dir = od;
    }
    const std::string mode = get("MLBENCH_PROBE_MODE");
    if (mode == "compute-only") {
      o.mode = Mode::kComputeOnly;
    } else if (!mode.empty() && mode != "normal") {
      throw std::invalid_argument("MLBENCH_PROBE_MODE=" + mode + " is not normal or compute-only");
    }
    o.cache_batches = static_cast<int>(std::max(1L, integer("MLBENCH_PROBE_CACHE_BATCHES", 8)));
    o.iterations = std::max(0L, integer("MLBENCH_PROBE_ITERATIONS", 0));
    o.number = static_cast<int>(
        std::max(1L, integer("MLBENCH_PROBE_NUMBER", o.iterations ? std::max(1L, o.iterations / 10) : 10)));
    o.warmup = static_cast<int>(std::max(0L, integer("MLBENCH_PROBE_WARMUP", 2)));
    o.interval_s = static_cast<double>(std::max(1L, integer("MLBENCH_PROBE_INTERVAL", 5)));
    if (const std::string n = get("MLBENCH_PROBE_NAME"); !n.empty()) o.name = n;
    return o;
  }
};

class Probe {
 public:
  explicit Probe(ProbeOptions options = ProbeOptions::from_env())
      : o_(std::move(options)), start_(std::chrono::system_clock::now()), last_write_(o_.clock()) {}
  ~Probe() {
    try {
      finish();
    } catch (...) {  // a destructor must not throw; finish() called explicitly reports errors
    }
  }
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;

  // Iterations after which the run ends: warm-up observations plus the target, 0 without one.
  long target() const {
    return o_.iterations ? (o_.warmup + (o_.iterations + o_.number - 1) / o_.number) * static_cast<long>(o_.number) : 0;
  }
  bool done() const { return target() > 0 && static_cast<long>(wait_.size()) >= target(); }
  long iterations() const { return static_cast<long>(wait_.size()); }
  const ProbeOptions& options() const { return o_; }

  // One probed iteration (what wrap() calls; a loop with its own next() may call it directly).
  void record(double wait_s, double compute_s, double items) {
    wait_.push_back(wait_s);
    compute_.push_back(compute_s);
    items_.push_back(items);
    if (const double now = o_.clock(); now - last_write_ >= o_.interval_s && !done()) {
      last_write_ = now;
      write(false, "");
    }
    if (done()) finish();
  }

  // The report's fields that do not depend on the iterations probed.
  core::InstanceReport base_record() const {
    core::InstanceReport r;
    // No build of mlbench behind it: the version's git and source are null; no seed, no GPU.
    r.raw = {{"version", {{"mlbench", kSchema}, {"git", nullptr}, {"source", nullptr}}},
             {"seed", nullptr},
             {"min_time", nullptr},
             {"gpu", nullptr},
             {"vcd", ""},
             {"batch_loss", nlohmann::json::array()},
             {"epoch_loss", nlohmann::json::array()},
             {"metrics", nlohmann::json::object()},
             {"resources", nullptr}};
    r.schema_version = core::kInstanceReportSchema;
    r.name = o_.name;
    r.suite = "mlbench";
    r.jr_id = 0;
    r.start_time = core::utc_iso8601(start_);
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    r.hostname = host;
    return r;
  }

  // The report written at the end (and, with completed false, as a snapshot).
  nlohmann::json report(bool completed, const std::string& reason) const {
    const std::size_t n = wait_.size();
    const std::size_t per = static_cast<std::size_t>(o_.number);
    const std::size_t observations = n / per;
    const std::size_t warm = std::min<std::size_t>(static_cast<std::size_t>(o_.warmup), observations);
    core::StatAccumulator train, wait, compute, iteration, h2d;
    double items = 0, seconds = 0, sum_wait = 0, sum_iter = 0, max_rate = 0, min_rate = INFINITY;
    for (std::size_t obs = warm; obs < observations; ++obs) {
      double t = 0, k = 0;
      for (std::size_t i = obs * per; i < (obs + 1) * per; ++i) {
        t += wait_[i] + compute_[i];
        k += items_[i];
        wait.add(wait_[i]);
        compute.add(compute_[i]);
        iteration.add(wait_[i] + compute_[i]);
        h2d.add(0.0);
        sum_wait += wait_[i];
        sum_iter += wait_[i] + compute_[i];
      }
      train.add(t);
      items += k;
      seconds += t;
      if (t > 0) {
        max_rate = std::max(max_rate, k / t);
        min_rate = std::min(min_rate, k / t);
      }
    }
    double all_items = 0;
    for (double k : items_) all_items += k;
    const bool timed = seconds > 0;
    core::InstanceReport r = base_record();
    r.batch_size = n ? static_cast<long>(std::lround(all_items / static_cast<double>(n))) : 0;
    r.workers = 0;
    r.cpu_cores = 0;
    r.repeat = static_cast<std::int64_t>(observations);
    r.number = o_.number;
    r.warmup = static_cast<std::int64_t>(warm);
    r.device = "cpu";
    r.args = {{"mode", mode_name()}, {"iterations", o_.iterations ? nlohmann::json(o_.iterations) : nlohmann::json()}};
    r.train = core::stats_of(train);
    r.train_item.emplace().unit = "items/sec";
    if (timed) {
      r.train_item->avg = items / seconds;
      r.train_item->max = max_rate;
      r.train_item->min = min_rate;
      r.train_item->range = max_rate - min_rate;
    }
    core::StallPhases& phases = r.stall.emplace();
    phases.wait = core::stats_of(wait);
    phases.h2d = core::stats_of(h2d);
    phases.compute = core::stats_of(compute);
    phases.iteration = core::stats_of(iteration);
    if (sum_iter > 0) phases.stall_pct = 100 * sum_wait / sum_iter;
    phases.warmup_iterations = static_cast<std::int64_t>(warm * per);
    core::PipelineInfo pipeline;
    pipeline.raw = {{"source", "mlbench probe (C++)"}, {"loader", "wrapped range"}, {"workers", 0}};
    r.pipeline = pipeline;
    r.iterations = static_cast<std::int64_t>(n);
    r.raw["probe"] = {{"schema", kSchema},
                      {"mode", mode_name()},
                      {"cache_batches", o_.mode == ProbeOptions::Mode::kComputeOnly ? nlohmann::json(o_.cache_batches)
                                                                                    : nlohmann::json()},
                      {"replayed_iterations", replayed_},
                      {"epochs", epochs_}};
    r.completed = completed;
    r.end_time = core::utc_iso8601(std::chrono::system_clock::now());
    if (!completed) r.reason = reason;
    return core::to_json(r);
  }

  // Writes the final report (once; later calls do nothing). `failure` non-empty: a .FAIL.
  // report with that reason. A target not reached also fails.
  void finish(const std::string& failure = "") {
    if (finished_ || wait_.empty()) return;
    finished_ = true;
    std::string why = failure;
    if (why.empty() && target() && !done()) {
      why = "the loop ended after " + std::to_string(wait_.size()) + " of " + std::to_string(target()) +
            " probed iterations";
    }
    write(why.empty(), why);
  }
  const std::filesystem::path& report_path() const { return path_; }

  // A range over `loader` (anything with begin()/end(): LibTorch's `*data_loader`, a vector)
  // whose iteration is probed. One epoch per range-for; stops early once done().
  template <class Loader>
  class Range {
   public:
    using Inner = decltype(std::begin(std::declval<Loader&>()));
    using Batch = std::remove_cvref_t<decltype(*std::declval<Inner&>())>;

    class iterator {
     public:
      iterator() = default;
      Batch& operator*() { return *current_; }
      iterator& operator++() {
        step();
        return *this;
      }
      bool operator==(const iterator& other) const { return at_end() == other.at_end(); }
      bool operator!=(const iterator& other) const { return !(*this == other); }

     private:
      friend class Range;
      explicit iterator(Range* r) : r_(r) { step(); }
      bool at_end() const { return r_ == nullptr || current_ == nullptr; }
      void step() {
        Probe& p = r_->probe_;
        const double t0 = p.o_.clock();
        if (returned_) {
          p.record(pending_wait_, t0 - *returned_, pending_items_);
          returned_.reset();
        }
        current_ = r_->next(p);
        if (current_ == nullptr) return;
        const double t1 = p.o_.clock();
        pending_wait_ = t1 - t0;
        pending_items_ = items_of(*current_);
        returned_ = t1;
      }
      Range* r_ = nullptr;
      Batch* current_ = nullptr;
      std::optional<double> returned_;
      double pending_wait_ = 0, pending_items_ = 0;
    };

    Range(Probe& probe, Loader& loader) : probe_(probe), loader_(loader) {}
    iterator begin() {
      ++probe_.epochs_;
      served_ = 0;
      it_.reset();
      return iterator(this);
    }
    iterator end() { return iterator(); }

   private:
    // The next batch, nullptr at the end of the epoch or once the probe is done.
    Batch* next(Probe& p) {
      if (p.done()) return nullptr;
      const bool replay =
          p.o_.mode == ProbeOptions::Mode::kComputeOnly && static_cast<int>(p.cache_.size()) >= p.o_.cache_batches;
      if (replay) {
        if (p.o_.epoch_batches > 0 && served_ >= p.o_.epoch_batches) return nullptr;
        ++served_;
        return p.replay<Batch>();
      }
      if (!it_) {
        it_.emplace(std::begin(loader_));
      } else {
        ++*it_;
      }
      if (*it_ == std::end(loader_)) return nullptr;
      ++served_;
      if (p.o_.mode == ProbeOptions::Mode::kComputeOnly) return p.keep<Batch>(**it_);
      return &**it_;
    }
    Probe& probe_;
    Loader& loader_;
    std::optional<Inner> it_;
    long served_ = 0;
  };

  template <class Loader>
  Range<Loader> wrap(Loader& loader) {
    return Range<Loader>(*this, loader);
  }

  // Samples in a batch: size() of a container of samples (LibTorch's std::vector<Example>), else 1.
  template <class Batch>
  static double items_of(const Batch& b) {
    if constexpr (requires { b.size(); }) {
      return static_cast<double>(b.size());
    } else {
      return 1.0;
    }
  }

 private:
  static constexpr const char* kSchema = "mlbench-probe-1";
  const char* mode_name() const { return o_.mode == ProbeOptions::Mode::kComputeOnly ? "compute-only" : "normal"; }

  template <class Batch>
  Batch* keep(const Batch& b) {
    cache_.push_back(std::make_shared<Batch>(b));
    return static_cast<Batch*>(cache_.back().get());
  }
  template <class Batch>
  Batch* replay() {
    const auto& kept = cache_[static_cast<std::size_t>(replayed_++ % static_cast<long>(cache_.size()))];
    return static_cast<Batch*>(kept.get());
  }

  void write(bool completed, const std::string& reason) {
    const std::string why =
        completed ? std::string()
                  : (reason.empty() ? "in progress: snapshot (the probe writes one every few seconds)" : reason);
    const std::filesystem::path file =
        o_.report_dir / core::report_file_name("mlbench", o_.name, 0, 0, !completed, start_);
    core::write_json_atomic(file, report(completed, why));
    if (!path_.empty() && path_ != file) {
      std::error_code ec;
      std::filesystem::remove(path_, ec);
    }
    path_ = file;
  }

  ProbeOptions o_;
  std::chrono::system_clock::time_point start_;
  double last_write_;
  std::vector<double> wait_, compute_, items_;
  std::vector<std::shared_ptr<void>> cache_;  // compute-only: the kept batches (one type per probe)
  long replayed_ = 0;
  long epochs_ = 0;
  bool finished_ = false;
  std::filesystem::path path_;
};

}  // namespace mlbench::pipeline
