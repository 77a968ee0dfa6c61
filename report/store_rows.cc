#include "report/store_rows.h"

#include <cmath>

#include "report/reports_tree.h"

namespace mlbench::report {

namespace {

std::optional<double> finite(double v) {
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

store::InstanceRecord instance_record(const core::InstanceReport& r, const std::string& file, const std::string& run_id,
                                      std::int64_t pass) {
  const std::string base = file.substr(file.find_last_of('/') + 1);
  const Instance parsed = parse_instance(r, base);
  store::InstanceRecord i;
  i.run_id = run_id;
  i.pass = pass;
  i.slot = parsed.slot;
  i.bench = r.name;
  i.job = r.runner ? r.runner->job : r.name;
  i.file = file;
  i.failed = parsed.failed;
  i.reason = parsed.reason;
  i.items_per_s = finite(parsed.items_per_s);
  i.stall_pct = finite(parsed.stall_pct);
  i.wait_s = finite(parsed.wait_s);
  i.h2d_s = finite(parsed.h2d_s);
  i.compute_s = finite(parsed.compute_s);
  // The data pipeline's busy time per item: "fetch" is storage, the other stages are prep.
  if (r.pipeline && !r.pipeline->stages.empty()) {
    double fetch = 0, prep = 0;
    bool any = false;
    for (const auto& [stage, totals] : r.pipeline->stages) {
      if (!totals.per_item_ms) continue;
      any = true;
      (stage == "fetch" ? fetch : prep) += *totals.per_item_ms;
    }
    if (any) {
      i.fetch_ms_per_item = fetch;
      i.prep_ms_per_item = prep;
    }
  }
  i.start_time = r.start_time;
  i.report = core::to_json(r);
  return i;
}

}  // namespace mlbench::report
