#include "core/progress.h"

#include <cmath>
#include <sstream>

#include <gtest/gtest.h>

namespace mlbench::core {
namespace {

TEST(Progress, MilaLayout) {
  EXPECT_EQ(format_progress_line(3, 15, 80.4, 6.15237), "[  3/ 15] | ETA:   1.34 min | Batch Loss   6.1524");
  EXPECT_EQ(format_progress_line(0, 5, std::nan(""), std::nullopt), "[  0/  5] | ETA:      ? min");
}

TEST(Progress, Eta) {
  EXPECT_DOUBLE_EQ(eta_seconds(1, 4, 10.0), 30.0);
  EXPECT_DOUBLE_EQ(eta_seconds(4, 4, 10.0), 0.0);
  EXPECT_TRUE(std::isnan(eta_seconds(0, 4, 1.0)));
}

TEST(Progress, Durations) {
  EXPECT_EQ(format_duration(12.34), "12.3 s");
  EXPECT_EQ(format_duration(90), "1.50 min");
  EXPECT_EQ(format_duration(5400), "1.50 h");
}

TEST(ProgressPrinter, NotATerminalPrintsOnlyLineBreakUpdates) {
  std::ostringstream out;
  ProgressPrinter p(out, false, 3);
  p.update(0);
  p.update(1, 2.0, true);
  p.update(1);
  p.update(2, 1.0, true);
  p.finish();
  const std::string s = out.str();
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 2);
  EXPECT_EQ(s.find('\r'), std::string::npos);
  EXPECT_NE(s.find("[  2/  3]"), std::string::npos);
}

TEST(ProgressPrinter, TerminalRewritesOneLine) {
  std::ostringstream out;
  ProgressPrinter p(out, true, 3, "gen");
  p.update(1);
  p.finish();
  EXPECT_NE(out.str().find('\r'), std::string::npos);
  EXPECT_NE(out.str().find("gen [  1/  3]"), std::string::npos);
}

TEST(ProgressPrinter, ShowIsTerminalOnlyAndPrintReplacesTheLiveLine) {
  std::ostringstream log;
  ProgressPrinter quiet(log, false, 0);
  quiet.show("live");
  quiet.print("kept");
  EXPECT_EQ(log.str(), "kept\n");

  std::ostringstream tty;
  ProgressPrinter p(tty, true, 0, {}, std::chrono::hours(1));
  p.show("first");
  p.show("throttled");  // within min_interval of the first
  p.print("kept");
  p.finish();
  EXPECT_EQ(tty.str(), "\r\033[2Kfirst\r\033[2Kkept\n");
}

}  // namespace
}  // namespace mlbench::core
