// Unit tests of the --compare significance test (report/significance.h) on known
// inputs with hand-computed p-values, and of the compare rows' verdicts.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "report/report_statistics.h"
#include "report/significance.h"

namespace mlbench::report {
namespace {

using Values = std::vector<double>;

TEST(ReportSignificance, FourAgainstFourFullySeparatedIsTheSmallestP) {
  // U = 0; only 1 of the C(8,4) = 70 splits is as extreme on each side: p = 2/70.
  const MannWhitney t = mann_whitney_u(Values{1, 2, 3, 4}, Values{5, 6, 7, 8});
  EXPECT_EQ(t.method, UMethod::Exact);
  EXPECT_DOUBLE_EQ(t.u_a, 0.0);
  EXPECT_NEAR(t.p_value, 2.0 / 70.0, 1e-12);
  EXPECT_NEAR(t.p_value, 0.0286, 5e-5);
  EXPECT_NEAR(t.min_p, 2.0 / 70.0, 1e-12);
  // The other way round: U = 16, same p.
  const MannWhitney back = mann_whitney_u(Values{5, 6, 7, 8}, Values{1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(back.u_a, 16.0);
  EXPECT_NEAR(back.p_value, 2.0 / 70.0, 1e-12);
}

TEST(ReportSignificance, InterleavedAndIdenticalSetsAreNotSignificant) {
  // 1,3,5,7 vs 2,4,6,8: U = 6, P(U <= 6) = 24/70 -> p = 48/70.
  const MannWhitney t = mann_whitney_u(Values{1, 3, 5, 7}, Values{2, 4, 6, 8});
  EXPECT_DOUBLE_EQ(t.u_a, 6.0);
  EXPECT_NEAR(t.p_value, 48.0 / 70.0, 1e-12);
  // Identical sets: U = n_a n_b / 2 = 8, the middle of the distribution: p = 1.
  const MannWhitney same = mann_whitney_u(Values{1, 2, 3, 4}, Values{1, 2, 3, 4});
  EXPECT_EQ(same.method, UMethod::ExactTies);
  EXPECT_DOUBLE_EQ(same.u_a, 8.0);
  EXPECT_DOUBLE_EQ(same.p_value, 1.0);
  EXPECT_DOUBLE_EQ(mann_whitney_u(Values{10, 10, 10, 10}, Values{10, 10, 10, 10}).p_value, 1.0);
}

TEST(ReportSignificance, ThreeAgainstThreeCannotReachAlpha) {
  // C(6,3) = 20: the smallest two-sided p is 2/20 = 0.1 > 0.05 whatever the data.
  const MannWhitney t = mann_whitney_u(Values{1, 2, 3}, Values{4, 5, 6});
  EXPECT_NEAR(t.p_value, 0.1, 1e-12);
  EXPECT_NEAR(t.min_p, 0.1, 1e-12);
  EXPECT_NEAR(min_two_sided_p(3, 5), 2.0 / 56.0, 1e-12);  // 3 vs 5 can reach it
  EXPECT_DOUBLE_EQ(min_two_sided_p(0, 5), 1.0);
  EXPECT_EQ(passes_needed_per_side(0.05), 4);
  EXPECT_NEAR(mann_whitney_u(Values{1, 2, 3, 4, 5}, Values{6, 7, 8, 9, 10}).p_value, 2.0 / 252.0, 1e-12);
}

TEST(ReportSignificance, TiesUseMidranksExactly) {
  // Midranks of 1 2 2 3 3 4 5 5: 1, 2.5, 2.5, 4.5, 4.5, 6, 7.5, 7.5. A = {1,2,2,3} sums to
  // 10.5 (U = 0.5: the tie 3 = 3 counts a half). Two splits reach 10.5 (either 3), none is
  // lower: P(sum <= 10.5) = 2/70 -> p = 4/70 = 0.0571, not significant where 1,2,3,4 vs
  // 5,6,7,8 (no tie) is.
  const MannWhitney t = mann_whitney_u(Values{1, 2, 2, 3}, Values{3, 4, 5, 5});
  EXPECT_EQ(t.method, UMethod::ExactTies);
  EXPECT_DOUBLE_EQ(t.u_a, 0.5);
  EXPECT_NEAR(t.p_value, 4.0 / 70.0, 1e-12);
}

TEST(ReportSignificance, LargeSamplesUseTheTieCorrectedNormalApproximation) {
  // 31 vs 31 (62 > kMaxExactTotal), no ties: U = 0, mean 480.5, var = 31*31*63/12 = 5045.25,
  // z = (480.5 - 0.5) / sqrt(5045.25) = 6.7577, p = erfc(z / sqrt 2) = 1.4018e-11.
  Values a, b;
  for (int i = 1; i <= 31; ++i) a.push_back(i), b.push_back(31 + i);
  const MannWhitney t = mann_whitney_u(a, b);
  EXPECT_EQ(t.method, UMethod::NormalTieCorrected);
  EXPECT_NEAR(t.p_value, 1.4018463e-11, 1e-16);
  // 20 ones + 11 twos vs 11 ones + 20 twos: two tie groups of 31, sum(t^3 - t) = 59520,
  // var = 961/12 * (63 - 59520 / (62*61)) = 3784.922; U = 20*16 + 11*47 - 496 = 341,
  // z = (480.5 - 341 - 0.5) / sqrt(var) = 2.25936, p = 0.023861.
  Values c(20, 1.0), d(11, 1.0);
  c.insert(c.end(), 11, 2.0);
  d.insert(d.end(), 20, 2.0);
  const MannWhitney ties = mann_whitney_u(c, d);
  EXPECT_DOUBLE_EQ(ties.u_a, 341.0);
  EXPECT_NEAR(ties.p_value, 0.0238607126, 1e-9);
}

// The DP against a plain enumeration of every split of the pooled values (the
// definition of the exact test), on seeded small samples with many ties.
double enumerated_p(const Values& a, const Values& b) {
  Values pooled = a;
  pooled.insert(pooled.end(), b.begin(), b.end());
  const int n = static_cast<int>(pooled.size()), k = static_cast<int>(a.size());
  auto rank_sum = [&](unsigned mask) {
    double sum = 0.0;
    for (int i = 0; i < n; ++i) {
      if (!(mask & (1u << i))) continue;
      double below = 0, equal = 0;
      for (double y : pooled) below += y < pooled[i], equal += y == pooled[i];
      sum += below + (equal + 1.0) / 2.0;  // midrank
    }
    return sum;
  };
  const double observed = rank_sum((1u << k) - 1);
  double lo = 0, hi = 0, total = 0;
  for (unsigned mask = 0; mask < (1u << n); ++mask) {
    if (__builtin_popcount(mask) != k) continue;
    const double s = rank_sum(mask);
    total += 1;
    lo += s <= observed + 1e-9;
    hi += s >= observed - 1e-9;
  }
  return std::min(1.0, 2.0 * std::min(lo, hi) / total);
}

TEST(ReportSignificance, ExactPEqualsTheEnumerationOfEverySplit) {
  std::mt19937 rng(15);
  std::uniform_int_distribution<int> value(1, 5), size(1, 6);
  for (int trial = 0; trial < 200; ++trial) {
    Values a(size(rng)), b(size(rng));
    for (double& x : a) x = value(rng);
    for (double& x : b) x = value(rng);
    const MannWhitney t = mann_whitney_u(a, b);
    ASSERT_NEAR(t.p_value, enumerated_p(a, b), 1e-12) << "trial " << trial;
  }
}

TEST(ReportSignificance, NonFiniteValuesAreIgnoredAndAnEmptySideIsNoTest) {
  const MannWhitney t = mann_whitney_u(Values{1, NAN, 2, 3, 4}, Values{5, 6, INFINITY, 7, 8});
  EXPECT_EQ(t.n_a, 4);
  EXPECT_EQ(t.n_b, 4);
  EXPECT_NEAR(t.p_value, 2.0 / 70.0, 1e-12);
  EXPECT_EQ(mann_whitney_u(Values{}, Values{1, 2}).method, UMethod::None);
}

TEST(ReportSignificance, CompareVerdictOnlyCallsSignificantChangesFasterOrSlower) {
  CompareRow faster;
  test_significance(faster, Values{5, 6, 7, 8}, Values{1, 2, 3, 4});
  EXPECT_TRUE(faster.significant);
  EXPECT_EQ(faster.verdict, "faster");
  EXPECT_NEAR(faster.p_value, 2.0 / 70.0, 1e-12);
  EXPECT_EQ(faster.method, "exact");
  EXPECT_EQ(faster.note, "");
  CompareRow slower;
  test_significance(slower, Values{1, 2, 3, 4}, Values{5, 6, 7, 8});
  EXPECT_EQ(slower.verdict, "slower");
  // 3 passes a side: a 2x change is still no significant difference, and it says why.
  CompareRow few;
  test_significance(few, Values{1, 2, 3}, Values{4, 5, 6});
  EXPECT_FALSE(few.significant);
  EXPECT_EQ(few.verdict, "no significant difference");
  EXPECT_EQ(few.note, "needs >= 4 passes a side: with 3 vs 3 no p is below 0.1");
  CompareRow noise;
  test_significance(noise, Values{1, 3, 5, 7}, Values{2, 4, 6, 8});
  EXPECT_FALSE(noise.significant);
  EXPECT_EQ(noise.verdict, "no significant difference");
  EXPECT_EQ(noise.note, "");
}

TEST(ReportSignificance, CompareResultsTestsTheBenchesRunValues) {
  BenchResult a, b;
  a.name = b.name = "x";
  for (double v : {110.0, 111.0, 112.0, 113.0}) a.runs.push_back({"R", v, 1, 0});
  for (double v : {100.0, 101.0, 102.0, 103.0}) b.runs.push_back({"R", v, 1, 0});
  a.result = 111.5;
  b.result = 101.5;
  const std::vector<CompareRow> rows = compare_results({a}, {b});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].a_n, 4);
  EXPECT_EQ(rows[0].b_n, 4);
  EXPECT_TRUE(rows[0].significant);
  EXPECT_EQ(rows[0].verdict, "faster");
  EXPECT_DOUBLE_EQ(rows[0].u, 16.0);
}

}  // namespace
}  // namespace mlbench::report
