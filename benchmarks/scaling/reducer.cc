#include "reducer.h"

#include <stdexcept>

namespace mlbench::scaling {

BucketReducer::BucketReducer(c10::intrusive_ptr<Collectives> pg, std::vector<torch::Tensor> params,
                             std::int64_t bucket_bytes)
    : pg_(std::move(pg)), params_(std::move(params)), bucket_of_(params_.size()), slot_of_(params_.size()) {
  // Reverse order: the last layers' gradients come first in backward.
  Bucket current;
  std::int64_t current_bytes = 0;
  auto close = [&] {
    if (current.params.empty()) return;
    const std::int64_t n = current.offsets.back() + params_[current.params.back()].numel();
    current.flat = torch::zeros({n}, params_[current.params.front()].options());
    buckets_.push_back(std::move(current));
    current = Bucket{};
    current_bytes = 0;
  };
  for (std::size_t k = params_.size(); k-- > 0;) {
    const torch::Tensor& p = params_[k];
    if (!p.requires_grad()) continue;
    const std::int64_t offset = current.params.empty() ? 0 : current.offsets.back() + params_[current.params.back()].numel();
    bucket_of_[k] = buckets_.size();
    slot_of_[k] = current.params.size();
    current.params.push_back(k);
    current.offsets.push_back(offset);
    current_bytes += p.numel() * static_cast<std::int64_t>(p.element_size());
    bytes_ += p.numel() * static_cast<std::int64_t>(p.element_size());
    if (current_bytes >= bucket_bytes) close();
  }
  close();
  for (std::size_t k = 0; k < params_.size(); ++k) {
    if (!params_[k].requires_grad()) continue;
    params_[k].register_hook([this, k](torch::Tensor grad) {
      on_grad(k, grad);
      return grad;
    });
  }
}

void BucketReducer::prepare() {
  armed_ = true;
  for (Bucket& b : buckets_) {
    b.pending = static_cast<int>(b.params.size());
    b.launched = false;
    b.work.reset();
    b.flat.zero_();
  }
}

void BucketReducer::on_grad(std::size_t param, const torch::Tensor& grad) {
  if (!armed_) return;
  Bucket& b = buckets_[bucket_of_[param]];
  const std::size_t slot = slot_of_[param];
  b.flat.narrow(0, b.offsets[slot], grad.numel()).copy_(grad.reshape({-1}));
  if (--b.pending == 0) launch(b);
}

void BucketReducer::launch(Bucket& b) {
  std::vector<torch::Tensor> tensors{b.flat};
  b.work = pg_->allreduce(tensors);
  b.launched = true;
}

double BucketReducer::finish() {
  armed_ = false;
  const auto t0 = std::chrono::steady_clock::now();
  for (Bucket& b : buckets_) {
    if (!b.launched) launch(b);  // a parameter without a gradient this iteration: its zeros
  }
  for (Bucket& b : buckets_) b.work->wait();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double world = static_cast<double>(pg_->getSize());
  torch::NoGradGuard no_grad;
  for (Bucket& b : buckets_) {
    b.flat.div_(world);
    for (std::size_t s = 0; s < b.params.size(); ++s) {
      torch::Tensor& p = params_[b.params[s]];
      auto avg = b.flat.narrow(0, b.offsets[s], p.numel()).view_as(p);
      if (p.mutable_grad().defined()) {
        p.mutable_grad().copy_(avg);
      } else {
        p.mutable_grad() = avg.clone();
      }
    }
  }
  return waited;
}

}  // namespace mlbench::scaling
