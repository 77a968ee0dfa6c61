// mlbench-stall --store (results_store.h): one analysis and the machine it ran on.
#include <chrono>
#include <fstream>
#include <sstream>

#include "core/report_name.h"
#include "store/results_store.h"

namespace mlbench::store {

void record_stall_file(const std::string& spec, const std::filesystem::path& stall_json) {
  std::ifstream in(stall_json);
  if (!in) throw StoreError(stall_json.string() + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  const auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded()) throw StoreError(stall_json.string() + ": not JSON");
  StallAnalysisRecord a = stall_analysis_record(core::parse_stall_record(j), text.str());
  a.recorded_at = core::utc_iso8601(std::chrono::system_clock::now());
  auto store = ResultsStore::open(spec);
  const MachineRecord machine = this_machine();
  store->record_machine(machine);
  a.machine = machine.fingerprint;
  store->record_stall(a);
}

}  // namespace mlbench::store
