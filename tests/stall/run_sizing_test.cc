// Runs sized by their noise (stall/run_sizing.h, stall/sized_run.h): a fake executor whose runs'
// observations are drawn from a seeded distribution and whose wall time is a fake clock (start-up
// plus a fixed time per observation), so that noise and time are injected and nothing depends on
// the machine's speed.
#include "stall/run_sizing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "stall/sized_run.h"

namespace mlbench::stall {
namespace {

constexpr double kStartupS = 1.0;      // the fake clock: a run's start-up and warm-up
constexpr double kObservationS = 0.2;  // and each timed observation

// A benchmark whose observations' rates are truth x (1 + cv x z), z standard normal from a seeded
// generator (each run its own draw), and whose wall time is the fake clock's.
class NoisyExecutor : public Executor {
 public:
  NoisyExecutor(double truth, double cv, unsigned seed) : truth_(truth), cv_(cv), rng_(seed) {}
  RunOutcome run(const RunSpec& spec) override {
    specs.push_back(spec);
    int timed = 10;
    for (std::size_t i = 0; i + 1 < spec.args.size(); ++i) {
      if (spec.args[i] == "--repeat") timed = std::stoi(spec.args[i + 1]);
    }
    for (std::size_t i = 0; i + 1 < spec.args.size(); ++i) {
      if (spec.args[i] == "--warmup") timed -= std::stoi(spec.args[i + 1]);
    }
    std::normal_distribution<double> z(0, 1);
    double sum = 0, sum2 = 0;
    for (int i = 0; i < timed; ++i) {
      const double r = drift_ * truth_ * (1 + cv_ * z(rng_));
      sum += r;
      sum2 += r * r;
    }
    RunOutcome o;
    o.spec = spec;
    o.rate = sum / timed;
    o.cv = std::sqrt(std::max(0.0, sum2 / timed - o.rate * o.rate)) / o.rate;
    o.observations = timed;
    o.wall_s = kStartupS + kObservationS * timed;
    o.report = {{"train", {{"avg", kObservationS}, {"count", timed}, {"unit", "s"}}}};
    clock_s += o.wall_s;
    return o;
  }
  void drift(double factor) { drift_ = factor; }
  std::vector<RunSpec> specs;
  double clock_s = 0;  // the fake clock: every run's wall time, summed

 private:
  double truth_, cv_;
  double drift_ = 1;
  std::mt19937 rng_;
};

RunSpec spec(const std::string& label = "cold") {
  RunSpec s;
  s.label = label;
  s.kind = label;
  s.args = {"--data", "d", "--repeat", "12", "--number", "10", "--warmup", "2"};  // 10 timed observations
  return s;
}

SizingRule rule(double target, double max_run_s = 0) {
  SizingRule r;
  r.target = target;
  r.max_run_s = max_run_s;
  return r;
}

TEST(RunSizing, TheIntervalIsStudentsTOverTheObservations) {
  EXPECT_NEAR(t_quantile_975(9), 2.262, 1e-3);
  EXPECT_NEAR(t_quantile_975(1000), 1.96, 1e-3);
  EXPECT_NEAR(*relative_half_width(0.1, 10), 2.262 * 0.1 / std::sqrt(10.0), 1e-6);
  EXPECT_FALSE(relative_half_width(0.1, 1));
  // Pooling: two parts at the same rate keep it; parts apart add their spread to the noise.
  const RunPart same = pool({{100, 0.1, 10, 3}, {100, 0.1, 30, 7}});
  EXPECT_DOUBLE_EQ(same.rate, 100);
  EXPECT_NEAR(same.cv, 0.1, 1e-9);
  EXPECT_EQ(same.observations, 40);
  EXPECT_DOUBLE_EQ(same.wall_s, 10);
  const RunPart apart = pool({{90, 0.1, 10, 3}, {110, 0.1, 10, 3}});
  EXPECT_DOUBLE_EQ(apart.rate, 100);
  EXPECT_GT(apart.cv, 0.13);
}

TEST(RunSizing, ConvergesAtLowNoiseWithoutExtending) {
  NoisyExecutor ex(1000, 0.02, 1);
  const SizedOutcome s = measure_sized(ex, spec(), rule(0.02), nullptr);
  EXPECT_EQ(s.sizing.parts, 1);
  EXPECT_EQ(ex.specs.size(), 1u);
  EXPECT_TRUE(s.sizing.within);
  EXPECT_FALSE(s.sizing.limit_hit);
  EXPECT_LE(*s.sizing.half_width, 0.02);
  EXPECT_EQ(sizing_line("cold", s.sizing), "");
}

TEST(RunSizing, ExtendsAtHighNoiseUntilTheIntervalIsWithinTheTarget) {
  NoisyExecutor ex(1000, 0.08, 2);  // one observation +-8%: ten give about +-5.7%
  std::vector<std::string> labels;
  const SizedOutcome s = measure_sized(ex, spec(), rule(0.02, 1000),
                                       [&](const RunSpec& p, const RunOutcome&) { labels.push_back(p.label); });
  ASSERT_GE(s.sizing.parts, 2);
  EXPECT_TRUE(s.sizing.within);
  EXPECT_LE(*s.sizing.half_width, 0.02);
  EXPECT_EQ(labels.front(), "cold");
  EXPECT_EQ(labels.at(1), "cold-ext2");
  // The extension measures about (5.7 / 2)^2 x the first's observations in all: --repeat scaled,
  // --warmup kept.
  const auto& ext = ex.specs.at(1).args;
  EXPECT_GT(std::stoi(ext[3]), 40) << ext[3];
  EXPECT_EQ(ext[7], "2");
  EXPECT_NEAR(s.outcome.rate, 1000, 1000 * 0.03);
  EXPECT_DOUBLE_EQ(s.outcome.wall_s, ex.clock_s);
  EXPECT_NE(sizing_line("cold", s.sizing).find("after"), std::string::npos);
}

TEST(RunSizing, GivesUpAtTheTimeLimitAndStatesTheNoiseItReached) {
  NoisyExecutor ex(1000, 0.3, 3);
  const double limit = 3 * (kStartupS + 10 * kObservationS);
  const SizedOutcome s = measure_sized(ex, spec(), rule(0.02, limit), nullptr);
  EXPECT_FALSE(s.sizing.within);
  EXPECT_TRUE(s.sizing.limit_hit);
  EXPECT_LE(ex.clock_s, limit + 1e-9);
  ASSERT_TRUE(s.sizing.half_width);
  EXPECT_GT(*s.sizing.half_width, 0.02);
  // The range stated is the one reached: the pooled outcome's noise, which the analysis reads.
  EXPECT_NEAR(*relative_half_width(s.outcome.cv, s.outcome.observations), *s.sizing.half_width, 1e-12);
  EXPECT_EQ(s.sizing.stopped_by, "time limit");
  EXPECT_NE(sizing_line("cold", s.sizing).find("not within ±2.0% in its time limit of 9.0 s"), std::string::npos)
      << sizing_line("cold", s.sizing);
  const auto j = sizing_json(rule(0.02, limit), {}, {{"cold", {s.sizing}}}, {});
  ASSERT_TRUE(j["not_within"].contains("cold")) << j.dump();
  EXPECT_NEAR(j["not_within"]["cold"].get<double>(), 100 * *s.sizing.half_width, 1e-9);
  EXPECT_NE(sizing_summary(j).find("not within it in their time: cold"), std::string::npos) << sizing_summary(j);
}

// The auto limit: the runs of one analysis share (kAutoLimit - 1) x their first parts' time; quiet
// runs leave theirs to a noisy one, and the whole takes at most kAutoLimit x the fixed runs' time.
TEST(RunSizing, TheAutoLimitKeepsTheAnalysisWithinOneAndAHalfTimesItsFixedRuns) {
  SizingBudget budget;
  double fixed_s = 0, clock_s = 0;
  int extended = 0;
  for (int i = 0; i < 6; ++i) {
    const bool noisy = i >= 4;
    NoisyExecutor ex(1000, noisy ? 0.15 : 0.01, 20 + i);
    const SizedOutcome s = measure_sized(ex, spec(), rule(0.02), nullptr, &budget);
    fixed_s += kStartupS + 10 * kObservationS;
    clock_s += ex.clock_s;
    extended += s.sizing.parts > 1 ? 1 : 0;
    if (noisy) {
      EXPECT_FALSE(s.sizing.within);  // +-15% an observation: not +-2% in that time
      EXPECT_TRUE(s.sizing.limit_hit);
    } else {
      EXPECT_EQ(s.sizing.parts, 1);
    }
  }
  EXPECT_GE(extended, 1);
  EXPECT_LE(clock_s, kAutoLimit * fixed_s + 1e-9);
  EXPECT_GE(budget.left_s, -1e-9);
  // A single run on its own share: its start-up (1 s of its 3) leaves no extension worth making.
  NoisyExecutor alone(1000, 0.15, 4);
  const SizedOutcome s = measure_sized(alone, spec(), rule(0.02), nullptr);
  EXPECT_EQ(s.sizing.parts, 1);
  EXPECT_TRUE(s.sizing.limit_hit);
  EXPECT_LE(alone.clock_s, kAutoLimit * (kStartupS + 10 * kObservationS));
}

TEST(RunSizing, FixedSizingRunsOnceWhateverTheNoise) {
  NoisyExecutor ex(1000, 0.3, 5);
  const SizedOutcome s = measure_sized(ex, spec(), rule(0), nullptr);
  EXPECT_EQ(s.sizing.parts, 1);
  EXPECT_TRUE(s.sizing.within);
  EXPECT_FALSE(s.sizing.limit_hit);
}

TEST(RunSizing, AnExecRunIsLengthenedThroughTheProbesIterations) {
  RunSpec s;
  s.label = "cached";
  s.env = {{"MLBENCH_PROBE_ITERATIONS", "100"}, {"MLBENCH_PROBE_NUMBER", "10"}, {"MLBENCH_PROBE_WARMUP", "2"}};
  EXPECT_EQ(lengthened(s, 2.5).env["MLBENCH_PROBE_ITERATIONS"], "250");
  EXPECT_EQ(lengthened(s, 0.3).env["MLBENCH_PROBE_ITERATIONS"], "30");
}

// A grid of three points (as the cache fractions' runs): the noisy one's single short run is off
// by more than the 5% a held-out point may miss by; sized, it is within it and within its own
// stated range.
TEST(RunSizing, TheGridWithAPointWhereAShortRunWouldMislead) {
  struct Point {
    double truth, cv;
  };
  const std::vector<Point> grid{{1200, 0.02}, {900, 0.05}, {600, 0.15}};
  constexpr unsigned kSeed = 11;
  bool misled = false;
  for (const Point& p : grid) {
    NoisyExecutor shortrun(p.truth, p.cv, kSeed);
    const double short_err = std::abs(shortrun.run(spec()).rate / p.truth - 1);
    NoisyExecutor ex(p.truth, p.cv, kSeed);  // the same first part, then extensions
    const SizedOutcome s = measure_sized(ex, spec(), rule(0.02, 600), nullptr);
    const double err = std::abs(s.outcome.rate / p.truth - 1);
    EXPECT_LT(err, 0.05) << p.truth;
    ASSERT_TRUE(s.sizing.half_width);
    EXPECT_LE(err, *s.sizing.half_width) << p.truth;
    EXPECT_TRUE(s.sizing.within) << p.truth;
    if (short_err > 0.05) {
      misled = true;
      EXPECT_GT(s.sizing.parts, 1);
    }
  }
  EXPECT_TRUE(misled) << "the grid's noisy point must be one a short run gets wrong (seed " << kSeed << ")";
}

TEST(RunSizing, DriftLargerThanTheEffectAddsRounds) {
  // G 1000, P 800, cold 700: prep 17.5% of the cold epoch, fetch 12.5%: the effect is 12.5%.
  const double effect = *split_effect(1000, 800, 700, 0.02);
  EXPECT_NEAR(effect, 0.125, 1e-9);
  EXPECT_FALSE(check_drift({{"synthetic", {1000, 1010}}, {"cached", {800, 820}}}, effect).add_round);
  const DriftCheck d = check_drift({{"synthetic", {1000, 1010}}, {"cached", {800, 920}}}, effect);
  EXPECT_TRUE(d.add_round);
  EXPECT_EQ(d.label, "cached");
  EXPECT_NEAR(d.spread, 0.15, 1e-9);
  // A split with no fetch stall: drift is judged against twice the target.
  EXPECT_NEAR(*split_effect(1000, 800, 800, 0.02), 0.04, 1e-9);
}

// The session's round loop, with a host that slows 10% a round for its first rounds: rounds are
// added while the drift exceeds the effect, up to --max-rounds; --rounds is the floor.
TEST(RunSizing, DriftTriggersExtraRoundsAndTheRoundsFloorIsRespected) {
  const auto rounds_made = [](int floor, int most, std::vector<double> slowdown) {
    NoisyExecutor ex(1000, 0.01, 7);
    std::map<std::string, std::vector<double>> rates;
    int made = 0;
    DriftCheck drift;
    while (another_round(made, floor, most, drift)) {
      ex.drift(made < static_cast<int>(slowdown.size()) ? slowdown[static_cast<std::size_t>(made)] : slowdown.back());
      rates["cached"].push_back(measure_sized(ex, spec("cached"), rule(0.02), nullptr).outcome.rate);
      ++made;
      drift = check_drift(rates, 0.04);
    }
    return made;
  };
  EXPECT_EQ(rounds_made(1, 1, {1.0}), 1);            // one round: no drift to see
  EXPECT_EQ(rounds_made(3, 5, {1.0}), 3);            // a steady host: the floor
  EXPECT_EQ(rounds_made(2, 4, {1.0, 0.9, 0.8}), 4);  // drifting: up to the most
  EXPECT_EQ(rounds_made(4, 4, {1.0, 0.9}), 4);
  EXPECT_EQ(rounds_made(2, 2, {1.0, 0.9}), 2);  // --max-rounds equal to --rounds: none added
}

}  // namespace
}  // namespace mlbench::stall
