#include "pipeline/formats/idx.h"

#include <fstream>
#include <iterator>

#include <fmt/format.h>

namespace mlbench::pipeline {

IdxArray parse_idx(const std::vector<std::uint8_t>& bytes, const std::string& name) {
  if (bytes.size() < 4) throw DataError(fmt::format("{}: not an IDX file (only {} bytes)", name, bytes.size()));
  if (bytes[0] != 0 || bytes[1] != 0) {
    if (bytes[0] == 0x1f && bytes[1] == 0x8b) {
      throw DataError(fmt::format("{}: gzip-compressed; gunzip it first (gunzip -k {})", name, name));
    }
    throw DataError(fmt::format("{}: not an IDX file (bad magic {:02x}{:02x})", name, bytes[0], bytes[1]));
  }
  if (bytes[2] != 0x08) {
    throw DataError(fmt::format("{}: IDX data type 0x{:02x} not supported (only unsigned bytes, 0x08)", name, bytes[2]));
  }
  const int ndims = bytes[3];
  if (ndims < 1 || ndims > 4) throw DataError(fmt::format("{}: IDX dimension count {} out of range 1..4", name, ndims));
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(ndims);
  if (bytes.size() < header) throw DataError(fmt::format("{}: truncated IDX header", name));
  IdxArray out;
  std::size_t total = 1;
  for (int d = 0; d < ndims; ++d) {
    const std::uint8_t* p = bytes.data() + 4 + 4 * d;
    const std::uint32_t v = (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
    out.dims.push_back(v);
    total *= v;
  }
  if (bytes.size() - header != total) {
    throw DataError(fmt::format("{}: IDX header promises {} data bytes, file has {}", name, total, bytes.size() - header));
  }
  out.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return out;
}

IdxArray read_idx_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::filesystem::path gz = file;
    gz += ".gz";
    if (std::filesystem::exists(gz)) {
      throw DataError(fmt::format("{}: only the gzip-compressed file exists; gunzip it first (gunzip -k {})",
                                  file.string(), gz.string()));
    }
    throw DataError(fmt::format("{}: cannot open", file.string()));
  }
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_idx(bytes, file.string());
}

MnistSet read_mnist(const std::filesystem::path& dir, const std::string& split) {
  const std::string images_name = split + "-images-idx3-ubyte";
  const std::string labels_name = split + "-labels-idx1-ubyte";
  std::filesystem::path base = dir;
  for (const auto& candidate : {dir, dir / "raw", dir / "MNIST" / "raw"}) {
    if (std::filesystem::exists(candidate / images_name) || std::filesystem::exists(candidate / (images_name + ".gz"))) {
      base = candidate;
      break;
    }
  }
  const IdxArray images = read_idx_file(base / images_name);
  const IdxArray labels = read_idx_file(base / labels_name);
  if (images.dims.size() != 3) {
    throw DataError(fmt::format("{}: expected 3 dimensions (count, rows, cols), found {}",
                                (base / images_name).string(), images.dims.size()));
  }
  if (labels.dims.size() != 1) {
    throw DataError(fmt::format("{}: expected 1 dimension, found {}", (base / labels_name).string(), labels.dims.size()));
  }
  if (images.dims[0] != labels.dims[0]) {
    throw DataError(fmt::format("{}: {} images but {} has {} labels", (base / images_name).string(), images.dims[0],
                                (base / labels_name).string(), labels.dims[0]));
  }
  MnistSet set;
  set.count = images.dims[0];
  set.rows = static_cast<int>(images.dims[1]);
  set.cols = static_cast<int>(images.dims[2]);
  set.pixels = images.data;
  set.labels = labels.data;
  return set;
}

}  // namespace mlbench::pipeline
