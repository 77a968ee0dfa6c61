// The Atari preprocessing of the DQN/PPO papers (the wrappers of OpenAI
// baselines' atari_wrappers.py) around mlbench-pong: repeat each action for
// 4 frames and keep the pixel-wise max of the last two (MaxAndSkipEnv),
// grayscale and resize to 84x84 with OpenCV's INTER_AREA (WarpFrame), clip the
// reward to its sign (ClipRewardEnv), stack the last 4 observations
// (FrameStack). The episode ends when the game does (21 points). No LibTorch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "benchmarks/atari/pong.h"

namespace mlbench::atari {

inline constexpr int kObsSide = 84;
inline constexpr int kObsFrameBytes = kObsSide * kObsSide;

// out[i] = max(a[i], b[i]); the three spans have one size.
void max_frames(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b, std::span<std::uint8_t> out);

// A 210x160 RGB frame to an 84x84 grayscale one: cv::cvtColor(RGB2GRAY), then
// cv::resize(84x84, INTER_AREA), as WarpFrame.
void warp_frame(std::span<const std::uint8_t> rgb, std::span<std::uint8_t> gray84);

// The reward's sign: -1, 0 or 1 (ClipRewardEnv).
inline float clip_reward(double reward) {
  return reward > 0 ? 1.0f : reward < 0 ? -1.0f : 0.0f;
}

// The last `depth` frames, oldest first, as one depth x frame_bytes block.
class FrameStack {
 public:
  FrameStack(int depth, int frame_bytes);
  // After a reset: `frame` fills every slot (baselines' FrameStack.reset).
  void reset(std::span<const std::uint8_t> frame);
  // Drops the oldest frame and appends `frame`.
  void push(std::span<const std::uint8_t> frame);
  std::span<const std::uint8_t> data() const { return data_; }
  int depth() const { return depth_; }

 private:
  int depth_;
  int frame_bytes_;
  std::vector<std::uint8_t> data_;
};

struct WrapperParams {
  int frame_skip = 4;
  int stack = 4;
  bool clip_rewards = true;
};

// mlbench-pong as an agent sees it: one step = frame_skip frames.
class AtariPong {
 public:
  AtariPong(std::uint64_t seed, PongParams game = {}, WrapperParams wrap = {});

  // A new game; the observation is its first frame, stacked.
  void reset();

  struct StepResult {
    float reward;    // clipped (when clip_rewards) sum over the skipped frames
    int raw_reward;  // the game's sum over the skipped frames
    bool done;
  };
  StepResult step(int action);

  // stack x 84 x 84 bytes, oldest frame first.
  std::span<const std::uint8_t> observation() const { return stack_.data(); }
  static int observation_bytes(const WrapperParams& wrap) { return wrap.stack * kObsFrameBytes; }
  const Pong& game() const { return game_; }

 private:
  void observe_first_frame();

  Pong game_;
  WrapperParams wrap_;
  std::vector<std::uint8_t> rgb_[2];  // the last two rendered frames of a step
  std::vector<std::uint8_t> pooled_, gray_;
  FrameStack stack_;
};

}  // namespace mlbench::atari
