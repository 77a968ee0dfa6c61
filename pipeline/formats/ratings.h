// Reader for the MovieLens ml-20m ratings.csv layout ("userId,movieId,rating,
// timestamp", one header line, then one rating per line) for recom. Every
// rating counts as an implicit positive, as in NeuMF; user and movie ids are
// remapped to dense indices 0..n-1 in order of first appearance.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/data_error.h"

namespace mlbench::pipeline {

struct Ratings {
  std::vector<std::int32_t> users;  // dense user index per rating
  std::vector<std::int32_t> items;  // dense item index per rating
  std::int64_t num_users = 0;
  std::int64_t num_items = 0;
};

// Parses CSV text; `name` appears in errors ("<name>:<line>: ..."). The header
// line is optional (recognised by a non-numeric first field); blank lines are
// skipped. A line without four fields, or with a non-integer id, a non-numeric
// rating or a non-integer timestamp, throws DataError.
Ratings parse_ratings_csv(std::string_view text, const std::string& name);
// Reads <path> (a ratings.csv file, or a directory holding one).
Ratings read_ratings(const std::filesystem::path& path);

}  // namespace mlbench::pipeline
