// Warnings about the BLAS the reports' runs used (machine.blas of each instance):
// a CPU run on the reference BLAS measures nothing a user runs, and two trees (or
// runs) on different BLAS libraries differ by more than the change under test.
#pragma once

#include <string>
#include <vector>

#include "report/reports_tree.h"

namespace mlbench::report {

// BLAS names found in a tree, each with the runs that used it ("openblas-pthread" -> R0, R1).
// Instances of reports older than the field are left out.
std::vector<std::pair<std::string, std::vector<std::string>>> blas_by_name(const ReportsTree& tree);

// One warning when any instance used the reference BLAS (naming its benchmarks), and one
// when the runs of the tree used different BLAS libraries.
std::vector<std::string> blas_warnings(const ReportsTree& tree);

// One warning when `tree` and the --compare tree `other` (read from `other_dir`) used
// different BLAS libraries.
std::vector<std::string> blas_compare_warnings(const ReportsTree& tree, const ReportsTree& other,
                                               const std::string& other_dir);

}  // namespace mlbench::report
