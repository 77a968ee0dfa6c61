#include "pipeline/torch_adapter.h"

namespace mlbench::pipeline {

HostAllocator torch_host_allocator() {
  if (!torch::cuda::is_available()) return default_host_allocator;
  return [](std::size_t bytes) {
    auto t = std::make_shared<torch::Tensor>(
        torch::empty({static_cast<std::int64_t>(bytes)}, torch::TensorOptions().dtype(torch::kUInt8).pinned_memory(true)));
    return HostBuffer{t->data_ptr(), bytes, std::shared_ptr<void>(t, t.get())};
  };
}

BatchTensors to_tensors(const Batch& b) {
  const auto dtype = b.type == OutputType::Float32 ? torch::kFloat32 : torch::kUInt8;
  auto owner = b.data.owner;
  auto data = torch::from_blob(
      b.data.data, {b.size, b.channels, b.height, b.width}, [owner](void*) mutable { owner.reset(); },
      torch::TensorOptions().dtype(dtype));
  auto labels = torch::from_blob(const_cast<std::int64_t*>(b.labels.data()), {b.size}, torch::kInt64).clone();
  return {data, labels};
}

}  // namespace mlbench::pipeline
