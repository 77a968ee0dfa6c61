// Mann-Whitney U, two-sided. The exact null distribution is a small dynamic
// programme written here: no Debian C++ library ships it (Boost.Math has the
// normal distribution, which std::erfc covers as well). It counts, for every
// sum s, the subsets of size n_a of the pooled (mid)ranks whose rank sum is s,
// so ties are handled exactly too (the permutation distribution given the ties,
// as scipy.stats.mannwhitneyu(method="exact") does without ties and
// scipy.stats.permutation_test does with them).
#include "report/significance.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "report/report_statistics.h"

namespace mlbench::report {
namespace {

double binomial(int n, int k) {
  if (k < 0 || k > n) return 0.0;
  k = std::min(k, n - k);
  double c = 1.0;
  for (int i = 1; i <= k; ++i) c = c * (n - k + i) / i;
  return c;
}
}  // namespace

double min_two_sided_p(int n_a, int n_b) {
  if (n_a <= 0 || n_b <= 0) return 1.0;
  return std::min(1.0, 2.0 / binomial(n_a + n_b, n_a));
}

int passes_needed_per_side(double alpha) {
  int n = 1;
  while (min_two_sided_p(n, n) >= alpha && n < 1000) ++n;
  return n;
}

std::string method_name(UMethod m) {
  switch (m) {
    case UMethod::Exact:
      return "exact";
    case UMethod::ExactTies:
      return "exact (ties, midranks)";
    case UMethod::NormalTieCorrected:
      return "normal approximation (tie-corrected)";
    case UMethod::None:
      break;
  }
  return "none";
}

MannWhitney mann_whitney_u(std::span<const double> a_in, std::span<const double> b_in) {
  const std::vector<double> a = finite_values(a_in), b = finite_values(b_in);
  MannWhitney r;
  r.n_a = static_cast<int>(a.size());
  r.n_b = static_cast<int>(b.size());
  r.min_p = min_two_sided_p(r.n_a, r.n_b);
  if (a.empty() || b.empty()) return r;
  const int n = r.n_a + r.n_b;

  // Pooled values with their side; ranks 1..n, ties get their midrank. Doubled
  // midranks are integers, so the DP below works on integer sums.
  std::vector<std::pair<double, bool>> pooled;  // value, is A
  for (double x : a) pooled.emplace_back(x, true);
  for (double x : b) pooled.emplace_back(x, false);
  std::sort(pooled.begin(), pooled.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<int> rank2(n);  // 2 x midrank
  bool ties = false;
  double tie_term = 0.0;  // sum of t^3 - t over tie groups
  for (int i = 0; i < n;) {
    int j = i;
    while (j + 1 < n && pooled[j + 1].first == pooled[i].first) ++j;
    const int t = j - i + 1;
    if (t > 1) {
      ties = true;
      tie_term += static_cast<double>(t) * t * t - t;
    }
    for (int k = i; k <= j; ++k) rank2[k] = (i + 1) + (j + 1);  // 2 x the mean of ranks i+1..j+1
    i = j + 1;
  }
  long long sum2_a = 0;
  for (int i = 0; i < n; ++i) {
    if (pooled[i].second) sum2_a += rank2[i];
  }
  r.u_a = static_cast<double>(sum2_a) / 2.0 - r.n_a * (r.n_a + 1) / 2.0;

  if (n <= kMaxExactTotal) {
    // ways[k][s]: subsets of k of the pooled items whose doubled ranks sum to s.
    const int max_sum = std::accumulate(rank2.begin(), rank2.end(), 0);
    std::vector<std::vector<double>> ways(r.n_a + 1, std::vector<double>(max_sum + 1, 0.0));
    ways[0][0] = 1.0;
    for (int i = 0; i < n; ++i) {
      const int w = rank2[i];
      for (int k = std::min(i + 1, r.n_a); k >= 1; --k) {
        for (int s = max_sum - w; s >= 0; --s) {
          if (ways[k - 1][s] != 0.0) ways[k][s + w] += ways[k - 1][s];
        }
      }
    }
    double total = 0.0, at_most = 0.0, at_least = 0.0;
    for (int s = 0; s <= max_sum; ++s) {
      const double c = ways[r.n_a][s];
      total += c;
      if (s <= sum2_a) at_most += c;
      if (s >= sum2_a) at_least += c;
    }
    r.p_value = std::min(1.0, 2.0 * std::min(at_most, at_least) / total);
    r.method = ties ? UMethod::ExactTies : UMethod::Exact;
    return r;
  }

  const double na = r.n_a, nb = r.n_b, nn = n;
  const double mean = na * nb / 2.0;
  const double var = na * nb / 12.0 * ((nn + 1.0) - tie_term / (nn * (nn - 1.0)));
  r.method = UMethod::NormalTieCorrected;
  if (var <= 0.0) {
    r.p_value = 1.0;  // every value tied: no evidence of any difference
    return r;
  }
  const double z = std::max(0.0, std::abs(r.u_a - mean) - 0.5) / std::sqrt(var);
  r.p_value = std::min(1.0, std::erfc(z / std::sqrt(2.0)));
  return r;
}

}  // namespace mlbench::report
