// The clock of a loader thread that runs emulated steps (a read from the
// emulated device, a prep on a virtual CPU). Each step ends at a set time and
// the thread sleeps until then; the scheduler of a loaded machine wakes it a
// little late (a millisecond in ten on a busy 2-core CI machine). That
// lateness belongs to the host, not to the emulated work: a real decode or a
// real read would go on at the step's end. So the thread remembers how late it
// woke, and its next step arrives that much earlier. Only an oversleep is
// taken back: real time spent between steps (a wait for read-ahead, a full
// queue) still counts.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace mlbench::stallsim {

class ThreadClock {
 public:
  using Clock = std::chrono::steady_clock;

  // When this thread's next step arrives: now, less its last oversleep (once).
  static Clock::time_point arrival() {
    const auto now = Clock::now();
    const auto owed = owed_;
    owed_ = Clock::duration::zero();
    return now - owed;
  }

  // Sleeps until `end`, then notes how late it woke. With an injected
  // lateness (tests: as on a loaded machine) it wakes that much later first.
  static void sleep_until(Clock::time_point end) {
    std::this_thread::sleep_until(end + injected_late_);
    owed_ = std::max(Clock::duration::zero(), Clock::now() - end);
  }

  // Every thread's sleeps wake this much late (stallsim --worker-late-wakeup-ms).
  static void inject_late_wakeup(Clock::duration late) { injected_late_ = late; }

 private:
  static inline thread_local Clock::duration owed_{};
  static inline Clock::duration injected_late_{};
};

}  // namespace mlbench::stallsim
