#include "pipeline/formats/text_corpus.h"

#include <algorithm>
#include <fstream>
#include <numeric>

#include <fmt/format.h>

namespace mlbench::pipeline {

std::int32_t Vocabulary::add(std::string_view word) {
  auto it = ids_.find(std::string(word));
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<std::int32_t>(words_.size());
  words_.emplace_back(word);
  ids_.emplace(words_.back(), id);
  return id;
}

std::int32_t Vocabulary::find(std::string_view word) const {
  auto it = ids_.find(std::string(word));
  return it == ids_.end() ? -1 : it->second;
}

bool valid_utf8_text(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0) return false;
    int extra = 0;
    if (c < 0x80) extra = 0;
    else if ((c & 0xE0) == 0xC0 && c >= 0xC2) extra = 1;
    else if ((c & 0xF0) == 0xE0) extra = 2;
    else if ((c & 0xF8) == 0xF0 && c <= 0xF4) extra = 3;
    else return false;
    if (extra > 0 && i + static_cast<std::size_t>(extra) >= s.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += static_cast<std::size_t>(extra) + 1;
  }
  return true;
}

std::vector<std::string_view> split_tokens(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; };
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    std::size_t j = i;
    while (j < line.size() && !is_space(line[j])) ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

namespace {

std::vector<std::string> read_lines(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw DataError(fmt::format("{}: cannot open", file.string()));
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!valid_utf8_text(line)) {
      throw DataError(fmt::format("{}:{}: not valid UTF-8 text (binary data or a NUL byte)", file.string(),
                                  lines.size() + 1));
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace

std::vector<std::int32_t> tokenize_file(const std::filesystem::path& file, Vocabulary& vocab) {
  std::vector<std::int32_t> ids;
  const std::int32_t eos = vocab.add("<eos>");
  for (const auto& line : read_lines(file)) {
    for (auto tok : split_tokens(line)) ids.push_back(vocab.add(tok));
    ids.push_back(eos);
  }
  return ids;
}

WikiTextCorpus read_wikitext(const std::filesystem::path& dir) {
  auto pick = [&](const std::string& split) -> std::filesystem::path {
    for (const auto& name : {split + ".txt", "wiki." + split + ".tokens"}) {
      if (std::filesystem::exists(dir / name)) return dir / name;
    }
    return {};
  };
  WikiTextCorpus corpus;
  corpus.train_file = pick("train");
  if (corpus.train_file.empty()) {
    throw DataError(fmt::format("{}: no train.txt or wiki.train.tokens (wikitext-2 layout expected)", dir.string()));
  }
  corpus.train = tokenize_file(corpus.train_file, corpus.vocab);
  if (auto f = pick("valid"); !f.empty()) corpus.valid = tokenize_file(f, corpus.vocab);
  if (auto f = pick("test"); !f.empty()) corpus.test = tokenize_file(f, corpus.vocab);
  // Only <eos> tokens means the file had no words at all.
  if (corpus.vocab.size() < 2) throw DataError(fmt::format("{}: no words", corpus.train_file.string()));
  return corpus;
}

ParallelCorpus build_parallel_corpus(const std::vector<std::string>& source_lines,
                                     const std::vector<std::string>& target_lines, std::int64_t vocab_size) {
  // Frequency over both sides; the most frequent words (ties: first seen) get ids.
  Vocabulary all;
  std::vector<std::int64_t> counts;
  auto count_line = [&](const std::string& line) {
    for (auto tok : split_tokens(line)) {
      const auto id = all.add(tok);
      if (static_cast<std::size_t>(id) >= counts.size()) counts.push_back(0);
      ++counts[static_cast<std::size_t>(id)];
    }
  };
  for (const auto& l : source_lines) count_line(l);
  for (const auto& l : target_lines) count_line(l);
  std::vector<std::int32_t> order(counts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return counts[a] > counts[b]; });
  ParallelCorpus corpus;
  for (const char* special : {"<pad>", "<unk>", "<s>", "</s>"}) corpus.vocab.add(special);
  const std::int64_t keep = std::max<std::int64_t>(0, vocab_size - 4);
  for (std::size_t i = 0; i < order.size() && static_cast<std::int64_t>(i) < keep; ++i) {
    corpus.vocab.add(all.word(order[i]));
  }
  auto encode = [&](const std::string& line) {
    std::vector<std::int32_t> ids;
    for (auto tok : split_tokens(line)) {
      const auto id = corpus.vocab.find(tok);
      if (id < 0) ++corpus.unknown_tokens;
      ids.push_back(id < 0 ? kUnk : id);
    }
    return ids;
  };
  for (std::size_t i = 0; i < source_lines.size(); ++i) {
    if (split_tokens(source_lines[i]).empty() || split_tokens(target_lines[i]).empty()) {
      ++corpus.skipped_empty;
      continue;
    }
    auto s = encode(source_lines[i]);
    auto t = encode(target_lines[i]);
    corpus.source.push_back(std::move(s));
    corpus.target.push_back(std::move(t));
  }
  return corpus;
}

ParallelCorpus read_parallel_corpus(const std::filesystem::path& dir, const ParallelCorpusOptions& options) {
  const auto src_file = dir / (options.prefix + "." + options.source_lang);
  const auto tgt_file = dir / (options.prefix + "." + options.target_lang);
  auto src = read_lines(src_file);
  auto tgt = read_lines(tgt_file);
  if (src.size() != tgt.size()) {
    throw DataError(fmt::format("{} has {} lines but {} has {}: a parallel corpus needs one sentence per line in both",
                                src_file.string(), src.size(), tgt_file.string(), tgt.size()));
  }
  if (options.max_pairs > 0 && static_cast<std::int64_t>(src.size()) > options.max_pairs) {
    src.resize(static_cast<std::size_t>(options.max_pairs));
    tgt.resize(static_cast<std::size_t>(options.max_pairs));
  }
  auto corpus = build_parallel_corpus(src, tgt, options.vocab_size);
  if (corpus.source.empty()) throw DataError(fmt::format("{}: no non-empty sentence pairs", src_file.string()));
  return corpus;
}

}  // namespace mlbench::pipeline
