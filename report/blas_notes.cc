#include "report/blas_notes.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace mlbench::report {
namespace {
std::string join(const std::vector<std::string>& xs) {
  std::string out;
  for (const std::string& x : xs) out += (out.empty() ? "" : ", ") + x;
  return out;
}

std::string describe(const std::vector<std::pair<std::string, std::vector<std::string>>>& names) {
  std::vector<std::string> parts;
  for (const auto& [name, runs] : names) parts.push_back(fmt::format("{} ({})", name, join(runs)));
  return join(parts);
}
}  // namespace

std::vector<std::pair<std::string, std::vector<std::string>>> blas_by_name(const ReportsTree& tree) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const std::string& run : tree.runs) {
    for (const auto& [bench, input] : tree.benches) {
      for (const RunInstances& r : input.runs) {
        if (r.run != run) continue;
        for (const Instance& i : r.instances) {
          if (i.blas.empty()) continue;
          auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == i.blas; });
          if (it == out.end()) it = out.insert(out.end(), {i.blas, {}});
          if (std::find(it->second.begin(), it->second.end(), run) == it->second.end()) it->second.push_back(run);
        }
      }
    }
  }
  return out;
}

std::vector<std::string> blas_warnings(const ReportsTree& tree) {
  std::vector<std::string> out;
  std::set<std::string> reference;
  for (const auto& [bench, input] : tree.benches) {
    for (const RunInstances& r : input.runs) {
      for (const Instance& i : r.instances) {
        if (i.blas == "reference") reference.insert(bench);
      }
    }
  }
  if (!reference.empty()) {
    out.push_back(fmt::format(
        "{} ran on the reference BLAS (machine.blas): its CPU matrix products are ~20x slower than an optimised "
        "BLAS's, so these speeds are not what a user gets; install one (scripts/bootstrap.sh selects OpenBLAS)",
        join(std::vector<std::string>(reference.begin(), reference.end()))));
  }
  const auto names = blas_by_name(tree);
  if (names.size() > 1) out.push_back("the runs used different BLAS libraries: " + describe(names));
  return out;
}

std::vector<std::string> blas_compare_warnings(const ReportsTree& tree, const ReportsTree& other,
                                               const std::string& other_dir) {
  const auto a = blas_by_name(tree);
  const auto b = blas_by_name(other);
  std::set<std::string> an, bn;
  for (const auto& p : a) an.insert(p.first);
  for (const auto& p : b) bn.insert(p.first);
  if (an.empty() || bn.empty() || an == bn) return {};
  return {fmt::format("--compare {} used another BLAS: {} there, {} here; the differences include the BLAS's",
                      other_dir, describe(b), describe(a))};
}

}  // namespace mlbench::report
