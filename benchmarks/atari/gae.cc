#include "benchmarks/atari/gae.h"

#include <stdexcept>

namespace mlbench::atari {

std::vector<float> gae_advantages(std::span<const float> rewards, std::span<const float> values,
                                  std::span<const unsigned char> dones, std::span<const float> last_values, int envs,
                                  float gamma, float lambda) {
  if (envs < 1 || rewards.size() % static_cast<std::size_t>(envs) != 0 || values.size() != rewards.size() ||
      dones.size() != rewards.size() || last_values.size() != static_cast<std::size_t>(envs)) {
    throw std::invalid_argument("gae_advantages: rewards, values and dones must be steps x envs, last_values envs");
  }
  const long steps = static_cast<long>(rewards.size()) / envs;
  std::vector<float> adv(rewards.size());
  for (int e = 0; e < envs; ++e) {
    float next_value = last_values[e];
    float next_adv = 0;
    for (long t = steps - 1; t >= 0; --t) {
      const std::size_t k = static_cast<std::size_t>(t) * envs + e;
      const float live = dones[k] ? 0.0f : 1.0f;
      const float delta = rewards[k] + gamma * next_value * live - values[k];
      next_adv = delta + gamma * lambda * live * next_adv;
      adv[k] = next_adv;
      next_value = values[k];
    }
  }
  return adv;
}

}  // namespace mlbench::atari
