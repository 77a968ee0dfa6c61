// The parameter count every benchmark reports (metrics.parameters) and the
// model tests check against the published sizes.
#pragma once

#include <cstdint>
#include <set>

#include <torch/torch.h>

namespace mlbench::bench {

// Total number of elements of a module's parameters, shared ones (tied
// weights) counted once; buffers such as BatchNorm running statistics are not
// parameters.
inline std::int64_t parameter_count(const torch::nn::Module& module) {
  std::set<const void*> seen;
  std::int64_t n = 0;
  for (const auto& p : module.parameters()) {
    if (seen.insert(p.unsafeGetTensorImpl()).second) n += p.numel();
  }
  return n;
}

}  // namespace mlbench::bench
