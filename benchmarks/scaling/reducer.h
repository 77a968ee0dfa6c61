// Gradient averaging for data-parallel training with c10d, overlapped with the
// backward pass: LibTorch's C++ API has no DistributedDataParallel, so this does
// what its reducer does, in small: parameters are packed into buckets of about
// --bucket-mb (in reverse order, the order backward produces their gradients); a
// hook on each parameter's gradient copies it into its bucket, and the bucket's
// asynchronous allreduce starts as soon as its last gradient arrived, while
// backward goes on with earlier layers. finish() waits for what is still in flight
// (the allreduce time backward did not hide) and writes the averages back.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include <torch/version.h>

// What the collectives are called on: 1.13's ProcessGroupGloo is a c10d::ProcessGroup;
// from 2.0 it is a c10d::Backend (a ProcessGroup dispatches to backends). Both
// have the same allreduce(tensors, options) returning a c10d::Work.
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

namespace mlbench::scaling {

#if TORCH_VERSION_MAJOR >= 2
using Collectives = c10d::Backend;
#else
using Collectives = c10d::ProcessGroup;
#endif

class BucketReducer {
 public:
  BucketReducer(c10::intrusive_ptr<Collectives> pg, std::vector<torch::Tensor> params, std::int64_t bucket_bytes);

  // Call before backward(): arms the buckets for one iteration. Backward passes
  // without it (rank 0's baseline) leave the hooks idle.
  void prepare();
  // Call after backward(): launches buckets that never filled (unused parameters:
  // zeros), waits for every allreduce, averages, and writes the parameters' grads.
  // Returns the seconds it waited (the allreduce time not hidden by backward).
  double finish();

  std::size_t buckets() const { return buckets_.size(); }
  std::int64_t bytes_per_iteration() const { return bytes_; }

 private:
  struct Bucket {
    std::vector<std::size_t> params;  // indices into params_
    std::vector<std::int64_t> offsets;
    torch::Tensor flat;
    int pending = 0;
    bool launched = false;
    c10::intrusive_ptr<c10d::Work> work;
  };
  void on_grad(std::size_t param, const torch::Tensor& grad);
  void launch(Bucket& b);

  c10::intrusive_ptr<Collectives> pg_;
  std::vector<torch::Tensor> params_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;  // by parameter
  std::vector<std::size_t> slot_of_;    // position inside its bucket
  std::int64_t bytes_ = 0;
  bool armed_ = false;
};

}  // namespace mlbench::scaling
