#include "cli.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "calibration.h"
#include "environment.h"
#include "layout.h"
#include "nvtx.h"

namespace mlbench::core {
namespace {

std::string key_of(const CLI::Option* opt) {
  std::string key = opt->get_lnames().empty() ? opt->get_name() : opt->get_lnames().front();
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

}  // namespace

CLI::Validator integer_in(long long minimum, long long maximum) {
  return CLI::Validator(
      [minimum, maximum](std::string& text) -> std::string {
        long long value = 0;
        const auto* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        const bool whole = ptr == end && !text.empty();
        if (ec == std::errc::result_out_of_range && ptr == end) {
          return fmt::format("must be {} {} (got {})", text[0] == '-' ? ">=" : "<=", text[0] == '-' ? minimum : maximum,
                             text);
        }
        if (ec != std::errc() || !whole) return fmt::format("must be an integer (got {})", text);
        if (value < minimum) return fmt::format("must be >= {} (got {})", minimum, text);
        if (value > maximum) return fmt::format("must be <= {} (got {})", maximum, text);
        return {};
      },
      maximum == std::numeric_limits<int>::max() ? fmt::format("INT>={}", minimum)
                                                 : fmt::format("INT in [{} - {}]", minimum, maximum));
}

CLI::Validator integer_at_least(long long minimum) {
  return integer_in(minimum);
}

namespace {
// "0", "0.99", "3.40282e+38": bounds as a user writes them.
std::string bound_text(double value) {
  return fmt::format("{:g}", value);
}

// The common part of number_above and number_in: a finite number <= maximum,
// then `lower` on its value; "" when valid.
std::string check_number(const std::string& text, double maximum, const std::function<std::string(double)>& lower) {
  // strtod, not from_chars: on overflow it returns +-inf (then refused as too large), on underflow ~0.
  char* end = nullptr;
  const double value = text.empty() || std::isspace(static_cast<unsigned char>(text[0]))
                           ? std::nan("")
                           : std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || std::isnan(value)) return fmt::format("must be a number (got {})", text);
  if (std::string low = lower(value); !low.empty()) return low + " (got " + text + ")";
  if (!(value <= maximum)) return fmt::format("must be <= {} (got {})", bound_text(maximum), text);
  return {};
}
}  // namespace

CLI::Validator number_above(double bound, double maximum) {
  return CLI::Validator(
      [bound, maximum](std::string& text) -> std::string {
        return check_number(text, maximum,
                            [bound](double v) { return v > bound ? std::string() : "must be > " + bound_text(bound); });
      },
      "NUM>" + bound_text(bound));
}

CLI::Validator number_in(double minimum, double maximum) {
  return CLI::Validator(
      [minimum, maximum](std::string& text) -> std::string {
        return check_number(text, maximum, [minimum](double v) {
          return v >= minimum ? std::string() : "must be >= " + bound_text(minimum);
        });
      },
      maximum == kFloatMax ? "NUM>=" + bound_text(minimum)
                           : fmt::format("NUM in [{} - {}]", bound_text(minimum), bound_text(maximum)));
}

std::string parse_error_line(const CLI::Error& error) {
  std::string text = error.what();
  // CLI11: "<name>: <validator message>"; ours start with "must be".
  if (dynamic_cast<const CLI::ValidationError*>(&error) != nullptr) {
    const std::size_t colon = text.find(": must be ");
    if (colon != std::string::npos && colon > 0 && text.rfind('-', 0) == 0) text.erase(colon, 1);
  }
  return text;
}

int affinity_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

namespace {

std::string to_hex(const unsigned char* bytes, std::size_t size) {
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (std::size_t i = 0; i < size; ++i) {
    out.push_back(kHex[bytes[i] >> 4]);
    out.push_back(kHex[bytes[i] & 0xf]);
  }
  return out;
}

}  // namespace

std::string sha256_hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("sha256 failed (OpenSSL EVP_Digest)");
  }
  return to_hex(digest, len);
}

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) throw std::runtime_error("RAND_bytes failed (OpenSSL)");
  return to_hex(raw.data(), raw.size());
}

BenchCli::BenchCli(std::string name, std::string description, BenchDefaults defaults)
    : app_(std::move(description), name) {
  opts_.name = std::move(name);
  opts_.cpu_cores = affinity_cpu_count();
  add_shared_options(defaults);
  app_.set_version_flag("--version", layout::version_line(opts_.name), "The version and the commit it was built from");
  app_.footer(
      "Environment (set by mlbench-run; a flag given on the command line wins):\n"
      "  BENCH_NAME, SUITE_NAME, RUN_ID, JOB_ID (--jr-id), CUDA_VISIBLE_DEVICES (--vcd),\n"
      "  CPU_COUNT (--cpu-cores), OUTPUT_DIRECTORY (--report), DATA_DIRECTORY (root of default --data paths);\n"
      "  in a Slurm step, SLURM_CPUS_PER_TASK caps the default --cpu-cores\n"
      "Exit status: 0 completed, 1 failed (report says why), 2 bad usage.");
}

void BenchCli::record(CLI::Option* opt, std::function<nlohmann::json()> value, ArgKind kind) {
  recorded_.push_back(Recorded{key_of(opt), std::move(value), kind});
}

void BenchCli::add_shared_options(const BenchDefaults& d) {
  opts_.batch_size = d.batch_size;
  opts_.repeat = d.repeat;
  opts_.number = d.number;
  opts_.workers = d.workers;
  add_option("-b,--batch-size", opts_.batch_size, "Items per batch")->check(integer_at_least(1));
  add_option("-j,--workers", opts_.workers, "Data pipeline worker threads (0: load in the training thread)",
             ArgKind::Runtime)
      ->check(integer_at_least(0));
  add_option("--repeat", opts_.repeat, "Timed observations of the train stage")->check(integer_at_least(1));
  CLI::Option* number = add_option("--number", opts_.number, "Iterations (batches) per observation (no calibration)")
                             ->check(integer_at_least(1));
  // Not an ArgKind::Model argument: the workload is the same, only how long each
  // observation is differs (and the number it leads to depends on the machine).
  // Without a value the option's result is "" (default_str), told apart from "0" after parsing.
  CLI::Option* min_time =
      add_option("--min-time", opts_.min_time,
                 fmt::format("Calibrate --number so one observation lasts at least SECONDS (without a value: "
                             "{:g}); probe iterations run first as untimed warm-up. Default: off (0)",
                             kDefaultMinTime),
                 ArgKind::Runtime)
          ->check(CLI::Validator(
              [seconds = number_in(0.0, 3600.0)](std::string& text) { return text.empty() ? std::string() : seconds(text); },
              "SECONDS"))
          ->expected(0, 1)
          ->default_str("");
  min_time_opt_ = min_time;
  min_time->excludes(number);
  add_option("--warmup", opts_.warmup,
             "Observations dropped as warm-up (-1: min(10, repeat/2))", ArgKind::Runtime)
      ->check(integer_at_least(-1));
  add_option("--seed", opts_.seed, "Random seed", ArgKind::Runtime);
  add_flag("--cuda", cuda_flag_, "Run on CUDA (error when LibTorch has no CUDA)", ArgKind::Runtime);
  add_flag("--no-cuda", no_cuda_flag_, "Run on the CPU even when CUDA is available", ArgKind::Runtime);
  add_option("--report", opts_.report_dir,
             "Directory for the JSON report (default: $OUTPUT_DIRECTORY, else stdout; -: stdout)", ArgKind::Runtime);
  add_option("--data", opts_.data, "Dataset path (default: under $DATA_DIRECTORY)", ArgKind::Runtime);
  add_flag("--synthetic", opts_.synthetic, "Serve one batch made once in memory: no fetch, no prep");
  add_option("--cpu-cores", opts_.cpu_cores, "Torch intra-op threads (default: $CPU_COUNT, else the CPU affinity)",
             ArgKind::Runtime)
      ->check(integer_at_least(1));
  add_option("--jr-id", opts_.jr_id, "Slot of this instance (default: $JOB_ID)", ArgKind::Runtime)
      ->check(integer_at_least(0));
  add_option("--vcd", opts_.vcd, "Visible CUDA devices (default: $CUDA_VISIBLE_DEVICES)", ArgKind::Runtime);
  add_option("--trace", opts_.trace, "Write a Chrome trace-event JSON to FILE", ArgKind::Runtime);
  // Runtime: watching the GPU does not change the workload.
  add_option("--monitor-interval", opts_.monitor_interval,
             "Sample the GPU's utilisation, memory, power and SM clock every SECONDS through NVML during the timed "
             "loop, on a CUDA device (the report's gpu_monitor block); 0: off",
             ArgKind::Runtime)
      ->check(number_in(0.0, 86400.0))
      ->type_name("SECONDS");
  add_flag("--no-device-events", no_device_events_flag_,
           "On a CUDA device, time wait/h2d/compute on the host's clock instead of CUDA events on the device's stream",
           ArgKind::Runtime);
  add_flag("--nvtx", opts_.nvtx,
           "NVTX ranges around every pipeline stage (on its worker thread) and every loop phase (wait, h2d, compute), "
           "for nsys profile; needs a build with the CUDA toolkit's NVTX3 header",
           ArgKind::Runtime);
  add_option("--name", opts_.name, "Benchmark name in the report (default: $BENCH_NAME)", ArgKind::Runtime);
  add_option("--suite", opts_.suite, "Suite name in the report (default: $SUITE_NAME)", ArgKind::Runtime);
  add_option("--run-id", opts_.run_id, "Run number in the report (default: $RUN_ID)", ArgKind::Runtime)
      ->check(integer_at_least(0));
}

std::optional<int> BenchCli::parse(int argc, const char* const* argv) {
  return parse(argc, argv, current_environment());
}

std::optional<int> BenchCli::parse(int argc, const char* const* argv,
                                   const std::map<std::string, std::string>& env) {
  const std::string prog = app_.get_name();
  try {
    auto get = [&](const char* var) -> const std::string* {
      auto it = env.find(var);
      return (it == env.end() || it->second.empty()) ? nullptr : &it->second;
    };
    if (auto v = get("BENCH_NAME")) opts_.name = *v;
    if (auto v = get("SUITE_NAME")) opts_.suite = *v;
    if (auto v = get("RUN_ID")) opts_.run_id = env_int("RUN_ID", *v, 0);
    if (auto v = get("JOB_ID")) opts_.jr_id = env_int("JOB_ID", *v, 0);
    if (auto v = get("CUDA_VISIBLE_DEVICES")) opts_.vcd = *v;
    if (auto v = get("CPU_COUNT")) opts_.cpu_cores = env_int("CPU_COUNT", *v, 1);
    // In a Slurm step the task's CPUs are its own, whatever the affinity shows (a cluster
    // without task affinity) or CPU_COUNT was inherited as: threads follow the step, as they
    // follow --cpu-cores locally (a --cpu-cores on the command line still wins).
    if (auto v = get("SLURM_CPUS_PER_TASK")) {
      opts_.cpu_cores = std::min(opts_.cpu_cores, env_int("SLURM_CPUS_PER_TASK", *v, 1));
    }
    if (auto v = get("OUTPUT_DIRECTORY")) opts_.report_dir = *v;
    if (auto v = get("DATA_DIRECTORY")) opts_.data_directory = *v;
  } catch (const std::invalid_argument& e) {
    std::cerr << prog << ": error: " << e.what() << "\n";
    return 2;
  }
  if (opts_.data_directory.empty()) opts_.data_directory = "data";
  try {
    app_.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    std::cout << app_.help();
    return 0;
  } catch (const CLI::CallForAllHelp& e) {
    std::cout << app_.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << prog << ": error: " << parse_error_line(e) << " (see " << prog << " --help)\n";
    return 2;
  }
  if (cuda_flag_ && no_cuda_flag_) {
    std::cerr << prog << ": error: --cuda and --no-cuda are mutually exclusive\n";
    return 2;
  }
  if (min_time_opt_->count() > 0) {
    const auto& given = min_time_opt_->results();
    if (given.empty() || (given.size() == 1 && given[0].empty())) opts_.min_time = kDefaultMinTime;
  }
  if (opts_.report_dir == "-") opts_.report_dir.clear();  // stdout, even with $OUTPUT_DIRECTORY set
  if (cuda_flag_) opts_.cuda = true;
  if (no_cuda_flag_) opts_.cuda = false;
  opts_.device_events = !no_device_events_flag_;
  if (opts_.nvtx && !nvtx::available()) {
    std::cerr << prog << ": error: --nvtx needs a build with NVTX (the CUDA toolkit's nvtx3/nvToolsExt.h was not "
                 "found when it was configured)\n";
    return 2;
  }
  nvtx::enable(opts_.nvtx);
  if (opts_.warmup < 0) opts_.warmup = std::min(10, opts_.repeat / 2);
  if (opts_.warmup >= opts_.repeat) {
    std::cerr << prog << ": error: --warmup " << opts_.warmup << " leaves no timed observation of --repeat "
              << opts_.repeat << "\n";
    return 2;
  }
  return std::nullopt;
}

nlohmann::json BenchCli::args_json() const {
  nlohmann::json args = nlohmann::json::object();
  for (const auto& r : recorded_) args[r.key] = r.value();
  args["cuda"] = opts_.cuda ? nlohmann::json(*opts_.cuda) : nlohmann::json();
  args.erase("no_cuda");
  args["warmup"] = opts_.warmup;
  args["min_time"] = opts_.min_time > 0 ? nlohmann::json(opts_.min_time) : nlohmann::json();
  if (opts_.min_time > 0) args["number"] = nullptr;  // calibrated: the report's top-level number says which
  return args;
}

std::string BenchCli::unique_id() const {
  nlohmann::json model = nlohmann::json::object();
  for (const auto& r : recorded_) {
    if (r.kind == ArgKind::Model) model[r.key] = r.value();
  }
  model["bench"] = app_.get_name();
  return sha256_hex(model.dump());  // nlohmann::json objects iterate keys in sorted order
}

}  // namespace mlbench::core
