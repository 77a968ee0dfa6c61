// Turns the measured runs of a stall analysis into its result (stall.json):
// rates, split with noise, direct-vs-differential comparison, CPU sweep,
// what-if curve with the measured points, recommendations and verdict.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/stall_record.h"
#include "executor.h"
#include "measured.h"
#include "page_cache.h"
#include "plan.h"

namespace mlbench::stall {

// stall.json's schema: 1 (no field) before the serial model; 2 adds schema_version,
// whatif.{io_depth, loader, serial, page_cache} and recommendation.{cache,
// page_cache_fraction}; 3 adds whatif.coordinated; 4 adds
// whatif.partitioned and raw.peer_rate; 5 adds `rounds` (--rounds); 6 adds
// runs.<label>.held_in_memory; 7 adds whatif.partitioned.peer_cpu and the peer runs
// (runs.peer-local, runs.peer-N with their `nodes`); 8 adds whatif.partitioned.prep_cpu_from
// and P_from (p and P from the peer-local runs); 9 adds peer_cpu.pairs_local_cpu_per_item_us and
// predictions[].partitioned_pairs, and partitioned_range becomes their range (each pair's p and k),
// and whatif.coordinated.prep_cpu_from; 10 adds whatif.coordinated.devices,
// predictions[].device_per_job(_from) and the synthetic-x<K> runs (on a device); 11 adds
// predictions[].step_cpu_extra_us(_from) and the synthetic-x<K> runs on a CPU; 12 counts a peer
// fetch's CPU per request (whatif.partitioned.peer_cpu_us becomes peer_request_cpu_us, with
// batch_items and max_ids_per_request; peer_cpu.{used,nodes,pairs}_us are per request, with
// peer_cpu.per and requests_per_sample; predictions[].peer_requests_per_sample;
// storage.peer_ids_per_request); 13 adds findings (each stall share judged), ranges (whatif.curve[].lo/hi,
// measured[].lo/hi, remedies[].gain_range, recommendation.predicted_range, whatif.uncertainty),
// recommendation.{knee_fraction, plateau_share, predicted, advice, not_named}, the page-cache check
// (whatif.page_cache.measured, self_check.points[].cache), and makes recommendation.cache_fraction
// the plateau's share rather than the knee; 14 lets the bound follow the split (a claimed stall
// names it beside a larger compute share; "inconclusive" where the split decides nothing) and adds
// recommendation.{inconclusive, measure_factor, withheld_note} and remedies[].{range_from, basis}
// (a remedy without a range is not named). Every other change adds fields: readers of 1 read 2 to 14.
constexpr int kStallSchemaVersion = core::kStallSchema;  // the version readers check (core/stall_record.h)

// The stall.json object (documented in docs/stall.md). Needs the runs
// synthetic, cached, cold, fetch-cold and fetch-cached; throws naming a missing one.
nlohmann::json analyze(const AnalysisContext& ctx, const std::map<std::string, RunOutcome>& runs, const RawRates& raw);

// --rounds: every run of the plan made `rounds` times, round after round, so a host whose speed
// drifts over minutes weighs on every run alike. Per label, the run with the median rate (the
// lower middle one for an even count) stands for it: its report, residency and CPU time come
// from one real run, and the model reads them together as before. Throws when `rounds` is empty.
const RunOutcome& median_run(const std::vector<RunOutcome>& rounds);
// stall.json's `rounds`: the count and, per label, every round's rate in order and the chosen one's.
nlohmann::json rounds_json(const std::map<std::string, std::vector<RunOutcome>>& rounds, int count);

// The console table printed after an analysis.
std::string console_summary(const nlohmann::json& result);

}  // namespace mlbench::stall
