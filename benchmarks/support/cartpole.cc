#include "benchmarks/support/cartpole.h"

#include <cmath>
#include <stdexcept>

namespace mlbench::bench {

CartPoleState cartpole_dynamics(const CartPoleState& s, int action, const CartPoleParams& p) {
  if (action != 0 && action != 1) throw std::invalid_argument("CartPole action must be 0 or 1");
  const auto [x, x_dot, theta, theta_dot] = s;
  const double total_mass = p.mass_cart + p.mass_pole;
  const double pole_mass_length = p.mass_pole * p.half_pole_length;
  const double force = action == 1 ? p.force : -p.force;
  const double cos_t = std::cos(theta);
  const double sin_t = std::sin(theta);
  const double temp = (force + pole_mass_length * theta_dot * theta_dot * sin_t) / total_mass;
  const double theta_acc = (p.gravity * sin_t - cos_t * temp) /
                           (p.half_pole_length * (4.0 / 3.0 - p.mass_pole * cos_t * cos_t / total_mass));
  const double x_acc = temp - pole_mass_length * theta_acc * cos_t / total_mass;
  // Gym's "euler" integrator: positions advance with the old velocities.
  return {x + p.tau * x_dot, x_dot + p.tau * x_acc, theta + p.tau * theta_dot, theta_dot + p.tau * theta_acc};
}

CartPole::CartPole(std::uint64_t seed, CartPoleParams params) : params_(params), rng_(seed) {}

const CartPoleState& CartPole::reset() {
  std::uniform_real_distribution<double> u(-0.05, 0.05);
  for (double& v : state_) v = u(rng_);
  steps_ = 0;
  return state_;
}

void CartPole::reset_to(const CartPoleState& s) {
  state_ = s;
  steps_ = 0;
}

CartPole::StepResult CartPole::step(int action) {
  state_ = cartpole_dynamics(state_, action, params_);
  ++steps_;
  const bool failed = std::abs(state_[0]) > params_.x_threshold || std::abs(state_[2]) > params_.theta_threshold;
  const bool done = failed || steps_ >= params_.max_steps;
  return {state_, 1.0, done, failed};
}

std::vector<double> discounted_returns(const std::vector<double>& rewards, double gamma, bool standardise) {
  std::vector<double> out(rewards.size());
  double g = 0.0;
  for (std::size_t i = rewards.size(); i-- > 0;) {
    g = rewards[i] + gamma * g;
    out[i] = g;
  }
  if (standardise && !out.empty()) {
    double mean = 0.0;
    for (double v : out) mean += v;
    mean /= static_cast<double>(out.size());
    double ss = 0.0;
    for (double v : out) ss += (v - mean) * (v - mean);
    // torch.std is the sample sd (n - 1); a one-step episode has sd NaN there, 0 here.
    const double sd = out.size() > 1 ? std::sqrt(ss / static_cast<double>(out.size() - 1)) : 0.0;
    for (double& v : out) v = (v - mean) / (sd + 1e-9);
  }
  return out;
}

}  // namespace mlbench::bench
