// The measured inputs of a stall analysis: the runs' reports read once, the rates G, P, F_obs, S,
// C with their uncertainty, the split, the CPU sweep and the loader the runs measured, as every
// model and the advice take them (docs/stall.md, "What it measures").
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis.h"
#include "core/instance_report.h"
#include "executor.h"
#include "page_cache.h"
#include "remote_model.h"
#include "serial_model.h"

namespace mlbench::stall {

// Direct reads of the dataset's files, outside any benchmark.
struct RawRates {
  ReadRate seq_cold;
  ReadRate rand_cold;
  ReadRate cached;
  double mean_file_bytes = 0;
  double peer_rate = 0;   // items of mean_file_bytes one node fetches from a peer over loopback (0: not measured)
  double peer_cpu_s = 0;  // CPU seconds per such item, asking and answering
  int peer_ids_per_request = 1;  // the items each request of that measurement carried
  std::string peer_runs_note;    // why there are no peer runs (skipped or failed); "" when made or not asked for
  RemoteRates remote;            // a dataset over HTTP: the server's latency and bandwidth (not known: local files)
};

struct AnalysisContext {
  StallConfig config;
  std::size_t items = 0;
  int batch_size = 0;
  int cores_now = 1;         // CPUs the main runs had
  bool exec = false;         // --exec: a user's command, advised in its own terms (DataLoader, RAM, storage)
  double dataset_bytes = 0;  // the dataset's files, for advice in GB (0: not known)
  // --rounds: every round's rate per run label, in order (empty with one round). Their spread is
  // the drift between runs that one run's own observations cannot see.
  std::map<std::string, std::vector<double>> round_rates;
};

// A run's process CPU per sample over its timed observations, all of it or its system part (the
// report's `process_cpu`); nullopt in reports written before it existed.
std::optional<double> cpu_per_item_s(const RunOutcome& r, bool system_only = false);

// The run `label`; throws naming it when the analysis lacks it.
const RunOutcome& need(const std::map<std::string, RunOutcome>& runs, const std::string& label);
// A run's spec: as the executor ran it, or for outcomes made without one (a finished analysis
// read back, a test) the one its label names (plan.h).
RunSpec spec_of(const std::string& label, const RunOutcome& r);
// A report's device is not the CPU ("cpu" when it names none).
bool on_device(const core::InstanceReport& r);
// The pipeline's stage timers per item (pipeline.stages.<name>.per_item_ms), summed over
// `names`, in seconds; nullopt when none of them is there.
std::optional<double> stages_per_item_s(const core::InstanceReport& report, std::initializer_list<const char*> names);
// The report's stall.stall_pct, NaN without it.
double stall_pct_of(const RunOutcome& r);
// One warning naming the runs whose pipeline skipped corrupt samples, or none.
std::vector<std::string> skipped_sample_warnings(const std::map<std::string, RunOutcome>& runs);
// The share of the dataset's `items` that a run's item cache held at its end; -1 without a cache block.
double item_cache_fraction(const RunOutcome& r, std::size_t items);
// The mean CPU per sample of nodes [from, to) of a combined run; nullopt without it.
std::optional<double> mean_cpu_per_item_s(const RunOutcome& r, std::size_t from, std::size_t to);

// The loader the runs measured, from the cached run's report: its workers, prefetch and
// --io-depth (absent: 0, workers that fetch and then prep each sample in turn), its prep CPUs
// (the workers, at most the CPUs the run had and its --cpu-cores), and the prep time per sample
// its stage timers saw.
struct MeasuredLoader {
  bool known = false;  // the report says how many workers built batches
  int io_depth = 0;
  int window = 1;  // reads each worker keeps ahead (pipeline.read_ahead.window_per_worker)
  LoaderShape shape;
  std::optional<double> prep_busy_s;
};
MeasuredLoader measured_loader(const RunOutcome& cached, int batch_size, int cores_now);

// The CPU a read takes from prep (docs/stall.md, "Analysis", "A read's CPU").
ReadCpu read_cpu_of(const std::map<std::string, RunOutcome>& runs, int lanes);

// Over HTTP: the CPU a request takes (docs/stall.md, "Datasets over HTTP", "A request's CPU"):
// the loader's own, the cold run's process CPU per sample less the cached run's (every sample in
// the item cache: no request), as it pays it with prep beside it (else the fetch-alone runs'); and
// the rest of the machine's meanwhile, the cold run's machine busy CPUs less its own, per sample
// (else the fetch-alone run's): a server or proxy on this machine. Charged over `prep_cpus`, the
// others' share being prep_cpus / `machine_cpus`. Zeros where the reports lack them.
RequestCpu request_cpu_of(const std::map<std::string, RunOutcome>& runs, int prep_cpus, int machine_cpus);

// Over HTTP: the requests' latency with prep beside them, from the cached run's first epoch (it
// fills the item cache: every sample a request, prep running), relative to the fetch-alone run's
// (docs/stall.md, "Datasets over HTTP", "Latency under prep's load"). Empty where either report
// lacks pipeline.read_ahead.per_read_ms or the first epoch's rate.
LoadedLatency loaded_latency_of(const std::map<std::string, RunOutcome>& runs);

// Everything the models take from the runs.
struct Measured {
  const RunOutcome* synthetic = nullptr;
  const RunOutcome* cached = nullptr;
  const RunOutcome* cold = nullptr;
  const RunOutcome* fetch_cold = nullptr;
  const RunOutcome* fetch_cached = nullptr;
  core::InstanceReport synthetic_report, cached_report;
  bool compute_on_device = false;
  int compute_cpus = 0;  // the synthetic run's --cpu-cores (0: not given)
  double G = 0, P = 0, F_obs = 0, S = 0, C = 0;
  std::string G_from;                                  // the run G was taken from
  double u_G = 0, u_P = 0, u_F = 0, u_S = 0, u_C = 0;  // relative uncertainty of each rate
  Split split;
  SplitNoise noise;
  std::map<int, double> p_by_cores;    // the CPU sweep (at least this machine's count: P)
  std::map<int, double> u_p_by_cores;  // each sweep run's relative uncertainty, as u_P's (0: measured once)
  nlohmann::json sweep;                // the sweep as stall.json's prep_by_cores
  MeasuredLoader loader;
  // A dataset over HTTP: its io-depth what-if (null: local files), whose fetch the cache what-if
  // takes (requests in flight, each taking L, at most B bytes/s; stall/remote_model.h).
  const RemoteWhatIf* http = nullptr;
  bool serial = false, reads_ahead = false, simulated = false;  // the model of the loader
  ReadCpu read_cpu;
  double storage_burst = 0;  // reads storage serves at once (0: one at a time, an emulated device)
};

// The runs synthetic, cached, cold, fetch-cold and fetch-cached are needed; throws naming one missing.
Measured measure(const AnalysisContext& ctx, const std::map<std::string, RunOutcome>& runs);

}  // namespace mlbench::stall
