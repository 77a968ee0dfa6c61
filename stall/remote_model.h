// The fetch model of a dataset over HTTP (docs/stall.md, "Datasets over HTTP"): an object store
// answers one request in L seconds and serves at most B bytes/s however many are in flight, so
// D requests in flight fetch F(D) = min(B / size, D / L) samples/s. With a share x of the dataset
// in the item cache only misses cross the network, but read-ahead's window is D samples in the
// sampler's order, hits included: hits do not free request slots, so the latency bound stays D / L
// and only the bandwidth bound rises: F(D, x) = min(D / L, B / (size (1 - x))).
// A request also takes CPU that prep needs: the client's own (its process CPU per request at the
// fetch-alone run) and, where the server (or a proxy before it) runs on this machine, the
// server's (the machine's other CPU per request meanwhile). With the loader's shape known the
// speed is simulated (stall/readahead_model.h: workers, windows, D requests in flight each taking
// L(D), the requests' CPU on the prep CPUs, prep calibrated so every sample cached runs at P;
// L(D) grown with prep's load, calibrated from the cached run's first epoch);
// else T(D, x) = min(P(x), F(D, x)), P(x) = 1 / (1/P + (1 - x) r / c), r the requests' CPU, c
// the prep CPUs. The what-if over --io-depth, its check against runs it did not use, and the
// remedy it names. Pure.
#pragma once

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis.h"
#include "serial_model.h"  // LoaderShape

namespace mlbench::stall {

// What the probe of the server measured.
struct RemoteRates {
  double latency_s = 0;                // seconds a request takes (L): the model's
  double u_latency = 0;                // its relative uncertainty
  double probe_latency_s = 0;          // one request at a time, as the probe measured it (L1)
  // L1's relative uncertainty: its standard error, or the drift between the probes at the
  // analysis's start and end where larger (half their difference over their mean); and those two
  // probes (0: one probe only, L1 is the start's).
  double u_probe_latency = 0;
  double probe_latency_start_s = 0, probe_latency_end_s = 0;
  std::string latency_from = "probe";  // "probe", or the run L was taken from
  double bandwidth_Bps = 0;            // probe_depth requests at once: bytes/s (B)
  double u_bandwidth = 0;
  int probe_depth = 0;
  double mean_bytes = 0;  // the objects' mean size
  bool known() const { return latency_s > 0 && bandwidth_Bps > 0 && mean_bytes > 0; }
};

// The CPU a request takes, on this machine (seconds per request; 0: not measured).
struct RequestCpu {
  double client_s = 0;                   // the loader's own CPU per request (stall/measured.h, request_cpu_of)
  double others_s = 0;                   // the rest of the machine's meanwhile (/proc/stat): a server, a proxy
  std::string client_from, others_from;  // the runs each was taken from ("": not measured)
  // The client's CPU per request as its threads measured it, per run that has it (run label ->
  // seconds): the I/O threads' CPU in their reads and the transfer thread's, over its requests.
  std::map<std::string, double> direct_s;
  double share = 1;                      // the share of others_s on the prep CPUs (those CPUs over the machine's)
  double cpus = 0;                       // the prep CPUs the charge is spread over (0: no charge)
  // The charge's range: the lowest and highest each term measured in the runs that measure it (the
  // client's threads in the cached and cold runs, the rest of the machine beside the cold and
  // fetch-alone runs); 0, 0: only the one value.
  double client_lo_s = 0, client_hi_s = 0, others_lo_s = 0, others_hi_s = 0;
  // The server shares this machine: others spent at least 10% of the client's CPU per request
  // (and 20 us) while it fetched.
  bool server_here() const { return others_s >= 20e-6 && others_s >= 0.1 * client_s; }
  double charged_s() const { return client_s + share * others_s; }
};

// The requests' latency with prep beside them (stall/measured.h, loaded_latency_of): the cached
// run's first epoch fills the item cache, every sample a request at the runs' depth with prep
// running; its per-read latency over the fetch-alone run's, and that epoch's samples/s.
struct LoadedLatency {
  double ratio = 0;  // per-read latency under prep's load / the fetch-alone run's
  double rate = 0;   // the loaded epoch's samples/s
  int depth = 0;     // its requests in flight
  std::string from;  // the run ("cached"); "": not measured
  bool known() const { return ratio > 0 && rate > 0 && depth > 0; }
};

// F(D, x): samples/s with `depth` samples in read-ahead's window, a share `x` of them cache hits.
double remote_fetch_rate(const RemoteRates& r, int depth, double x = 0);
// T(D, x): the loader's speed at `depth`, cache share `x`, prep-bound speed `P`.
double remote_speed(const RemoteRates& r, int depth, double P, double x = 0);

// A run at some --io-depth held against the model.
struct DepthPoint {
  std::string label;
  int depth = 0;
  double measured = 0;
  double predicted = 0;
  double cache = 0;  // the run's item cache, a share of the dataset
  // The prediction's range: at the corners of L, B and P's uncertainty (±1 standard error) and of
  // the request CPU's range (0, 0: not known).
  double lo = 0, hi = 0;
  // The measured rate's own noise: its 95% half-width, relative (0: not known).
  double u_measured = 0;
  // Where a request's time went, as the run measured it (its loader's read-ahead, ms; 0: not
  // measured) and as the model has it: the read itself, and the rest of its time from issue to take
  // (a queued read's wait for an I/O thread, its item's wait for the worker, the worker's wake-up).
  double read_ms = 0, beside_ms = 0;
  double model_read_ms = 0;  // L(D) and its growth under prep's load, at the predicted speed
  double error_pct() const { return predicted > 0 ? 100 * (measured - predicted) / predicted : 0; }
  // Off: more than `threshold_pct` from the prediction, and the measured rate's 95% interval
  // (±u_measured) outside the prediction's range: a held-out run measured to ±6% cannot tell a
  // prediction 5% off from one on the mark.
  bool off(double threshold_pct) const {
    if (!(std::abs(error_pct()) > threshold_pct)) return false;
    const double r_lo = hi > 0 ? lo : predicted, r_hi = hi > 0 ? hi : predicted;
    return measured * (1 + u_measured) < r_lo || measured * (1 - u_measured) > r_hi;
  }
};

// The loader the runs used, for the simulated speed: its shape, the consumer's rate G and the
// prep time per sample that makes the cached run simulate at P.
struct RemoteLoader {
  LoaderShape shape;
  double G = 0;
  double prep_s = 0;
  int samples = 20000;  // simulated per prediction
};

struct RemoteWhatIf {
  RemoteRates rates;
  RequestCpu cpu;
  std::optional<RemoteLoader> loader;  // none: the closed form
  LoadedLatency loaded;                // the latency under load it was calibrated from
  // Simulated, a request's latency grows by load_k_s u^c, u prep's utilisation of the c prep CPUs
  // at the simulated speed: 0 where not calibrated (no loaded epoch, prep below 30% of the CPUs in
  // it, no simulation).
  double load_k_s = 0;
  double u_loaded = 0;                 // prep's utilisation in the loaded epoch
  double P = 0;                        // the cached run's speed
  double u_P = 0;
  int depth_now = 0;               // the requests in flight L was measured at (the fetch-alone run's)
  int depth_run = 0;               // the cold run's, as the loader chose it (0: depth_now)
  int from_depth() const { return depth_run > 0 ? depth_run : depth_now; }
  std::vector<int> depths;         // the curve's points
  std::vector<DepthPoint> checks;  // measured runs the model did not use (the cold run and --io-depths)
  double max_error_pct = 0;
  bool passed = true;            // no check off: each within kSelfCheckThresholdPct or its range (or none made)
  std::optional<int> depth_rec;  // the smallest depth reaching kPlateauShare of the best speed
};

// L1 probed again after the runs (`end`, its relative standard error `u_end`): the latency drifts
// over minutes (the server's host, the network), and the held-out runs came between the two probes.
// L1 becomes their mean, its uncertainty the largest of their standard errors and half their
// difference over that mean; L too while it is the probe's. Nothing when either probe is missing.
void with_end_probe(RemoteRates& r, double end, double u_end);

// L as the loader's own requests see it: `depth_now` / S, S the fetch-alone run's rate at the
// runs' depth (its threads, connections and the server's load), when S is latency-bound (below
// 90% of B / size); else the probe's L. `u_S`: S's relative uncertainty.
RemoteRates with_loader_latency(RemoteRates rates, int depth_now, double S, double u_S);

// The latency a request takes with `depth` in flight: the probe's one-at-a-time L1 at 1, the runs'
// L at their depth, and L1 + (L - L1) (1 - 1/D) / (1 - 1/D_now) at D: a request waits behind the
// others in flight at the stages they share one at a time (the client's transfer thread, the
// server's, a proxy's), as likely as one is ahead of it.
double latency_at(const RemoteRates& r, int depth, int depth_now);

// The prep time per sample that makes the loader, every sample in the item cache, run at P.
RemoteLoader calibrate_remote_loader(const LoaderShape& shape, double G, double P, int samples = 20000);

// The speed at `depth` requests in flight, cache share `x`: simulated when the loader is known,
// else the closed form with the requests' CPU charged to prep. `rates`, `P` stand for w's (the
// remedy's range moves them).
double remote_speed(const RemoteWhatIf& w, int depth, double x = 0);
// `latency_s`, when given: the request's latency the speed was simulated with (L(D) and its growth).
double remote_speed(const RemoteWhatIf& w, const RemoteRates& rates, double P, int depth, double x = 0,
                    double* latency_s = nullptr);

// The what-if from the rates, the requests' CPU, the loader (nullopt: the closed form), the cached
// run's speed and the checks' measured rates.
RemoteWhatIf remote_whatif(const RemoteRates& rates, double P, double u_P, int depth_now,
                           const std::vector<DepthPoint>& measured, const RequestCpu& cpu = {},
                           std::optional<RemoteLoader> loader = std::nullopt, const LoadedLatency& loaded = {});
// The io-depth remedy ("raise --io-depth from 8 to 32"), when the recommended depth is above the
// one the runs used; its gain range over the rates' uncertainty.
std::optional<Remedy> io_depth_remedy(const RemoteWhatIf& w);
// stall.json's whatif.http.
nlohmann::json remote_whatif_json(const RemoteWhatIf& w);
// The model in words (stall.json's whatif.http.model): simulated, or the closed form.
const char* remote_formula(const RemoteWhatIf& w);

}  // namespace mlbench::stall
