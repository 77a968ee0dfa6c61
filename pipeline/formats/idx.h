// Reader for the IDX format of the MNIST files (LeCun's layout, as torchvision
// keeps them under MNIST/raw/): a big-endian header (two zero bytes, a type
// byte, a dimension count, then one uint32 per dimension) and raw data.
// Only unsigned-byte data (type 0x08), which is what MNIST uses.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/data_error.h"

namespace mlbench::pipeline {

struct IdxArray {
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> data;  // row-major, product(dims) bytes
};

// Parses an IDX byte buffer; `name` appears in errors. Throws DataError.
IdxArray parse_idx(const std::vector<std::uint8_t>& bytes, const std::string& name);
// Reads and parses one IDX file. A ".gz" sibling without the plain file gives
// an error asking to gunzip it.
IdxArray read_idx_file(const std::filesystem::path& file);

struct MnistSet {
  std::int64_t count = 0;
  int rows = 0;
  int cols = 0;
  std::vector<std::uint8_t> pixels;  // count * rows * cols
  std::vector<std::uint8_t> labels;  // count
};

// Reads <dir>/{train,t10k}-images-idx3-ubyte and the matching labels file
// (split "train" or "t10k"), also looked up in <dir>/raw/ and <dir>/MNIST/raw/.
// Checks that images and labels agree in count.
MnistSet read_mnist(const std::filesystem::path& dir, const std::string& split = "train");

}  // namespace mlbench::pipeline
