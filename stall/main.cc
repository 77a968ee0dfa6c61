// mlbench-stall: differential data-stall analysis of one benchmark on this
// machine (synthetic, cached and cold runs, storage and memory read rates, a
// CPU sweep, measured cache fractions), what-if prediction and recommendations.
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "analyzer.h"
#include "command_line.h"
#include "core/report.h"
#include "core/stall_record.h"
#include "reanalysis.h"
#include "session.h"
#include "store/results_store.h"

namespace fs = std::filesystem;
using namespace mlbench;
using namespace mlbench::stall;

namespace {

// --reanalyze DIR: the analysis in DIR modelled again (stall/reanalysis.h), written to OUT.
int reanalyze_command(const fs::path& dir, const std::string& out_dir, const std::string& store) {
  try {
    const nlohmann::json result = reanalyze(dir);
    const fs::path out = out_dir.empty() ? dir : fs::path(out_dir);
    fs::create_directories(out);
    if (out == dir) {
      const auto was = core::parse_stall_record(result).reanalysis_of.value_or(1);
      fs::rename(dir / "stall.json", dir / fmt::format("stall.v{}.json", was));
    }
    core::write_json_atomic(out / "stall.json", result);
    std::cout << console_summary(result) << "\nWrote " << (out / "stall.json").string() << " (" << dir.string()
              << "'s runs, modelled again)\n";
    if (!store.empty()) {
      try {
        store::record_stall_file(store, out / "stall.json");
      } catch (const std::exception& e) {
        std::cerr << "mlbench-stall: error: results store " << e.what() << "\n";
        return 1;
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "mlbench-stall: error: --reanalyze: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  ParsedCommandLine parsed = parse_command_line(argc, argv);
  if (parsed.exit) return *parsed.exit;
  StallOptions& o = parsed.options;
  if (!o.reanalyze_dir.empty()) return reanalyze_command(o.reanalyze_dir, o.out_dir, o.store);
  if (const int rc = check_options(o)) return rc;
  return run_session(o);
}
