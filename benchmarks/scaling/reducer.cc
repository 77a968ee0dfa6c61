#include "reducer.h"

#include <stdexcept>

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace mlbench::scaling {

BucketReducer::BucketReducer(c10::intrusive_ptr<Collectives> pg, std::vector<torch::Tensor> params,
                             std::int64_t bucket_bytes, std::int64_t first_bucket_bytes)
    : pg_(std::move(pg)),
      params_(std::move(params)),
      bucket_of_(params_.size()),
      slot_of_(params_.size()),
      views_(params_.size()) {
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
    const std::int64_t cap = buckets_.empty() && first_bucket_bytes > 0 ? first_bucket_bytes : bucket_bytes;
    if (current_bytes >= cap) close();
  }
  close();
  // Each parameter's .grad a view of its bucket, and a hook after its accumulation
  // (a hook on the tensor runs before it, on the incoming gradient).
  for (std::size_t k = 0; k < params_.size(); ++k) {
    if (!params_[k].requires_grad()) continue;
    const Bucket& b = buckets_[bucket_of_[k]];
    views_[k] = b.flat.narrow(0, b.offsets[slot_of_[k]], params_[k].numel()).view_as(params_[k]);
    params_[k].mutable_grad() = views_[k];
    auto acc = torch::autograd::impl::grad_accumulator(params_[k]);
    hook_keys_.push_back(acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, k](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          on_ready(k);
          return outputs;
        })));
    accumulators_.push_back(std::move(acc));
  }
}

BucketReducer::~BucketReducer() {
  for (std::size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
}

void BucketReducer::prepare() {
  armed_ = true;
  for (Bucket& b : buckets_) {
    b.pending = static_cast<int>(b.params.size());
    b.launched = false;
    b.work.reset();
    b.flat.zero_();
  }
  // An optimizer's zero_grad(set_to_none) or user code may have replaced a .grad.
  for (std::size_t k = 0; k < params_.size(); ++k) {
    if (!params_[k].requires_grad()) continue;
    const torch::Tensor& g = params_[k].grad();
    if (!g.defined() || g.data_ptr() != views_[k].data_ptr()) params_[k].mutable_grad() = views_[k];
  }
}

double BucketReducer::loss_scale() const { return 1.0 / static_cast<double>(pg_->getSize()); }

void BucketReducer::on_ready(std::size_t param) {
  if (!armed_) return;
  Bucket& b = buckets_[bucket_of_[param]];
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
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace mlbench::scaling
