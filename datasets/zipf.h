// A Zipf (power-law) sampler over ranks 0..n-1, P(k) ~ 1 / (k + 1)^s, by
// binary search in a precomputed CDF; and pronounceable pseudo-words for a
// rank, so generated text looks like words and frequent words are short.
// Shared by the wikitext2, ml20m and wmt16 recipes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace mlbench::datasets {

class ZipfSampler {
 public:
  ZipfSampler(std::int64_t n, double exponent) : cdf_(static_cast<std::size_t>(n)) {
    double sum = 0.0;
    for (std::int64_t k = 0; k < n; ++k) {
      sum += 1.0 / std::pow(static_cast<double>(k + 1), exponent);
      cdf_[static_cast<std::size_t>(k)] = sum;
    }
    for (double& c : cdf_) c /= sum;
  }
  template <class Rng>
  std::int64_t operator()(Rng& rng) const {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    const auto it = std::lower_bound(cdf_.begin(), cdf_.end(), u);
    return std::min<std::int64_t>(static_cast<std::int64_t>(it - cdf_.begin()), static_cast<std::int64_t>(cdf_.size()) - 1);
  }
  std::int64_t size() const { return static_cast<std::int64_t>(cdf_.size()); }

 private:
  std::vector<double> cdf_;
};

// Rank -> a distinct lower-case pseudo-word ("ta", "ke", ..., "tamo", ...), with
// `salt` choosing another alphabet of syllables (another "language").
inline std::string pseudo_word(std::int64_t rank, int salt = 0) {
  static const char* kOnsets[2][10] = {{"t", "k", "m", "s", "r", "n", "l", "p", "d", "v"},
                                       {"sch", "b", "g", "w", "z", "h", "f", "st", "br", "kl"}};
  static const char* kVowels[2][5] = {{"a", "e", "i", "o", "u"}, {"ei", "au", "ie", "e", "a"}};
  const int lang = salt & 1;
  std::string w;
  std::int64_t r = rank;
  do {  // base-50 digits, one syllable each
    w += kOnsets[lang][r % 10];
    w += kVowels[lang][(r / 10) % 5];
    r /= 50;
  } while (r > 0);
  return w;
}

}  // namespace mlbench::datasets
