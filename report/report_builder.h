// Assembles the Report every reporter prints: one row per benchmark found (or
// expected by the targets), with stall analyses attached, then the suite lines.
#pragma once

#include <map>
#include <string>

#include "report/report_model.h"
#include "report/reports_tree.h"

namespace mlbench::report {

Report build_report(const std::string& suite, const std::string& reports_dir, const ReportsTree& tree,
                    const Targets& targets, const std::map<std::string, StallAnalysis>& analyses, int min_runs);

}  // namespace mlbench::report
