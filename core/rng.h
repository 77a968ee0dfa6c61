// splitmix64: a small, fast, deterministic generator, and its mixing function.
// Dataset recipes and the pipeline's random transforms seed one per item (from
// a run seed and the item's position), so their output does not depend on
// thread timing. The one copy in the tree: datasets and the pipeline use it.
#pragma once

#include <cstdint>

namespace mlbench::core {

// One splitmix64 step as a pure function: advances `z` by the golden-ratio
// increment and scrambles it. Chained (z = splitmix64(z)) or composed
// (splitmix64(splitmix64(a) ^ b)) it turns seeds into well-spread seeds.
constexpr std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  // The classic generator: the state advances by the increment, the output is
  // the scrambled state.
  std::uint64_t next() {
    const std::uint64_t out = splitmix64(s_);
    s_ += 0x9e3779b97f4a7c15ULL;
    return out;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Integer in [lo, hi] inclusive.
  int integer(int lo, int hi) { return lo + static_cast<int>(next() % static_cast<std::uint64_t>(hi - lo + 1)); }

 private:
  std::uint64_t s_;
};

}  // namespace mlbench::core
