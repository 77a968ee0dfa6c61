// The significance test of mlbench-report --compare: a two-sided Mann-Whitney U
// test over the per-pass (run) values of both sides, as plain functions over
// numbers (no I/O), documented in docs/report.md ("Significance").
#pragma once

#include <span>
#include <string>

namespace mlbench::report {

inline constexpr double kSignificanceAlpha = 0.05;
inline constexpr const char* kSignificanceTest = "mann-whitney-u";
// The exact distribution is computed up to this many values in all (both sides):
// passes are a handful a side, and the DP costs N * n_a * N^2 steps (~13M at 60).
// Above it, the normal approximation is used.
inline constexpr int kMaxExactTotal = 60;

enum class UMethod {
  None,                // a side has no value: no test
  Exact,               // no ties: the exact distribution of U
  ExactTies,           // ties: the exact distribution of the midrank sum over every split (the permutation test)
  NormalTieCorrected,  // more than kMaxExactTotal values: normal approximation, tie-corrected, continuity-corrected
};

struct MannWhitney {
  int n_a = 0, n_b = 0;
  double u_a = 0.0;      // U of side A: pairs (a, b) with a > b, plus half the ties
  double p_value = 1.0;  // two-sided
  UMethod method = UMethod::None;
  // The smallest two-sided p any data could give with these sample sizes: 2 / C(n_a + n_b, n_a)
  // (1 when a side is empty). When it is not below alpha, no difference can be significant.
  double min_p = 1.0;
};

// Two-sided Mann-Whitney U test of A against B; non-finite values are ignored.
MannWhitney mann_whitney_u(std::span<const double> a, std::span<const double> b);

// 2 / C(n_a + n_b, n_a), capped at 1 (1 when a side is empty).
double min_two_sided_p(int n_a, int n_b);

// Smallest equal number of passes a side whose min_two_sided_p is below `alpha` (4 at 0.05).
int passes_needed_per_side(double alpha = kSignificanceAlpha);

// "exact", "exact (ties, midranks)", "normal approximation (tie-corrected)", "none".
std::string method_name(UMethod m);

}  // namespace mlbench::report
