// Gradient averaging for data-parallel training with c10d, overlapped with the
// backward pass: LibTorch's C++ API has no DistributedDataParallel, so this does
// what its reducer does, in small: parameters are packed into buckets of about
// --bucket-mb (in reverse order, the order backward produces their gradients), and
// each parameter's .grad is a view of its bucket (DDP's gradient_as_bucket_view):
// backward accumulates straight into the bucket, a hook after each parameter's
// accumulation counts it, and the bucket's asynchronous allreduce starts as soon as
// its last gradient arrived, while backward goes on with earlier layers. finish()
// waits for what is still in flight (the allreduce time backward did not hide).
// Nothing is copied in or out and nothing is divided: the caller scales the loss by
// loss_scale() (1 / ranks), so the allreduced sum is the average. Against copying
// each gradient into its bucket and the average back (the first version), that
// saves 6 passes over the gradients an iteration (docs/performance.md, "Scaling").
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
  // Buckets close at bucket_bytes or more; the first (the last layers', whose gradients are ready
  // first) at first_bucket_bytes, so that its allreduce starts early (DDP: 1 MiB, then 25 MiB).
  // Its default, bucket_bytes: every bucket alike.
  BucketReducer(c10::intrusive_ptr<Collectives> pg, std::vector<torch::Tensor> params, std::int64_t bucket_bytes,
                std::int64_t first_bucket_bytes = 0);
  // Takes its hooks off the parameters' accumulators.
  ~BucketReducer();
  BucketReducer(const BucketReducer&) = delete;
  BucketReducer& operator=(const BucketReducer&) = delete;

  // Call before backward() (in place of the optimizer's zero_grad): zeroes the
  // buckets, and with them every parameter's .grad, which it points back at its
  // bucket where something replaced it; arms the hooks for one iteration. Backward
  // passes without it leave the hooks idle.
  void prepare();
  // What the loss is multiplied by before backward(): 1 / ranks.
  double loss_scale() const;
  // Call after backward(): launches buckets that never filled (unused parameters:
  // zeros), waits for every allreduce; the parameters' grads then hold the average.
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
  void on_ready(std::size_t param);
  void launch(Bucket& b);

  c10::intrusive_ptr<Collectives> pg_;
  std::vector<torch::Tensor> params_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;  // by parameter
  std::vector<std::size_t> slot_of_;    // position inside its bucket
  std::vector<torch::Tensor> views_;    // by parameter: its .grad, a view of its bucket (made once)
  std::int64_t bytes_ = 0;
  bool armed_ = false;
  // The parameters' AccumulateGrad nodes, which carry the hooks: a leaf holds its
  // own only weakly.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<std::uintptr_t> hook_keys_;
};

}  // namespace mlbench::scaling
