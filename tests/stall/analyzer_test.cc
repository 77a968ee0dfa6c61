#include "stall/analyzer.h"

#include <gtest/gtest.h>

#include "stall/charts.h"

namespace mlbench::stall {
namespace {

RunOutcome outcome(double rate, double stall_pct = 0) {
  RunOutcome r;
  r.rate = rate;
  r.cv = 0.01;
  r.report = {{"stall", {{"stall_pct", stall_pct}}}, {"pipeline", {{"source", "test"}}}};
  return r;
}

AnalysisContext context() {
  AnalysisContext ctx;
  ctx.config.bench = "sim";
  ctx.config.data = "/d";
  ctx.items = 100;
  ctx.batch_size = 10;
  ctx.cores_now = 2;
  return ctx;
}

TEST(Analyzer, FetchBoundCase) {
  // G 400/s, P 200/s, cold 100/s; storage 100/s, memory 1000/s.
  std::map<std::string, RunOutcome> runs{{"synthetic", outcome(400)},      {"cached", outcome(200, 50)},
                                         {"cold", outcome(100, 74)},       {"fetch-cold", outcome(100)},
                                         {"fetch-cached", outcome(1000)},  {"cpus-1", outcome(100)},
                                         {"cpus-2", outcome(200)},         {"cache-0.50", outcome(180)}};
  const auto r = analyze(context(), runs, RawRates{});
  EXPECT_DOUBLE_EQ(r["split"]["compute_pct"].get<double>(), 25.0);
  EXPECT_DOUBLE_EQ(r["split"]["prep_pct"].get<double>(), 25.0);
  EXPECT_DOUBLE_EQ(r["split"]["fetch_pct"].get<double>(), 50.0);
  EXPECT_EQ(r["rates"]["S"], 100.0);
  EXPECT_EQ(r["rates"]["C"], 1000.0);
  // Smallest x with F(x) >= min(P, G) = 200: x = (1/100 - 1/200) / (1/100 - 1/1000) = 5/9.
  EXPECT_NEAR(r["recommendation"]["cache_fraction"].get<double>(), 5.0 / 9.0, 1e-9);
  EXPECT_EQ(r["recommendation"]["cores"], 2);
  EXPECT_EQ(r["recommendation"]["bound"], "fetch-bound");
  // The measured point against min(F(0.5), P, G) = 181.8.
  ASSERT_EQ(r["whatif"]["measured"].size(), 1u);
  EXPECT_NEAR(r["whatif"]["measured"][0]["predicted"].get<double>(), 181.818, 1e-3);
  EXPECT_NEAR(r["whatif"]["measured"][0]["error_pct"].get<double>(), 100 * (181.818181818 - 180) / 180, 1e-6);
  EXPECT_NEAR(r["direct"]["disagreement_pp"].get<double>(), 1.0, 1e-9);  // 74 direct vs 75 differential
  EXPECT_EQ(r["prep_by_cores"]["2"], 200.0);
  EXPECT_EQ(r["whatif"]["curve"].size(), 21u);
  const std::string text = console_summary(r);
  EXPECT_NE(text.find("fetch-bound"), std::string::npos);
  EXPECT_NE(text.find("recommended cache: 56% of the dataset"), std::string::npos) << text;
}

TEST(Analyzer, MissingRunIsNamed) {
  std::map<std::string, RunOutcome> runs{{"synthetic", outcome(400)}};
  try {
    analyze(context(), runs, RawRates{});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'cached'"), std::string::npos);
  }
}

TEST(Charts, SplitBarHasThreeSegmentsSizedByShare) {
  const std::string svg = split_svg("a<b", Split{50, 25, 25});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("a&lt;b"), std::string::npos);
  EXPECT_NE(svg.find(R"(data-part="compute" x="10.0" y="26" width="250.0")"), std::string::npos) << svg;
  EXPECT_NE(svg.find(R"(data-part="fetch stall" x="385.0" y="26" width="125.0")"), std::string::npos);
}

TEST(Charts, WhatIfHasCurvesAndMeasuredPoints) {
  const auto curve = whatif_curve({0, 0.5, 1}, 200, 400, 1000, 100);
  const std::string svg = whatif_svg("sim", curve, 200, 400, {{0.5, 180}, {1.0, 199}});
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 10, true);
  size_t circles = 0;
  for (size_t pos = svg.find(R"(class="measured")"); pos != std::string::npos;
       pos = svg.find(R"(class="measured")", pos + 1)) {
    ++circles;
  }
  EXPECT_EQ(circles, 2u);
  EXPECT_NE(svg.find(R"(data-name="predicted")"), std::string::npos);
  EXPECT_NE(svg.find("data-name=\"F(x)\""), std::string::npos) << svg;
  EXPECT_NE(svg.find(">fetch F(x)</text>"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("F(x)svg"), std::string::npos) << "the what-if curve is labelled F(x)";
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace mlbench::stall
