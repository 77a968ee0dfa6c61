// Whitespace-tokenised text for the language-model and translation benchmarks:
// a vocabulary, the wikitext-2 layout (train/valid/test files, one line per
// paragraph, "<eos>" appended to every line as the PyTorch word_language_model
// example does) and the parallel corpus of the translator (two files, one
// sentence per line). Plain C++ so the readers are unit-tested without LibTorch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pipeline/data_error.h"

namespace mlbench::pipeline {

class Vocabulary {
 public:
  // Id of `word`, added when new.
  std::int32_t add(std::string_view word);
  // Id of `word`, or -1 when absent.
  std::int32_t find(std::string_view word) const;
  const std::string& word(std::int32_t id) const { return words_.at(static_cast<std::size_t>(id)); }
  std::int64_t size() const { return static_cast<std::int64_t>(words_.size()); }

 private:
  std::unordered_map<std::string, std::int32_t> ids_;
  std::vector<std::string> words_;
};

// Whether `s` is well-formed UTF-8 without NUL bytes.
bool valid_utf8_text(std::string_view s);
// The whitespace-separated tokens of a line.
std::vector<std::string_view> split_tokens(std::string_view line);

// Tokenises a text file into ids, adding words to `vocab` and "<eos>" after
// every line (empty lines included, as the PyTorch example). A line that is not
// valid UTF-8 or holds a NUL byte throws DataError "<file>:<line>: ...".
std::vector<std::int32_t> tokenize_file(const std::filesystem::path& file, Vocabulary& vocab);

struct WikiTextCorpus {
  Vocabulary vocab;  // over train, valid and test, as the PyTorch example builds it
  std::vector<std::int32_t> train, valid, test;
  std::filesystem::path train_file;
};

// Reads a wikitext-2 style directory: train.txt/valid.txt/test.txt (PyTorch
// example) or wiki.train.tokens/wiki.valid.tokens/wiki.test.tokens (the
// original archive). The train file is required; valid/test are optional.
WikiTextCorpus read_wikitext(const std::filesystem::path& dir);

// Translator data: a directory holding <prefix>.<src> and <prefix>.<tgt>.
struct ParallelCorpus {
  // Shared vocabulary (GNMT shares it between languages); ids 0..3 are
  // <pad>, <unk>, <s>, </s>.
  Vocabulary vocab;
  std::vector<std::vector<std::int32_t>> source, target;
  std::int64_t skipped_empty = 0;  // pairs with an empty side, counted and skipped
  std::int64_t unknown_tokens = 0; // tokens beyond the vocabulary cap, mapped to <unk>
};

inline constexpr std::int32_t kPad = 0, kUnk = 1, kBos = 2, kEos = 3;

struct ParallelCorpusOptions {
  std::string prefix = "train";
  std::string source_lang = "en";
  std::string target_lang = "de";
  std::int64_t vocab_size = 32000;  // cap, most frequent words kept (ties by first appearance)
  std::int64_t max_pairs = 0;       // 0 = all
};

// Reads the two files line by line. Different line counts throw DataError
// naming both files; invalid UTF-8 throws "<file>:<line>: ...".
ParallelCorpus read_parallel_corpus(const std::filesystem::path& dir, const ParallelCorpusOptions& options);

// Pure part of the above, for tests: builds the corpus from the lines.
ParallelCorpus build_parallel_corpus(const std::vector<std::string>& source_lines,
                                     const std::vector<std::string>& target_lines, std::int64_t vocab_size);

}  // namespace mlbench::pipeline
