// The error the torch-free dataset readers throw for bad input: one line that
// names the file (and line or byte offset) and the cause.
#pragma once

#include <stdexcept>
#include <string>

namespace mlbench::bench {

class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace mlbench::bench
