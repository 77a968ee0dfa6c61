// Byte sizes as people write them ("2G", "512M", "1.5GiB", "500MB", "4096"):
// the one parser behind every size flag (the runner's --slot-memory, the
// pipeline's --cache-size).
#pragma once

#include <cstdint>
#include <string_view>

namespace mlbench::core {

// A decimal number (fractions allowed) and an optional unit:
//   none or B          bytes
//   K, M, G, T         powers of 1024 (as free(1) and Slurm's --mem)
//   KiB, MiB, GiB, TiB powers of 1024
//   KB, MB, GB, TB     powers of 1000
// The result is rounded down to whole bytes. Throws std::invalid_argument with
// one line naming the text and what is wrong (not a number, unknown unit,
// negative, too large).
std::uint64_t parse_byte_size(std::string_view text);

}  // namespace mlbench::core
