// mlbench-pong: a Pong-like two-paddle game written for the atari benchmark
// (the Arcade Learning Environment and Atari ROMs are not packaged for Debian).
// It draws 210x160 RGB frames laid out like Atari 2600 Pong (walls, an orange
// opponent paddle on the left, the agent's green paddle on the right, a white
// ball) and is deterministic for a seed. No LibTorch: unit-tested on its own.
//
// Physics, per frame (integer pixels, so that a seed fixes every frame):
// - the ball moves by (vx, vy); it reflects off the top and bottom walls
//   (vy changes sign, the overshoot is mirrored back into the field);
// - a ball moving towards a paddle that reaches the paddle's column while its
//   rows overlap the paddle's bounces back (vx changes sign) with
//   vy = round(offset * ball_vy_max) where offset in [-1, 1] is where it hit
//   the paddle (-1 top edge, 0 centre, 1 bottom edge), as Pong's angled returns,
//   but never 0 (a centre hit keeps the ball's vertical direction at 1 row a
//   frame: a level ball between two still paddles would rally for ever);
// - a ball that leaves the field on the left scores +1 for the agent, on the
//   right +1 for the opponent (reward -1 to the agent); the next serve starts
//   from the centre column at a random row, towards the side that lost the
//   point (the first serve towards a random side), with vy uniform in
//   [-ball_vy_max, ball_vy_max];
// - the agent's paddle moves paddle_speed rows up (action 1), down (2) or not
//   (0), clamped to the field; the scripted opponent moves its centre towards
//   the ball's centre by at most opponent_speed rows while the ball comes
//   towards it through its half of the field, and back towards the middle
//   otherwise, so that a steep return can beat it (opponent_speed 0: an idle
//   opponent that never moves from the middle).
// agent_paddle_height makes the agent's paddle alone taller (an easier game
// for a learning check); 0 keeps both paddles paddle_height rows.
// serve_to_agent serves every ball towards the agent, so that each point asks
// the agent for a catch (with an idle opponent, a point the agent won is
// otherwise followed by serves the opponent mostly misses: points for free).
// serve_row >= 0 serves every ball from that row of the field (0: its top row;
// clamped so the ball fits) instead of a random row: with ball_vy_max 0 every
// ball then flies level along one row, and a policy need not see the ball to
// catch it, only learn where its own paddle must go (the easiest game, for the
// learning check).
// The episode ends when either side reaches points_to_win (21) or after
// max_frames frames (108,000: the 30 minutes at 60 fps of ALE's v4 limit).
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <span>

namespace mlbench::atari {

inline constexpr int kFrameHeight = 210;
inline constexpr int kFrameWidth = 160;
inline constexpr int kFrameBytes = kFrameHeight * kFrameWidth * 3;  // RGB, row-major

// The playing field's rows [kFieldTop, kFieldBottom); walls above and below.
inline constexpr int kFieldTop = 34;
inline constexpr int kFieldBottom = 194;
inline constexpr int kBallWidth = 2;
inline constexpr int kBallHeight = 4;
inline constexpr int kPaddleWidth = 4;
inline constexpr int kOpponentColumn = 16;  // left edge of the opponent's paddle
inline constexpr int kAgentColumn = 140;    // left edge of the agent's paddle

// Colours of ALE's Pong.
inline constexpr std::array<std::uint8_t, 3> kBackground{144, 72, 17};
inline constexpr std::array<std::uint8_t, 3> kWall{236, 236, 236};
inline constexpr std::array<std::uint8_t, 3> kBallColour{236, 236, 236};
inline constexpr std::array<std::uint8_t, 3> kOpponentColour{213, 130, 74};
inline constexpr std::array<std::uint8_t, 3> kAgentColour{92, 186, 92};

enum Action : int { kNoop = 0, kUp = 1, kDown = 2 };
inline constexpr int kActionCount = 3;

struct PongParams {
  int ball_vx = 2;      // columns per frame
  int ball_vy_max = 2;  // rows per frame at most
  int paddle_height = 16;
  int agent_paddle_height = 0;  // the agent's paddle alone (0: paddle_height); an easier game when taller
  int paddle_speed = 3;         // the agent's rows per frame
  int opponent_speed = 2;       // 0: idle opponent
  int points_to_win = 21;
  bool serve_to_agent = false;  // every serve towards the agent (an easier game: each point is a catch)
  int serve_row = -1;           // every serve from this field row (0: the top); -1 a random row
  long max_frames = 108000;

  int agent_height() const { return agent_paddle_height > 0 ? agent_paddle_height : paddle_height; }
};

struct PongState {
  int ball_x = 0, ball_y = 0;  // top-left corner of the ball
  int ball_vx = 0, ball_vy = 0;
  int agent_y = 0, opponent_y = 0;  // top row of each paddle
  int agent_score = 0, opponent_score = 0;
  long frames = 0;
};

class Pong {
 public:
  explicit Pong(std::uint64_t seed, PongParams params = {});

  // Starts a game: scores 0, paddles in the middle, first serve.
  void reset();
  // Starts from a given state (tests).
  void reset_to(const PongState& s) { state_ = s; }

  struct StepResult {
    int reward;  // +1 the agent scored, -1 the opponent scored, 0 otherwise
    bool done;   // a side reached points_to_win, or max_frames passed
  };
  // Advances one frame with `action` (kNoop, kUp, kDown; others count as kNoop).
  StepResult step(int action);

  // Draws the current frame into `rgb` (kFrameBytes).
  void render(std::span<std::uint8_t> rgb) const;

  const PongState& state() const { return state_; }
  const PongParams& params() const { return params_; }

 private:
  void serve(int towards);  // towards: +1 the agent (right), -1 the opponent (left)

  PongParams params_;
  std::mt19937_64 rng_;
  PongState state_;
};

}  // namespace mlbench::atari
