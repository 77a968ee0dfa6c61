// mlbench-stall's warnings (docs/reliability.md, defect 22): runs whose pipeline skipped
// corrupt samples are named in `warnings`, not folded in silently.
#include <gtest/gtest.h>

#include "stall/analyzer.h"

namespace mlbench::stall {
namespace {

RunOutcome outcome(double rate, std::uint64_t corrupt = 0) {
  RunOutcome r;
  r.rate = rate;
  r.cv = 0.01;
  r.report = {{"stall", {{"stall_pct", 10.0}}}, {"pipeline", {{"corrupt_samples", corrupt}}}};
  return r;
}

std::map<std::string, RunOutcome> runs(std::uint64_t corrupt_cached, std::uint64_t corrupt_cold) {
  return {{"synthetic", outcome(400)},
          {"cached", outcome(200, corrupt_cached)},
          {"cold", outcome(100, corrupt_cold)},
          {"fetch-cold", outcome(100)},
          {"fetch-cached", outcome(1000)}};
}

AnalysisContext context() {
  AnalysisContext ctx;
  ctx.config.bench = "sim";
  ctx.items = 100;
  ctx.batch_size = 10;
  ctx.cores_now = 2;
  return ctx;
}

TEST(StallMessages, SkippedCorruptSamplesAreCountedInTheWarnings) {
  const nlohmann::json r = analyze(context(), runs(3, 4), RawRates{});
  ASSERT_EQ(r["warnings"].size(), 1u) << r["warnings"].dump();
  const std::string w = r["warnings"][0].get<std::string>();
  EXPECT_NE(w.find("7 corrupt sample(s) were skipped (cached 3, cold 4)"), std::string::npos) << w;
  EXPECT_NE(w.find("the split and the what-if include these runs"), std::string::npos) << w;
  EXPECT_NE(console_summary(r).find("warning: 7 corrupt sample(s)"), std::string::npos);
}

TEST(StallMessages, CleanRunsHaveNoSkippedSampleWarning) {
  const nlohmann::json r = analyze(context(), runs(0, 0), RawRates{});
  for (const auto& w : r["warnings"]) EXPECT_EQ(w.get<std::string>().find("corrupt"), std::string::npos) << w;
}

}  // namespace
}  // namespace mlbench::stall
