// ml20m: ratings in MovieLens ml-20m's ratings.csv layout
// ("userId,movieId,rating,timestamp", header line, rows grouped by user in
// time order). Item popularity follows a power law (Zipf exponent 1.1 over
// items, shuffled so popular movies are spread over the id range) and user
// activity another (every user rates at least 20 movies, as in ml-20m).
// Movie ids are sparse like ml-20m's. Full: 138,493 users, 26,744 movies,
// ~20M ratings; small 5000 users / 3000 movies; tiny 100 / 200.
#include <random>
#include <numeric>

#include <fmt/format.h>

#include "datasets/recipe.h"
#include "datasets/zipf.h"

namespace mlbench::datasets {

namespace {

struct RatingsSize {
  std::int64_t users, items;
  double mean_per_user;  // ml-20m: 20,000,263 / 138,493 = 144.4
};

RatingsSize ratings_preset(const std::string& size) {
  return by_size<RatingsSize>(size, {100, 200, 30}, {5000, 3000, 60}, {138493, 26744, 144.4});
}

}  // namespace

Recipe ml20m_recipe() {
  Recipe r;
  r.name = "ml20m";
  r.description =
      "power-law ratings in MovieLens ml-20m's ratings.csv layout; "
      "users x movies tiny 100x200, small 5000x3000, full 138493x26744 (~20M ratings)";
  r.generate = [](const RecipeOptions& o) {
    const auto p = ratings_preset(o.size);
    const ZipfSampler items(p.items, 1.1);
    // Popularity rank -> item index, shuffled once for the seed.
    std::vector<std::int64_t> item_of_rank(static_cast<std::size_t>(p.items));
    std::iota(item_of_rank.begin(), item_of_rank.end(), 0);
    std::mt19937_64 shuffle_rng(item_seed(o.seed, 0, 0));
    std::shuffle(item_of_rank.begin(), item_of_rank.end(), shuffle_rng);
    // Users in chunks, each chunk's text made independently and written in order.
    constexpr std::int64_t kUsersPerChunk = 500;
    const long chunks = static_cast<long>((p.users + kUsersPerChunk - 1) / kUsersPerChunk);
    std::vector<std::string> parts(static_cast<std::size_t>(chunks));
    parallel_for(chunks, o.threads, o.show_progress, "ml20m", [&](long c) {
      std::string& out = parts[static_cast<std::size_t>(c)];
      const std::int64_t first = c * kUsersPerChunk;
      const std::int64_t last = std::min(p.users, first + kUsersPerChunk);
      for (std::int64_t user = first; user < last; ++user) {
        std::mt19937_64 rng(item_seed(o.seed, 1, static_cast<std::uint64_t>(user)));
        // Activity: 20 + a Pareto tail (alpha 1.5) scaled to the preset's mean.
        const double u = std::uniform_real_distribution<double>(1e-9, 1.0)(rng);
        const double tail = (p.mean_per_user - 20.0) / 3.0 * std::pow(u, -1.0 / 1.5);
        const auto count = std::min<std::int64_t>(20 + static_cast<std::int64_t>(tail), p.items);
        std::vector<char> seen(static_cast<std::size_t>(p.items), 0);
        std::int64_t ts = 1000000000 + static_cast<std::int64_t>(rng() % 400000000);
        for (std::int64_t k = 0; k < count;) {
          const auto item = item_of_rank[static_cast<std::size_t>(items(rng))];
          if (seen[static_cast<std::size_t>(item)]) continue;
          seen[static_cast<std::size_t>(item)] = 1;
          ++k;
          const int half_stars = 1 + static_cast<int>(rng() % 10);
          ts += static_cast<std::int64_t>(rng() % 5000);
          out += fmt::format("{},{},{:.1f},{}\n", user + 1, item * 4 + 1 + item % 3, half_stars * 0.5, ts);
        }
      }
    });
    core::AtomicFile out(o.out / "ratings.csv");
    out.write("userId,movieId,rating,timestamp\n");
    for (const auto& s : parts) out.write(s);
    out.commit(kDatasetFileDurability);
  };
  return r;
}

}  // namespace mlbench::datasets
