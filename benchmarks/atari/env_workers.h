// The atari benchmark's environments, each in its own worker process (as the
// Mila suite's SubprocVecEnv): the observations live in one anonymous
// MAP_SHARED mapping made before the fork, so a step moves no pixels through
// a pipe; actions and "stepped" replies travel over one AF_UNIX seqpacket
// socket per worker. A worker that dies (killed, crashed) or stops answering
// ends the wait with a WorkerFailed naming it and how it ended, never a hang.
// No LibTorch: a forked child runs only this code.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "benchmarks/atari/wrappers.h"

namespace mlbench::atari {

class WorkerFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct EnvConfig {
  PongParams game;
  WrapperParams wrap;
  std::uint64_t seed = 0;       // environment i plays with seed + i
  double reply_timeout_s = 60;  // a worker silent for longer has failed
};

// A finished episode: the game's score difference and its length in agent steps.
struct Episode {
  int env = 0;
  int score = 0;
  long steps = 0;
};

class EnvWorkers {
 public:
  // Forks `count` workers; returns once every one has its first observation.
  EnvWorkers(int count, EnvConfig config);
  ~EnvWorkers();
  EnvWorkers(const EnvWorkers&) = delete;
  EnvWorkers& operator=(const EnvWorkers&) = delete;

  int count() const { return static_cast<int>(pids_.size()); }
  int observation_bytes() const { return obs_bytes_; }
  // count x observation_bytes, environment by environment (the shared mapping).
  std::span<const std::uint8_t> observations() const;

  // Sends every environment its action (count of them).
  void step_async(std::span<const int> actions);
  // Waits until every environment has stepped. A finished episode restarts
  // at once (the observation is the new game's first), as gym's vector envs.
  void step_wait();

  // Of the last step, per environment.
  std::span<const float> rewards() const { return rewards_; }
  std::span<const std::uint8_t> dones() const { return dones_; }
  // Episodes finished since the last call.
  std::vector<Episode> take_episodes();

  const std::vector<pid_t>& pids() const { return pids_; }

 private:
  void* slot_memory(int i) const;  // environment i's reply in the shared mapping
  [[noreturn]] void fail(int i, const std::string& what);
  void wait_replies();

  EnvConfig config_;
  int obs_bytes_ = 0;
  std::size_t slot_stride_ = 0;
  std::size_t slots_at_ = 0;
  void* mapping_ = nullptr;
  std::size_t mapping_bytes_ = 0;
  std::vector<pid_t> pids_;
  std::vector<int> sockets_;  // the parent's end, one per worker
  std::vector<float> rewards_;
  std::vector<std::uint8_t> dones_;
  std::vector<Episode> episodes_;
  bool failed_ = false;
};

}  // namespace mlbench::atari
