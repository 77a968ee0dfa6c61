// The benchmark command line (Contract 1): shared flags, environment
// overrides from the runner, benchmark-specific flags, and the argument set
// that identifies a configuration (unique_id).
#pragma once

#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace mlbench::core {

// Values of the shared flags after parsing (flag > environment > default).
struct BenchOptions {
  std::string name;                // BENCH_NAME, --name
  std::string suite = "mlbench";   // SUITE_NAME, --suite
  int run_id = 0;                  // RUN_ID, --run-id
  int batch_size = 1;              // --batch-size/-b
  int workers = 0;                 // --workers/-j (pipeline threads)
  int repeat = 1;                  // --repeat
  int number = 1;                  // --number (the default when neither --number nor --min-time is given)
  double min_time = 0;             // --min-time SECONDS: calibrate number (calibration.h); 0 = off
  int warmup = -1;                 // --warmup; -1 = min(10, repeat / 2) (resolved by parse)
  long long seed = 0;              // --seed
  std::optional<bool> cuda;        // --cuda / --no-cuda; unset = CUDA when available
  std::string report_dir;          // OUTPUT_DIRECTORY, --report; "" = print the report to stdout
  std::string data;                // --data
  std::string data_directory;      // DATA_DIRECTORY (root for default --data paths)
  bool synthetic = false;          // --synthetic
  int cpu_cores = 1;               // CPU_COUNT, --cpu-cores (torch intra-op threads)
  int jr_id = 0;                   // JOB_ID, --jr-id (the runner's slot)
  std::string vcd;                 // CUDA_VISIBLE_DEVICES, --vcd
  std::string trace;               // --trace FILE (Chrome trace-event JSON)
  double monitor_interval = 1.0;   // --monitor-interval SECONDS: GPU monitor sampling (gpu_monitor.h); 0 = off
  bool device_events = true;       // --no-device-events: phases on the host's clock on a GPU too
  bool nvtx = false;               // --nvtx: NVTX ranges for the pipeline's stages and the loop's phases (core/nvtx.h)
};

struct BenchDefaults {
  int batch_size = 1;
  int repeat = 1;
  int number = 1;
  int workers = 0;
};

// Whether an argument changes the workload (part of unique_id) or only how and
// where it runs (excluded, as the Mila suite did).
enum class ArgKind { Model, Runtime };

// Validators of numeric options, for every command. Their messages finish the
// option's name into one line (see parse_error_line): "--timeout must be > 0
// (got 0)", "--classes must be an integer (got abc)", "--lr must be <= 3.40282e+38
// (got 1e300)"; CLI11's own range checks print a 300-digit bound and call "abc"
// out of range.

// The largest value number_* accept unless told otherwise: LibTorch keeps
// hyper-parameters such as the learning rate as float, so a larger value would end
// in LibTorch's overflow error naming no flag.
inline constexpr double kFloatMax = std::numeric_limits<float>::max();

// An integer in [minimum, maximum]; the default maximum is the largest int, the
// type most options bind (a larger value would wrap or fail CLI11's conversion).
CLI::Validator integer_in(long long minimum, long long maximum = std::numeric_limits<int>::max());
// integer_in(minimum).
CLI::Validator integer_at_least(long long minimum);
// A finite number > `bound` and <= `maximum`.
CLI::Validator number_above(double bound, double maximum = kFloatMax);
// A finite number in [minimum, maximum].
CLI::Validator number_in(double minimum, double maximum = kFloatMax);

// The one line to print for a command-line error: "--timeout must be > 0 (got 0)"
// for a failed validator above (CLI11 writes "--timeout: must be ..."), CLI11's
// text otherwise.
std::string parse_error_line(const CLI::Error& error);

// CPUs this process may run on (its affinity mask); at least 1.
int affinity_cpu_count();

class BenchCli {
 public:
  BenchCli(std::string name, std::string description, BenchDefaults defaults);
  // Options are bound to members by reference: not copyable, not movable.
  BenchCli(const BenchCli&) = delete;
  BenchCli& operator=(const BenchCli&) = delete;

  CLI::App& app() { return app_; }

  // Adds a benchmark-specific option bound to `var`; its value enters the report's
  // `args` and, for ArgKind::Model, the unique_id.
  template <class T>
  CLI::Option* add_option(const std::string& flags, T& var, const std::string& help, ArgKind kind = ArgKind::Model) {
    CLI::Option* opt = app_.add_option(flags, var, help)->capture_default_str();
    record(opt, [&var] { return nlohmann::json(var); }, kind);
    return opt;
  }
  CLI::Option* add_flag(const std::string& flags, bool& var, const std::string& help, ArgKind kind = ArgKind::Model) {
    CLI::Option* opt = app_.add_flag(flags, var, help);
    record(opt, [&var] { return nlohmann::json(var); }, kind);
    return opt;
  }

  // Reads the environment, then the command line. Returns an exit code when the
  // program must stop now: 0 after --help, 2 after a bad flag, value or
  // environment variable (one line on stderr naming it).
  std::optional<int> parse(int argc, const char* const* argv);
  // Same, with an explicit environment (tests).
  std::optional<int> parse(int argc, const char* const* argv, const std::map<std::string, std::string>& env);

  const BenchOptions& options() const { return opts_; }
  BenchOptions& options() { return opts_; }

  // Every option's value by its long name without dashes ("batch_size": 256, ...).
  nlohmann::json args_json() const;
  // sha256 (hex) of the sorted Model arguments: equal for runs of the same workload.
  std::string unique_id() const;

 private:
  struct Recorded {
    std::string key;
    std::function<nlohmann::json()> value;
    ArgKind kind;
  };
  void record(CLI::Option* opt, std::function<nlohmann::json()> value, ArgKind kind);
  void add_shared_options(const BenchDefaults& d);

  CLI::App app_;
  BenchOptions opts_;
  std::vector<Recorded> recorded_;
  bool cuda_flag_ = false;
  bool no_cuda_flag_ = false;
  bool no_device_events_flag_ = false;
  CLI::Option* min_time_opt_ = nullptr;
};

// sha256 of a string, lower-case hex (OpenSSL).
std::string sha256_hex(const std::string& data);
// `bytes` random bytes (OpenSSL's RAND_bytes), lower-case hex: secrets and nonces.
std::string random_hex(std::size_t bytes);

}  // namespace mlbench::core
