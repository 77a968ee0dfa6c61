// The atari benchmark's torch-free parts: mlbench-pong's rules (walls, paddle
// returns, scoring, serves, the end at 21 points, determinism for a seed), the
// Atari preprocessing on hand-made frames with known results, GAE on
// hand-computed numbers, and the worker processes (their shared-memory
// observations equal a local environment's; a killed worker is a named error).
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <vector>

#include "benchmarks/atari/env_workers.h"
#include "benchmarks/atari/gae.h"
#include "benchmarks/atari/pong.h"
#include "benchmarks/atari/wrappers.h"
#include "tests/support/processes.h"

namespace {

using namespace mlbench::atari;

std::vector<std::uint8_t> render(const Pong& p) {
  std::vector<std::uint8_t> rgb(kFrameBytes);
  p.render(rgb);
  return rgb;
}

std::array<std::uint8_t, 3> pixel(const std::vector<std::uint8_t>& rgb, int row, int col) {
  const std::size_t k = (static_cast<std::size_t>(row) * kFrameWidth + col) * 3;
  return {rgb[k], rgb[k + 1], rgb[k + 2]};
}

// A state in mid-game: paddles in the middle, the ball at (x, y) with (vx, vy).
PongState ball_at(int x, int y, int vx, int vy, const PongParams& p = {}) {
  PongState s;
  s.agent_y = s.opponent_y = (kFieldTop + kFieldBottom - p.paddle_height) / 2;
  s.ball_x = x;
  s.ball_y = y;
  s.ball_vx = vx;
  s.ball_vy = vy;
  return s;
}

// --- Pong: rules --------------------------------------------------------------

TEST(Pong, BallReflectsOffTheTopAndBottomWalls) {
  Pong g(1);
  g.reset_to(ball_at(80, kFieldTop + 1, 2, -3));
  g.step(kNoop);
  EXPECT_EQ(g.state().ball_y, kFieldTop + 2);  // 35 - 3 = 32 mirrored about 34
  EXPECT_EQ(g.state().ball_vy, 3);
  EXPECT_EQ(g.state().ball_x, 82);

  g.reset_to(ball_at(80, kFieldBottom - kBallHeight - 1, 2, 3));
  g.step(kNoop);
  EXPECT_EQ(g.state().ball_y, kFieldBottom - kBallHeight - 2);
  EXPECT_EQ(g.state().ball_vy, -3);
}

TEST(Pong, AgentPaddleReturnsTheBallAtAnAngleSetByWhereItHit) {
  PongParams p;
  Pong g(1, p);
  PongState s = ball_at(kAgentColumn - kBallWidth - 1, 0, 2, 0, p);
  s.ball_y = s.agent_y + p.paddle_height / 2 - kBallHeight / 2;  // dead centre
  g.reset_to(s);
  auto r = g.step(kNoop);
  EXPECT_EQ(r.reward, 0);
  EXPECT_EQ(g.state().ball_x, kAgentColumn - kBallWidth);
  EXPECT_EQ(g.state().ball_vx, -2);
  EXPECT_EQ(g.state().ball_vy, 1);  // never level: a centre hit keeps the direction, at 1 row a frame

  s.ball_vy = -2;
  s.ball_y += 2;  // still dead centre after this frame's move
  g.reset_to(s);
  g.step(kNoop);
  EXPECT_EQ(g.state().ball_vy, -1);

  s.ball_vy = 0;
  s.ball_y = s.agent_y - kBallHeight + 1;  // just touching the top edge: steepest upwards
  g.reset_to(s);
  g.step(kNoop);
  EXPECT_EQ(g.state().ball_vx, -2);
  EXPECT_EQ(g.state().ball_vy, -p.ball_vy_max);
}

TEST(Pong, ATallerAgentPaddleCatchesWhatTheOpponentsHeightWouldMiss) {
  PongParams p;
  p.agent_paddle_height = 64;  // the opponent's stays 16
  Pong g(1, p);
  g.reset();
  EXPECT_EQ(g.state().agent_y, (kFieldTop + kFieldBottom - 64) / 2);  // centred as the opponent's
  EXPECT_EQ(g.state().opponent_y, (kFieldTop + kFieldBottom - 16) / 2);
  PongState s = g.state();
  s.ball_x = kAgentColumn - kBallWidth - 1;
  s.ball_y = s.agent_y + 2;  // within 64 rows of the paddle's top, outside 16 around the middle
  s.ball_vx = 2;
  s.ball_vy = 0;
  g.reset_to(s);
  EXPECT_EQ(g.step(kNoop).reward, 0);
  EXPECT_EQ(g.state().ball_vx, -2);  // returned
  EXPECT_LT(g.state().ball_vy, 0);   // near the top edge: upwards
  // Drawn 64 rows tall, and clamped to the field with its own height.
  std::vector<std::uint8_t> rgb(kFrameBytes);
  g.render(rgb);
  EXPECT_EQ(pixel(rgb, s.agent_y + 63, kAgentColumn), kAgentColour);
  EXPECT_EQ(pixel(rgb, s.agent_y + 64, kAgentColumn), kBackground);
  for (int i = 0; i < 100; ++i) g.step(kDown);
  EXPECT_EQ(g.state().agent_y, kFieldBottom - 64);
}

TEST(Pong, OpponentPaddleReturnsTheBall) {
  PongParams p;
  Pong g(1, p);
  PongState s = ball_at(kOpponentColumn + kPaddleWidth + 1, 0, -2, 0, p);
  s.ball_y = s.opponent_y + p.paddle_height / 2 - kBallHeight / 2;
  g.reset_to(s);
  g.step(kNoop);
  EXPECT_EQ(g.state().ball_x, kOpponentColumn + kPaddleWidth);
  EXPECT_EQ(g.state().ball_vx, 2);
}

TEST(Pong, AMissedBallScoresForTheOtherSideAndIsServedTowardsTheLoser) {
  PongParams p;
  Pong g(3, p);
  PongState s = ball_at(kFrameWidth - 2, kFieldTop, 2, 0, p);  // past the agent's paddle, far above it
  g.reset_to(s);
  auto r = g.step(kNoop);
  EXPECT_EQ(r.reward, -1);
  EXPECT_FALSE(r.done);
  EXPECT_EQ(g.state().opponent_score, 1);
  EXPECT_EQ(g.state().ball_x, (kFrameWidth - kBallWidth) / 2);
  EXPECT_EQ(g.state().ball_vx, p.ball_vx);  // towards the agent, who lost the point
  EXPECT_GE(g.state().ball_y, kFieldTop);
  EXPECT_LE(g.state().ball_y, kFieldBottom - kBallHeight);
  EXPECT_LE(std::abs(g.state().ball_vy), p.ball_vy_max);

  PongParams idle = p;
  idle.opponent_speed = 0;
  Pong h(3, idle);
  h.reset_to(ball_at(0, kFieldTop, -2, 0, idle));  // the idle opponent sits in the middle
  r = h.step(kNoop);
  EXPECT_EQ(r.reward, 1);
  EXPECT_EQ(h.state().agent_score, 1);
  EXPECT_EQ(h.state().ball_vx, -idle.ball_vx);

  // serve_to_agent: the point the agent won is followed by a serve towards it, not the loser.
  idle.serve_to_agent = true;
  Pong k(3, idle);
  k.reset_to(ball_at(0, kFieldTop, -2, 0, idle));
  r = k.step(kNoop);
  EXPECT_EQ(r.reward, 1);
  EXPECT_EQ(k.state().ball_vx, idle.ball_vx);
  for (std::uint64_t seed = 0; seed < 20; ++seed) {  // the first serve too
    Pong first(seed, idle);
    EXPECT_EQ(first.state().ball_vx, idle.ball_vx) << seed;
  }
}

TEST(Pong, AFixedServeRowServesEveryBallFromItAndLevelBallsStayOnIt) {
  PongParams p;
  p.opponent_speed = 0;
  p.ball_vy_max = 0;
  p.serve_row = 0;  // the field's top row
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    Pong g(seed, p);
    EXPECT_EQ(g.state().ball_y, kFieldTop) << seed;
    EXPECT_EQ(g.state().ball_vy, 0) << seed;
  }
  // A whole game without moving: every ball flies along the top row, past both middle paddles.
  Pong g(4, p);
  int points = 0;
  for (long f = 0; f < 100000 && points < 2 * p.points_to_win; ++f) {
    ASSERT_EQ(g.state().ball_y, kFieldTop) << "frame " << f;
    auto r = g.step(kNoop);
    if (r.reward != 0) ++points;
    if (r.done) break;
  }
  EXPECT_EQ(std::max(g.state().agent_score, g.state().opponent_score), p.points_to_win);

  // A paddle at the top catches what the middle one missed; a row below the field is clamped into it.
  PongParams to_agent = p;
  to_agent.serve_to_agent = true;
  Pong up(4, to_agent), still(4, to_agent);
  for (int f = 0; f < 2000; ++f) {
    up.step(kUp);
    still.step(kNoop);
  }
  EXPECT_EQ(up.state().agent_y, kFieldTop);
  EXPECT_GT(up.state().agent_score, 0);
  EXPECT_EQ(up.state().opponent_score, 0);
  EXPECT_EQ(still.state().agent_score, 0);
  EXPECT_GT(still.state().opponent_score, 0);
  p.serve_row = 1000;
  Pong low(4, p);
  EXPECT_EQ(low.state().ball_y, kFieldBottom - kBallHeight);
  p.serve_row = -1;  // random rows again
  int distinct = 0, last = -1;
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    const int y = Pong(seed, p).state().ball_y;
    distinct += y != last;
    last = y;
  }
  EXPECT_GT(distinct, 1);
}

TEST(Pong, MaxFramesEndsAGameWhateverTheScore) {
  PongParams p;
  p.max_frames = 50;
  p.ball_vx = 1;  // no point within 50 frames from the centre
  Pong g(2, p);
  for (int i = 1; i < 50; ++i) ASSERT_FALSE(g.step(kNoop).done) << i;
  EXPECT_TRUE(g.step(kNoop).done);
  EXPECT_EQ(g.state().agent_score + g.state().opponent_score, 0);
}

TEST(Pong, TheGameEndsWhenASideReachesPointsToWin) {
  PongParams p;
  Pong g(5, p);
  PongState s = ball_at(kFrameWidth - 2, kFieldTop, 2, 0, p);
  s.opponent_score = p.points_to_win - 1;
  g.reset_to(s);
  EXPECT_TRUE(g.step(kNoop).done);

  // A whole game: an agent that never moves loses; rewards add up to the score.
  Pong full(11, p);
  int total = 0;
  long frames = 0;
  for (;;) {
    const auto r = full.step(kNoop);
    total += r.reward;
    ++frames;
    if (r.done) break;
    ASSERT_LT(frames, p.max_frames);
  }
  const auto& st = full.state();
  EXPECT_EQ(std::max(st.agent_score, st.opponent_score), p.points_to_win);
  EXPECT_EQ(total, st.agent_score - st.opponent_score);
  EXPECT_EQ(st.opponent_score, p.points_to_win);
}

TEST(Pong, OpponentFollowsTheBallAtItsSpeedAndAnIdleOneStays) {
  PongParams p;
  Pong g(1, p);
  PongState s = ball_at(70, kFieldBottom - 10, -2, 0, p);  // in the opponent's half, coming
  g.reset_to(s);
  g.step(kNoop);
  EXPECT_EQ(g.state().opponent_y, s.opponent_y + p.opponent_speed);

  g.reset_to(ball_at(100, kFieldBottom - 10, -2, 0, p));  // still in the agent's half: no reaction yet
  g.step(kNoop);
  EXPECT_EQ(g.state().opponent_y, s.opponent_y);
  PongState away = ball_at(70, kFieldBottom - 10, 2, 0, p);  // going away: back towards the middle
  away.opponent_y = kFieldTop;
  g.reset_to(away);
  g.step(kNoop);
  EXPECT_EQ(g.state().opponent_y, kFieldTop + p.opponent_speed);

  p.opponent_speed = 0;
  Pong idle(1, p);
  idle.reset_to(s);
  for (int i = 0; i < 10; ++i) idle.step(kNoop);
  EXPECT_EQ(idle.state().opponent_y, s.opponent_y);
}

TEST(Pong, AgentPaddleMovesAndStaysInTheField) {
  PongParams p;
  Pong g(1, p);
  g.reset_to(ball_at(80, 100, 2, 0, p));
  const int y0 = g.state().agent_y;
  g.step(kUp);
  EXPECT_EQ(g.state().agent_y, y0 - p.paddle_speed);
  g.step(kDown);
  g.step(kDown);
  EXPECT_EQ(g.state().agent_y, y0 + p.paddle_speed);
  for (int i = 0; i < 100; ++i) g.step(kUp);
  EXPECT_EQ(g.state().agent_y, kFieldTop);
}

TEST(Pong, SameSeedSameGameOtherSeedOtherGame) {
  auto play = [](std::uint64_t seed) {
    Pong g(seed);
    std::vector<std::uint8_t> frames;
    std::vector<int> rewards;
    for (int i = 0; i < 3000; ++i) {
      const auto r = g.step((i / 7) % 3);
      rewards.push_back(r.reward);
      if (i % 500 == 0) {
        const auto f = render(g);
        frames.insert(frames.end(), f.begin(), f.end());
      }
    }
    return std::make_pair(frames, rewards);
  };
  const auto a = play(42), b = play(42), c = play(43);
  EXPECT_EQ(a.first, b.first);
  EXPECT_EQ(a.second, b.second);
  EXPECT_NE(a.first, c.first);
  EXPECT_NE(std::count(a.second.begin(), a.second.end(), 0), static_cast<long>(a.second.size()));  // points were played
}

TEST(Pong, RendersAtariPongsLayoutAndColours) {
  Pong g(1);
  g.reset_to(ball_at(70, 100, 2, 0));
  const auto f = render(g);
  const auto& s = g.state();
  EXPECT_EQ(pixel(f, 5, 5), kBackground);
  EXPECT_EQ(pixel(f, kFieldTop - 1, 50), kWall);
  EXPECT_EQ(pixel(f, kFieldBottom, 50), kWall);
  EXPECT_EQ(pixel(f, kFieldTop, 50), kBackground);
  EXPECT_EQ(pixel(f, s.agent_y, kAgentColumn), kAgentColour);
  EXPECT_EQ(pixel(f, s.agent_y + 15, kAgentColumn + 3), kAgentColour);
  EXPECT_EQ(pixel(f, s.agent_y + 16, kAgentColumn), kBackground);
  EXPECT_EQ(pixel(f, s.opponent_y, kOpponentColumn), kOpponentColour);
  EXPECT_EQ(pixel(f, 100, 70), kBallColour);
  EXPECT_EQ(pixel(f, 103, 71), kBallColour);
  EXPECT_EQ(pixel(f, 104, 70), kBackground);
  EXPECT_EQ(pixel(f, 100, 72), kBackground);
}

// --- Wrappers: known frames ----------------------------------------------------

std::vector<std::uint8_t> solid(std::array<std::uint8_t, 3> c) {
  std::vector<std::uint8_t> rgb(kFrameBytes);
  for (std::size_t i = 0; i < rgb.size(); i += 3) std::copy(c.begin(), c.end(), rgb.begin() + i);
  return rgb;
}

TEST(AtariWrappers, GrayscaleUsesTheRec601Weights) {
  std::vector<std::uint8_t> out(kObsFrameBytes);
  warp_frame(solid({144, 72, 17}), out);  // 0.299*144 + 0.587*72 + 0.114*17 = 87.26
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](auto v) { return v == 87; }));
  warp_frame(solid({255, 0, 0}), out);  // 76.2
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](auto v) { return v == 76; }));
  warp_frame(solid({0, 0, 0}), out);
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](auto v) { return v == 0; }));
}

TEST(AtariWrappers, AreaResizeMapsHalvesOntoHalves) {
  // Columns 0-79 white: 160 -> 84 columns, output column j covers [j*160/84, (j+1)*160/84):
  // columns 0..41 lie wholly in the white half, 42..83 wholly in the black one.
  std::vector<std::uint8_t> rgb(kFrameBytes, 0), out(kObsFrameBytes);
  for (int r = 0; r < kFrameHeight; ++r)
    for (int c = 0; c < kFrameWidth / 2; ++c)
      for (int k = 0; k < 3; ++k) rgb[(static_cast<std::size_t>(r) * kFrameWidth + c) * 3 + k] = 255;
  warp_frame(rgb, out);
  for (int r = 0; r < kObsSide; ++r)
    for (int c = 0; c < kObsSide; ++c) ASSERT_EQ(out[r * kObsSide + c], c < 42 ? 255 : 0) << r << "," << c;

  // Rows 0-104 white: 210 -> 84 rows (2.5 each): rows 0..41 white, 42..83 black.
  std::fill(rgb.begin(), rgb.end(), 0);
  std::fill(rgb.begin(), rgb.begin() + 105 * kFrameWidth * 3, 255);
  warp_frame(rgb, out);
  for (int r = 0; r < kObsSide; ++r)
    for (int c = 0; c < kObsSide; ++c) ASSERT_EQ(out[r * kObsSide + c], r < 42 ? 255 : 0) << r << "," << c;

  // One white 5x5 block at rows 0-4, columns 0-3 (plus column 4 partly): the area
  // average of output pixel (0,0) covers rows [0, 2.5) and columns [0, 1.905): all white.
  std::fill(rgb.begin(), rgb.end(), 0);
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 4; ++c)
      for (int k = 0; k < 3; ++k) rgb[(static_cast<std::size_t>(r) * kFrameWidth + c) * 3 + k] = 255;
  warp_frame(rgb, out);
  EXPECT_EQ(out[0], 255);
  EXPECT_EQ(out[kObsSide], 255);  // (1, 0): rows [2.5, 5)
  EXPECT_EQ(out[2 * kObsSide], 0);
  EXPECT_EQ(out[3], 0);
}

TEST(AtariWrappers, MaxOfTwoFramesKeepsBothBalls) {
  std::vector<std::uint8_t> a{0, 10, 200, 7}, b{5, 3, 100, 7}, out(4);
  max_frames(a, b, out);
  EXPECT_EQ(out, (std::vector<std::uint8_t>{5, 10, 200, 7}));
  std::vector<std::uint8_t> short_out(3);
  EXPECT_THROW(max_frames(a, b, short_out), std::invalid_argument);
}

TEST(AtariWrappers, RewardsClipToTheirSign) {
  EXPECT_EQ(clip_reward(3), 1.0f);
  EXPECT_EQ(clip_reward(-2), -1.0f);
  EXPECT_EQ(clip_reward(0), 0.0f);
  EXPECT_EQ(clip_reward(0.25), 1.0f);
}

TEST(AtariWrappers, FrameStackKeepsTheLastFramesOldestFirst) {
  FrameStack s(4, 2);
  const std::vector<std::uint8_t> f0{1, 1}, f1{2, 2}, f2{3, 3};
  s.reset(f0);
  EXPECT_EQ(std::vector<std::uint8_t>(s.data().begin(), s.data().end()),
            (std::vector<std::uint8_t>{1, 1, 1, 1, 1, 1, 1, 1}));
  s.push(f1);
  s.push(f2);
  EXPECT_EQ(std::vector<std::uint8_t>(s.data().begin(), s.data().end()),
            (std::vector<std::uint8_t>{1, 1, 1, 1, 2, 2, 3, 3}));
}

// One agent step is 4 game frames; the observation's newest frame is the warped
// max of frames 3 and 4, the older ones are the previous steps'.
TEST(AtariWrappers, AStepSkipsFourFramesAndMaxesTheLastTwo) {
  const std::uint64_t seed = 9;
  AtariPong env(seed);
  Pong game(seed);  // the same game, stepped by hand
  std::vector<std::uint8_t> first(kObsFrameBytes), expected(kObsFrameBytes), pooled(kFrameBytes);
  warp_frame(render(game), first);
  EXPECT_TRUE(std::equal(first.begin(), first.end(), env.observation().begin() + 3 * kObsFrameBytes));
  EXPECT_TRUE(std::equal(first.begin(), first.end(), env.observation().begin()));

  int raw_total = 0;
  std::vector<std::vector<std::uint8_t>> history{first};
  for (int step = 0; step < 40; ++step) {
    const int action = step % 3;
    int raw = 0;
    std::vector<std::uint8_t> f3;
    for (int i = 0; i < 4; ++i) {
      raw += game.step(action).reward;
      if (i == 2) f3 = render(game);
    }
    max_frames(f3, render(game), pooled);
    warp_frame(pooled, expected);
    const auto r = env.step(action);
    ASSERT_EQ(r.raw_reward, raw);
    ASSERT_EQ(r.reward, clip_reward(raw));
    ASSERT_FALSE(r.done);
    raw_total += raw;
    history.push_back(expected);
    const auto obs = env.observation();
    for (int k = 0; k < 4; ++k) {
      const auto& want = history[std::max<long>(0, static_cast<long>(history.size()) - 4 + k)];
      ASSERT_TRUE(std::equal(want.begin(), want.end(), obs.begin() + k * kObsFrameBytes))
          << "step " << step << " slot " << k;
    }
  }
  EXPECT_EQ(game.state().frames, 160);
  EXPECT_EQ(env.game().state().frames, 160);
}

TEST(AtariWrappers, EpisodeEndsAtTwentyOnePoints) {
  AtariPong env(4);
  long steps = 0;
  int score = 0;
  for (;;) {
    const auto r = env.step(kNoop);
    score += r.raw_reward;
    ++steps;
    if (r.done) break;
    ASSERT_LT(steps, 27000);
  }
  const auto& s = env.game().state();
  EXPECT_EQ(std::max(s.agent_score, s.opponent_score), 21);
  EXPECT_EQ(score, s.agent_score - s.opponent_score);
}

// --- GAE ------------------------------------------------------------------------

TEST(AtariGae, MatchesHandComputedAdvantages) {
  // gamma 0.9, lambda 0.8: A2 = 1 + .9*.2 - .3 = .88; A1 = (0 + .9*.3 - .4) + .72*.88 = .5036;
  // A0 = (1 + .9*.4 - .5) + .72*.5036 = 1.222592.
  const std::vector<float> rewards{1, 0, 1}, values{0.5f, 0.4f, 0.3f}, last{0.2f};
  const std::vector<unsigned char> dones{0, 0, 0};
  auto a = gae_advantages(rewards, values, dones, last, 1, 0.9f, 0.8f);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_NEAR(a[2], 0.88f, 1e-6);
  EXPECT_NEAR(a[1], 0.5036f, 1e-6);
  EXPECT_NEAR(a[0], 1.222592f, 1e-6);

  // The episode ends with step 1: nothing flows back across it. A1 = 0 - .4; A0 = .86 + .72*(-.4) = .572.
  const std::vector<unsigned char> cut{0, 1, 0};
  a = gae_advantages(rewards, values, cut, last, 1, 0.9f, 0.8f);
  EXPECT_NEAR(a[2], 0.88f, 1e-6);
  EXPECT_NEAR(a[1], -0.4f, 1e-6);
  EXPECT_NEAR(a[0], 0.572f, 1e-6);

  // Two environments interleaved (row t = step t): each gets its own column's answer.
  const std::vector<float> r2{1, 1, 0, 0, 1, 1}, v2{0.5f, 0.5f, 0.4f, 0.4f, 0.3f, 0.3f}, l2{0.2f, 0.2f};
  const std::vector<unsigned char> d2{0, 0, 0, 1, 0, 0};
  a = gae_advantages(r2, v2, d2, l2, 2, 0.9f, 0.8f);
  EXPECT_NEAR(a[0], 1.222592f, 1e-6);
  EXPECT_NEAR(a[1], 0.572f, 1e-6);
  EXPECT_THROW(gae_advantages(r2, v2, d2, last, 2, 0.9f, 0.8f), std::invalid_argument);
}

// --- Worker processes ------------------------------------------------------------

TEST(AtariEnvWorkers, SharedObservationsMatchALocalEnvironment) {
  EnvConfig config;
  config.seed = 100;
  config.game.ball_vx = 4;  // points come quickly: episodes end within the test
  config.game.points_to_win = 2;
  const int n = 3;
  EnvWorkers workers(n, config);
  std::vector<AtariPong> local;
  for (int i = 0; i < n; ++i) local.emplace_back(config.seed + i, config.game, config.wrap);
  const int bytes = workers.observation_bytes();
  int episodes = 0;
  std::vector<int> scores(n, 0);
  for (int step = 0; step < 300; ++step) {
    std::vector<int> actions(n);
    for (int i = 0; i < n; ++i) actions[i] = (step + i) % 3;
    workers.step_async(actions);
    workers.step_wait();
    const auto finished = workers.take_episodes();
    int done_now = 0;
    for (int i = 0; i < n; ++i) {
      const auto r = local[i].step(actions[i]);
      scores[i] += r.raw_reward;
      ASSERT_EQ(workers.rewards()[i], r.reward) << "env " << i << " step " << step;
      ASSERT_EQ(workers.dones()[i] != 0, r.done);
      if (r.done) {
        const auto it = std::find_if(finished.begin(), finished.end(), [&](const Episode& e) { return e.env == i; });
        ASSERT_NE(it, finished.end());
        EXPECT_EQ(it->score, scores[i]);
        ++done_now;
        ++episodes;
        local[i].reset();
        scores[i] = 0;
      }
      const auto obs = workers.observations().subspan(static_cast<std::size_t>(i) * bytes, bytes);
      ASSERT_TRUE(std::equal(obs.begin(), obs.end(), local[i].observation().begin())) << "env " << i;
    }
    ASSERT_EQ(static_cast<int>(finished.size()), done_now);
  }
  EXPECT_GT(episodes, 0);
}

TEST(AtariEnvWorkers, EpisodesReportTheirScoreAndLength) {
  EnvConfig config;
  config.seed = 7;
  config.game.ball_vx = 4;
  config.game.points_to_win = 1;
  EnvWorkers workers(2, config);
  AtariPong local(7, config.game, config.wrap);
  long steps = 0;
  int score = 0;
  for (;;) {
    const std::vector<int> actions{kNoop, kNoop};
    workers.step_async(actions);
    workers.step_wait();
    const auto r = local.step(kNoop);
    ++steps;
    score += r.raw_reward;
    if (r.done) break;
    ASSERT_LT(steps, 10000);
  }
  const auto eps = workers.take_episodes();
  const auto it = std::find_if(eps.begin(), eps.end(), [](const Episode& e) { return e.env == 0; });
  ASSERT_NE(it, eps.end());
  EXPECT_EQ(it->score, score);
  EXPECT_EQ(it->steps, steps);
}

TEST(AtariEnvWorkers, AKilledWorkerIsANamedErrorNotAHang) {
  EnvConfig config;
  config.reply_timeout_s = 30;
  EnvWorkers workers(3, config);
  const pid_t victim = workers.pids()[1];
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const std::vector<int> actions{0, 0, 0};
  const auto t0 = std::chrono::steady_clock::now();
  try {
    workers.step_async(actions);
    workers.step_wait();
    FAIL() << "no error after a worker was killed";
  } catch (const WorkerFailed& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("environment worker 1 of 3 (pid " + std::to_string(victim) + ")"), std::string::npos) << what;
    EXPECT_NE(what.find("killed by signal 9"), std::string::npos) << what;
  }
  // Well before the reply timeout: the death is seen, not waited out.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

TEST(AtariEnvWorkers, ASilentWorkerTimesOut) {
  EnvConfig config;
  config.reply_timeout_s = 0.5;
  EnvWorkers workers(2, config);
  ASSERT_EQ(::kill(workers.pids()[0], SIGSTOP), 0);
  const std::vector<int> actions{0, 0};
  workers.step_async(actions);
  try {
    workers.step_wait();
    FAIL() << "no error from a stopped worker";
  } catch (const WorkerFailed& e) {
    EXPECT_NE(std::string(e.what()).find("did not answer within 0.5 s"), std::string::npos) << e.what();
  }
  ::kill(workers.pids()[0], SIGCONT);
}

TEST(AtariEnvWorkers, WorkersEndWithTheObject) {
  std::vector<pid_t> pids;
  {
    EnvWorkers workers(4, EnvConfig{});
    pids = workers.pids();
    for (pid_t p : pids) EXPECT_TRUE(mlbench::testing_support::alive(p));
  }
  for (pid_t p : pids) EXPECT_FALSE(mlbench::testing_support::alive(p)) << p;
  EXPECT_TRUE(mlbench::testing_support::children_of(::getpid()).empty());
}

}  // namespace
