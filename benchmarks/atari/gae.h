// Generalised advantage estimation (Schulman et al. 2016) over a rollout of
// `steps` x `envs`, as PPO's Atari recipe uses it (gamma 0.99, lambda 0.95).
// Plain vectors, no LibTorch: unit-tested on hand-computed numbers.
#pragma once

#include <span>
#include <vector>

namespace mlbench::atari {

// rewards, values, dones: row t holds the `envs` values of step t; dones[t]
// says the episode ended with step t's action (V of the next state is then 0);
// last_values: V of the states after the last step. Returns the advantages
//   delta_t = r_t + gamma * V_{t+1} * (1 - done_t) - V_t
//   A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}
// (the returns the value head learns are A_t + V_t).
std::vector<float> gae_advantages(std::span<const float> rewards, std::span<const float> values,
                                  std::span<const unsigned char> dones, std::span<const float> last_values, int envs,
                                  float gamma, float lambda);

}  // namespace mlbench::atari
