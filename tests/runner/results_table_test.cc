// The end-of-run results table (docs/runner.md, "Results at the end of a run"): cells and layout from numbers, colour
// only when asked.
#include <cmath>

#include <gtest/gtest.h>

#include "runner/results_table.h"

using namespace mlbench::runner;

TEST(ResultsTable, CellsOfPassedFailedAndNotRunRows) {
  ResultRow ok{"toy_reg", 2, 2, {1000.0, 1100.0}, {10.0, 20.0}, 1000.0, {}};
  ResultCells c = result_cells(ok);
  EXPECT_EQ(c.passed, "2/2");
  EXPECT_EQ(c.items, "1050");
  EXPECT_EQ(c.spread, "±6.7%");  // sample sd 70.71 / 1050
  EXPECT_EQ(c.stall, "15.0%");
  EXPECT_EQ(c.vs_target, "+5.0%");
  EXPECT_EQ(c.note, "");

  ResultRow half{"loader [--workers 2]", 1, 2, {12.5}, {}, std::nullopt, {"D1: oom"}};
  c = result_cells(half);
  EXPECT_EQ(c.passed, "1/2");
  EXPECT_EQ(c.items, "12.50");
  EXPECT_EQ(c.spread, "-");  // one value has no spread
  EXPECT_EQ(c.stall, "-");
  EXPECT_EQ(c.vs_target, "-");  // no target on this machine kind
  EXPECT_EQ(c.note, "FAILED D1: oom");

  ResultRow failed{"vae", 0, 2, {}, {}, 7500.0, {"D0: exit 1 (loss is NaN at iteration 3)", "D1: timeout 60s"}};
  c = result_cells(failed);
  EXPECT_EQ(c.items, "-");
  EXPECT_EQ(c.vs_target, "-");  // nothing to compare
  EXPECT_EQ(c.note, "FAILED D0: exit 1 (loss is NaN at iteration 3); D1: timeout 60s");

  ResultRow not_run{"convnet", 0, 0, {}, {}, 175.0, {}};
  c = result_cells(not_run);
  EXPECT_EQ(c.passed, "-");
  EXPECT_EQ(c.note, "not run");

  ResultRow slow{"toy_reg", 1, 1, {900.0}, {0.5}, 1000.0, {}};
  EXPECT_EQ(result_cells(slow).vs_target, "-10.0%");
}

TEST(ResultsTable, RatesKeepUsefulDigits) {
  EXPECT_EQ(format_rate(4612345.6), "4612346");
  EXPECT_EQ(format_rate(175.44), "175");
  EXPECT_EQ(format_rate(2.654), "2.65");
  EXPECT_EQ(format_rate(0.01234), "0.0123");
  EXPECT_EQ(format_rate(NAN), "-");
}

TEST(ResultsTable, PlainTextLayout) {
  const std::vector<ResultRow> rows = {{"toy_reg", 2, 2, {1000.0, 1100.0}, {10.0, 20.0}, 1000.0, {}},
                                       {"vae", 0, 1, {}, {}, std::nullopt, {"D0: oom"}},
                                       {"convnet", 0, 0, {}, {}, std::nullopt, {}}};
  const std::string t = format_results_table(rows, false);
  EXPECT_EQ(t,
            "benchmark   passed     items/s   spread    stall  vs target\n"
            "-----------------------------------------------------------\n"
            "toy_reg        2/2        1050    ±6.7%    15.0%      +5.0%\n"
            "vae            0/1           -        -        -          -  FAILED D0: oom\n"
            "convnet          -           -        -        -          -  not run\n");
  EXPECT_EQ(t.find('\033'), std::string::npos);
}

TEST(ResultsTable, ColourOnlyWhenAsked) {
  const std::vector<ResultRow> rows = {{"toy_reg", 1, 1, {900.0}, {}, 1000.0, {}},
                                       {"vae", 0, 1, {}, {}, std::nullopt, {"D0: oom"}}};
  const std::string t = format_results_table(rows, true);
  EXPECT_NE(t.find("\033[32m    1/1\033[0m"), std::string::npos) << t;
  EXPECT_NE(t.find("\033[31m   -10.0%\033[0m"), std::string::npos) << t;
  EXPECT_NE(t.find("\033[31mFAILED D0: oom\033[0m"), std::string::npos) << t;
  // Same text without the codes.
  std::string plain = t;
  for (auto p = plain.find('\033'); p != std::string::npos; p = plain.find('\033')) {
    plain.erase(p, plain.find('m', p) - p + 1);
  }
  EXPECT_EQ(plain, format_results_table(rows, false));
}
