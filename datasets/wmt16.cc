// wmt16: a parallel corpus in the layout the translator reads (train.en and
// train.de, one whitespace-tokenised sentence per line, line i of one the
// translation of line i of the other), standing in for WMT16 en-de. Source
// sentences are Zipfian words (exponent 1); each target is a learnable
// "translation": a fixed word-for-word dictionary into another pseudo-language,
// local reordering, and an occasional extra or dropped word. Also writes
// newstest2014.{en,de}. Pairs: tiny 500, small 20000, full 4,500,966 (WMT16 en-de).
#include <random>

#include "datasets/recipe.h"
#include "datasets/zipf.h"

namespace mlbench::datasets {

namespace {

void write_pairs(const std::filesystem::path& dir, const std::string& prefix, long pairs, std::int64_t vocab,
                 std::uint64_t seed, std::uint64_t stream, int threads, bool progress) {
  const ZipfSampler zipf(vocab, 1.0);
  constexpr long kPerChunk = 5000;
  const long chunks = (pairs + kPerChunk - 1) / kPerChunk;
  std::vector<std::string> en(static_cast<std::size_t>(chunks)), de(static_cast<std::size_t>(chunks));
  parallel_for(chunks, threads, progress, "wmt16 " + prefix, [&](long c) {
    std::mt19937_64 rng(item_seed(seed, stream, static_cast<std::uint64_t>(c)));
    const long n = std::min(kPerChunk, pairs - c * kPerChunk);
    for (long i = 0; i < n; ++i) {
      // WMT sentence lengths: mostly 5..40 tokens.
      const int len = 4 + static_cast<int>(rng() % 12) + static_cast<int>(rng() % 12) + static_cast<int>(rng() % 12);
      std::vector<std::int64_t> words(static_cast<std::size_t>(len));
      for (auto& w : words) w = zipf(rng);
      std::string& s = en[static_cast<std::size_t>(c)];
      for (auto w : words) s += pseudo_word(w, 0) + ' ';
      s += ".\n";
      // Target: the dictionary maps rank k to a word of the other language;
      // adjacent pairs swap (verb-final flavour), a few words drop or repeat.
      std::vector<std::int64_t> t = words;
      for (std::size_t k = 0; k + 1 < t.size(); k += 3) std::swap(t[k], t[k + 1]);
      std::string& d = de[static_cast<std::size_t>(c)];
      for (auto w : t) {
        const auto roll = rng() % 20;
        if (roll == 0) continue;
        d += pseudo_word((w * 7919) % vocab, 1) + ' ';
        if (roll == 1) d += pseudo_word((w * 7919 + 1) % vocab, 1) + ' ';
      }
      d += ".\n";
    }
  });
  for (const auto& [lang, parts] : {std::pair{"en", &en}, std::pair{"de", &de}}) {
    const auto file = dir / (prefix + "." + lang);
    core::AtomicFile out(file);
    for (const auto& s : *parts) out.write(s);
    out.commit(kDatasetFileDurability);
  }
}

}  // namespace

Recipe wmt16_recipe() {
  Recipe r;
  r.name = "wmt16";
  r.description =
      "parallel corpus (train.en/train.de + newstest2014) standing in for WMT16 en-de; "
      "pairs tiny 500, small 20000, full 4.5M";
  r.generate = [](const RecipeOptions& o) {
    struct Size {
      long pairs, test;
      std::int64_t vocab;
    };
    const Size n = by_size<Size>(o.size, {500, 100, 1000}, {20000, 1000, 8000}, {4500966, 3003, 32000});
    write_pairs(o.out, "train", n.pairs, n.vocab, o.seed, 1, o.threads, o.show_progress);
    write_pairs(o.out, "newstest2014", n.test, n.vocab, o.seed, 2, o.threads, o.show_progress);
  };
  return r;
}

}  // namespace mlbench::datasets
