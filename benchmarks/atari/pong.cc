#include "benchmarks/atari/pong.h"

#include <algorithm>
#include <cmath>

namespace mlbench::atari {

namespace {

// Rows of the walls drawn above and below the field (the score band above them is left empty).
constexpr int kTopWallFirstRow = 24;

bool rows_overlap(int ball_y, int paddle_y, int paddle_height) {
  return ball_y < paddle_y + paddle_height && paddle_y < ball_y + kBallHeight;
}

// vy after a paddle hit: the hit's offset from the paddle's centre, -1 (top) .. 1 (bottom),
// never 0 (a level ball between two still paddles would rally for ever): a centre hit
// keeps the vertical direction the ball came with.
int return_vy(int ball_y, int ball_vy, int paddle_y, int paddle_height, const PongParams& p) {
  const double half = paddle_height / 2.0 + kBallHeight / 2.0;
  const double offset = ((ball_y + kBallHeight / 2.0) - (paddle_y + paddle_height / 2.0)) / half;
  const int vy = static_cast<int>(std::lround(std::clamp(offset, -1.0, 1.0) * p.ball_vy_max));
  if (vy != 0 || p.ball_vy_max == 0) return vy;
  return ball_vy < 0 ? -1 : 1;
}

void fill(std::span<std::uint8_t> rgb, int row0, int row1, int col0, int col1, const std::array<std::uint8_t, 3>& c) {
  row0 = std::max(row0, 0);
  row1 = std::min(row1, kFrameHeight);
  col0 = std::max(col0, 0);
  col1 = std::min(col1, kFrameWidth);
  for (int r = row0; r < row1; ++r) {
    std::uint8_t* px = rgb.data() + (static_cast<std::size_t>(r) * kFrameWidth + col0) * 3;
    for (int col = col0; col < col1; ++col, px += 3) std::copy(c.begin(), c.end(), px);
  }
}

}  // namespace

Pong::Pong(std::uint64_t seed, PongParams params) : params_(params), rng_(seed) {
  reset();
}

void Pong::reset() {
  state_ = PongState{};
  state_.agent_y = (kFieldTop + kFieldBottom - params_.agent_height()) / 2;
  state_.opponent_y = (kFieldTop + kFieldBottom - params_.paddle_height) / 2;
  serve(std::uniform_int_distribution<int>(0, 1)(rng_) == 0 ? -1 : 1);
}

void Pong::serve(int towards) {
  if (params_.serve_to_agent) towards = 1;
  state_.ball_x = (kFrameWidth - kBallWidth) / 2;
  state_.ball_y = params_.serve_row >= 0
                      ? std::min(kFieldTop + params_.serve_row, kFieldBottom - kBallHeight)
                      : std::uniform_int_distribution<int>(kFieldTop, kFieldBottom - kBallHeight)(rng_);
  state_.ball_vx = towards * params_.ball_vx;
  state_.ball_vy = std::uniform_int_distribution<int>(-params_.ball_vy_max, params_.ball_vy_max)(rng_);
}

Pong::StepResult Pong::step(int action) {
  PongState& s = state_;
  const PongParams& p = params_;
  const int lowest_paddle_row = kFieldBottom - p.paddle_height;
  const int agent_height = p.agent_height();
  ++s.frames;

  // Paddles first: the agent's action, then the scripted opponent.
  if (action == kUp) s.agent_y -= p.paddle_speed;
  if (action == kDown) s.agent_y += p.paddle_speed;
  s.agent_y = std::clamp(s.agent_y, kFieldTop, kFieldBottom - agent_height);
  const bool coming = s.ball_vx < 0 && s.ball_x < kFrameWidth / 2;
  const int target = coming ? s.ball_y + kBallHeight / 2 : (kFieldTop + kFieldBottom) / 2;
  const int centre = s.opponent_y + p.paddle_height / 2;
  s.opponent_y += std::clamp(target - centre, -p.opponent_speed, p.opponent_speed);
  s.opponent_y = std::clamp(s.opponent_y, kFieldTop, lowest_paddle_row);

  // The ball, off the walls.
  const int old_x = s.ball_x;
  s.ball_x += s.ball_vx;
  s.ball_y += s.ball_vy;
  if (s.ball_y < kFieldTop) {
    s.ball_y = 2 * kFieldTop - s.ball_y;
    s.ball_vy = -s.ball_vy;
  } else if (s.ball_y + kBallHeight > kFieldBottom) {
    s.ball_y = 2 * (kFieldBottom - kBallHeight) - s.ball_y;
    s.ball_vy = -s.ball_vy;
  }

  // Off a paddle: the ball crossed the paddle's face during this frame.
  if (s.ball_vx > 0 && old_x + kBallWidth <= kAgentColumn && s.ball_x + kBallWidth > kAgentColumn &&
      rows_overlap(s.ball_y, s.agent_y, agent_height)) {
    s.ball_x = kAgentColumn - kBallWidth;
    s.ball_vx = -s.ball_vx;
    s.ball_vy = return_vy(s.ball_y, s.ball_vy, s.agent_y, agent_height, p);
  } else if (s.ball_vx < 0 && old_x >= kOpponentColumn + kPaddleWidth && s.ball_x < kOpponentColumn + kPaddleWidth &&
             rows_overlap(s.ball_y, s.opponent_y, p.paddle_height)) {
    s.ball_x = kOpponentColumn + kPaddleWidth;
    s.ball_vx = -s.ball_vx;
    s.ball_vy = return_vy(s.ball_y, s.ball_vy, s.opponent_y, p.paddle_height, p);
  }

  // Out of the field: a point, and a serve towards the side that lost it.
  int reward = 0;
  if (s.ball_x + kBallWidth <= 0) {
    ++s.agent_score;
    reward = 1;
    serve(-1);
  } else if (s.ball_x >= kFrameWidth) {
    ++s.opponent_score;
    reward = -1;
    serve(1);
  }
  const bool done = s.agent_score >= p.points_to_win || s.opponent_score >= p.points_to_win ||
                    (p.max_frames > 0 && s.frames >= p.max_frames);
  return {reward, done};
}

void Pong::render(std::span<std::uint8_t> rgb) const {
  const PongState& s = state_;
  fill(rgb, 0, kFrameHeight, 0, kFrameWidth, kBackground);
  fill(rgb, kTopWallFirstRow, kFieldTop, 0, kFrameWidth, kWall);
  fill(rgb, kFieldBottom, kFrameHeight, 0, kFrameWidth, kWall);
  fill(rgb, s.opponent_y, s.opponent_y + params_.paddle_height, kOpponentColumn, kOpponentColumn + kPaddleWidth,
       kOpponentColour);
  fill(rgb, s.agent_y, s.agent_y + params_.agent_height(), kAgentColumn, kAgentColumn + kPaddleWidth, kAgentColour);
  fill(rgb, s.ball_y, s.ball_y + kBallHeight, s.ball_x, s.ball_x + kBallWidth, kBallColour);
}

}  // namespace mlbench::atari
