// The one error for a user's data problem, thrown by every reader of the
// pipeline (ImageFolder, IDX, ratings CSV, corpora, COCO annotations): one line
// that names the file (and line or byte offset) and the cause.
#pragma once

#include <stdexcept>

namespace mlbench::pipeline {

class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace mlbench::pipeline
