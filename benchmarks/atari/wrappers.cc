#include "benchmarks/atari/wrappers.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

namespace mlbench::atari {

void max_frames(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b, std::span<std::uint8_t> out) {
  if (a.size() != b.size() || a.size() != out.size()) throw std::invalid_argument("max_frames: sizes differ");
  std::transform(a.begin(), a.end(), b.begin(), out.begin(),
                 [](std::uint8_t x, std::uint8_t y) { return std::max(x, y); });
}

void warp_frame(std::span<const std::uint8_t> rgb, std::span<std::uint8_t> gray84) {
  if (rgb.size() != static_cast<std::size_t>(kFrameBytes) ||
      gray84.size() != static_cast<std::size_t>(kObsFrameBytes)) {
    throw std::invalid_argument("warp_frame: expects a 210x160 RGB frame and an 84x84 output");
  }
  // cv::Mat over the caller's memory (no copies); cvtColor allocates its 210x160 result once per call.
  const cv::Mat in(kFrameHeight, kFrameWidth, CV_8UC3, const_cast<std::uint8_t*>(rgb.data()));
  cv::Mat gray;
  cv::cvtColor(in, gray, cv::COLOR_RGB2GRAY);
  cv::Mat out(kObsSide, kObsSide, CV_8UC1, gray84.data());
  cv::resize(gray, out, out.size(), 0, 0, cv::INTER_AREA);
}

FrameStack::FrameStack(int depth, int frame_bytes)
    : depth_(depth), frame_bytes_(frame_bytes), data_(static_cast<std::size_t>(depth) * frame_bytes) {}

void FrameStack::reset(std::span<const std::uint8_t> frame) {
  for (int i = 0; i < depth_; ++i) std::copy(frame.begin(), frame.end(), data_.begin() + i * frame_bytes_);
}

void FrameStack::push(std::span<const std::uint8_t> frame) {
  std::memmove(data_.data(), data_.data() + frame_bytes_, static_cast<std::size_t>(depth_ - 1) * frame_bytes_);
  std::copy(frame.begin(), frame.end(), data_.end() - frame_bytes_);
}

AtariPong::AtariPong(std::uint64_t seed, PongParams game, WrapperParams wrap)
    : game_(seed, game),
      wrap_(wrap),
      rgb_{std::vector<std::uint8_t>(kFrameBytes), std::vector<std::uint8_t>(kFrameBytes)},
      pooled_(kFrameBytes),
      gray_(kObsFrameBytes),
      stack_(wrap.stack, kObsFrameBytes) {
  if (wrap.frame_skip < 1 || wrap.stack < 1)
    throw std::invalid_argument("AtariPong: frame_skip and stack must be >= 1");
  observe_first_frame();  // the game started in its constructor
}

void AtariPong::reset() {
  game_.reset();
  observe_first_frame();
}

void AtariPong::observe_first_frame() {
  game_.render(rgb_[0]);
  warp_frame(rgb_[0], gray_);
  stack_.reset(gray_);
}

AtariPong::StepResult AtariPong::step(int action) {
  StepResult r{0.0f, 0, false};
  // Only the frames the max reads are drawn (the last two; one when the game ends earlier).
  int rendered = 0;
  for (int i = 0; i < wrap_.frame_skip; ++i) {
    const auto f = game_.step(action);
    r.raw_reward += f.reward;
    r.done = f.done;
    if (i >= wrap_.frame_skip - 2 || f.done) {
      game_.render(rgb_[rendered % 2]);
      ++rendered;
    }
    if (f.done) break;
  }
  if (rendered >= 2) {
    max_frames(rgb_[0], rgb_[1], pooled_);
    warp_frame(pooled_, gray_);
  } else {
    warp_frame(rgb_[0], gray_);
  }
  stack_.push(gray_);
  r.reward = wrap_.clip_rewards ? clip_reward(r.raw_reward) : static_cast<float>(r.raw_reward);
  return r;
}

}  // namespace mlbench::atari
