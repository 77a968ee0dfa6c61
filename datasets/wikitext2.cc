// wikitext2: a stand-in for WikiText-2 in its layout (train.txt, valid.txt,
// test.txt: one paragraph per line, whitespace-tokenised, " = Heading = "
// lines and empty lines between articles, "<unk>" for rare words). Words are
// drawn from a Zipfian distribution (exponent 1) over a vocabulary of the same
// size; full has WikiText-2's token counts (2,088,628 / 217,646 / 245,569).
#include <random>

#include <fmt/format.h>

#include "datasets/recipe.h"
#include "datasets/zipf.h"

namespace mlbench::datasets {

namespace {

struct WikiTextSize {
  std::int64_t vocab;
  std::int64_t train, valid, test;  // tokens (without <eos>)
};

WikiTextSize wikitext_preset(const std::string& size) {
  return by_size<WikiTextSize>(size, {500, 20000, 2000, 2000}, {10000, 300000, 30000, 30000},
                               {33278, 2088628, 217646, 245569});
}

// One article: a heading, then paragraphs of 20..180 tokens, each line followed
// by an empty line as in WikiText's files. Returns the tokens written.
std::int64_t write_article(std::string& out, std::mt19937_64& rng, const ZipfSampler& zipf, std::int64_t budget) {
  auto word = [&] {
    const auto k = zipf(rng);
    return k == 0 ? std::string("<unk>") : k < 10 ? std::string(1, ",.;:()'\"-@"[k]) : pseudo_word(k);
  };
  std::int64_t used = 0;
  const std::string title = pseudo_word(zipf(rng) + 100) + " " + pseudo_word(zipf(rng) + 100);
  out += " = " + title + " = \n \n";
  used += 4;
  const int paragraphs = 1 + static_cast<int>(rng() % 6);
  for (int p = 0; p < paragraphs && used < budget; ++p) {
    const std::int64_t len = std::min<std::int64_t>(20 + static_cast<std::int64_t>(rng() % 160), budget - used);
    out += ' ';
    for (std::int64_t i = 0; i < len; ++i) out += word() + ' ';
    out += "\n \n";
    used += len;
  }
  return used;
}

void write_split(const std::filesystem::path& file, std::int64_t tokens, const ZipfSampler& zipf, std::uint64_t seed,
                 std::uint64_t stream, int threads, bool progress) {
  // Articles are generated in independent chunks (item_seed per chunk), then
  // concatenated in order, so the bytes do not depend on the thread count.
  constexpr std::int64_t kChunkTokens = 20000;
  const long chunks = static_cast<long>((tokens + kChunkTokens - 1) / kChunkTokens);
  std::vector<std::string> parts(static_cast<std::size_t>(chunks));
  parallel_for(chunks, threads, progress, "wikitext2 " + file.filename().string(), [&](long c) {
    std::mt19937_64 rng(item_seed(seed, stream, static_cast<std::uint64_t>(c)));
    const std::int64_t budget = std::min<std::int64_t>(kChunkTokens, tokens - c * kChunkTokens);
    std::int64_t used = 0;
    while (used < budget) used += write_article(parts[static_cast<std::size_t>(c)], rng, zipf, budget - used);
  });
  core::AtomicFile out(file);
  for (const auto& p : parts) out.write(p);
  out.commit(kDatasetFileDurability);
}

}  // namespace

Recipe wikitext2_recipe() {
  Recipe r;
  r.name = "wikitext2";
  r.description =
      "Zipfian word corpus in the WikiText-2 layout (train.txt, valid.txt, test.txt); "
      "tokens tiny 20k, small 300k, full 2.09M (WikiText-2's counts)";
  r.generate = [](const RecipeOptions& o) {
    const auto p = wikitext_preset(o.size);
    const ZipfSampler zipf(p.vocab, 1.0);
    write_split(o.out / "train.txt", p.train, zipf, o.seed, 1, o.threads, o.show_progress);
    write_split(o.out / "valid.txt", p.valid, zipf, o.seed, 2, o.threads, o.show_progress);
    write_split(o.out / "test.txt", p.test, zipf, o.seed, 3, o.threads, o.show_progress);
  };
  return r;
}

}  // namespace mlbench::datasets
