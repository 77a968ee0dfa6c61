// core::StopSignals: the stop signals are recorded (not fatal) while it lives, the
// previous handlers come back after, and the restart choice reaches sigaction.
#include "core/stop_signals.h"

#include <signal.h>

#include <csignal>

#include <gtest/gtest.h>

namespace mlbench::core {
namespace {

volatile std::sig_atomic_t g_previous_handler_saw = 0;
extern "C" void previous_handler(int sig) { g_previous_handler_saw = sig; }

// Installs previous_handler for the stop signals for the test's duration.
class StopSignalsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_previous_handler_saw = 0;
    struct sigaction sa {};
    sa.sa_handler = previous_handler;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &saved_[i]);
  }
  void TearDown() override {
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &saved_[i], nullptr);
  }
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction saved_[3] {};
};

TEST_F(StopSignalsTest, EachStopSignalIsRecordedAndThePreviousHandlerComesBack) {
  for (int sig : kSignals) {
    {
      const StopSignals stop(StopSignals::Calls::kRestart);
      EXPECT_EQ(stop_signal(), 0);
      ASSERT_EQ(raise(sig), 0);
      EXPECT_EQ(stop_signal(), sig);
      EXPECT_EQ(g_previous_handler_saw, 0) << "the previous handler ran while StopSignals lived";
    }
    ASSERT_EQ(raise(sig), 0);
    EXPECT_EQ(g_previous_handler_saw, sig) << "the previous handler of signal " << sig << " was not restored";
    g_previous_handler_saw = 0;
  }
}

TEST_F(StopSignalsTest, ANewOneStartsWithNoSignal) {
  {
    const StopSignals first(StopSignals::Calls::kInterrupt);
    ASSERT_EQ(raise(SIGTERM), 0);
    EXPECT_EQ(stop_signal(), SIGTERM);
  }
  const StopSignals second(StopSignals::Calls::kInterrupt);
  EXPECT_EQ(stop_signal(), 0);
}

TEST_F(StopSignalsTest, RestartChoiceReachesTheHandler) {
  struct sigaction now {};
  {
    const StopSignals stop(StopSignals::Calls::kRestart);
    sigaction(SIGINT, nullptr, &now);
    EXPECT_NE(now.sa_flags & SA_RESTART, 0);
  }
  {
    const StopSignals stop(StopSignals::Calls::kInterrupt);
    sigaction(SIGINT, nullptr, &now);
    EXPECT_EQ(now.sa_flags & SA_RESTART, 0);
  }
}

TEST(Interrupted, NamesTheSignalAndKeepsIt) {
  EXPECT_STREQ(Interrupted(SIGINT).what(), "interrupted");
  EXPECT_STREQ(Interrupted(SIGTERM).what(), "terminated by signal 15");
  EXPECT_EQ(Interrupted(SIGHUP).signal(), SIGHUP);
}

}  // namespace
}  // namespace mlbench::core
