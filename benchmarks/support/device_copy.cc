#include "benchmarks/support/device_copy.h"

#include <array>
#include <deque>
#include <stdexcept>
#include <string>

#ifdef MLBENCH_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace mlbench::bench {

#ifdef MLBENCH_WITH_CUDA

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Events made once and reused: creating one per mark would cost more than recording it.
class EventPool {
 public:
  EventPool() = default;
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  ~EventPool() {
    for (cudaEvent_t e : all_) cudaEventDestroy(e);
  }
  cudaEvent_t get(unsigned flags) {
    if (!free_.empty()) {
      cudaEvent_t e = free_.back();
      free_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, flags), "cudaEventCreate");
    all_.push_back(e);
    return e;
  }
  void put(cudaEvent_t e) { free_.push_back(e); }

 private:
  std::vector<cudaEvent_t> all_, free_;
};

class CudaTimeline : public core::DeviceTimeline {
 public:
  void begin(core::PhaseKind p) override { record(2 * static_cast<int>(p)); }
  void end(core::PhaseKind p) override { record(2 * static_cast<int>(p) + 1); }
  void end_iteration() override {
    iterations_.push_back(current_);
    current_.fill(nullptr);
  }
  std::vector<std::array<double, 3>> take() override {
    std::vector<std::array<double, 3>> out;
    out.reserve(iterations_.size());
    for (const auto& marks : iterations_) {
      std::array<double, 3> phases{};
      for (int k = 0; k < 3; ++k) {
        cudaEvent_t b = marks[2 * k], e = marks[2 * k + 1];
        if (!b || !e) continue;
        float ms = 0;
        check(cudaEventElapsedTime(&ms, b, e), "cudaEventElapsedTime");
        phases[k] = ms / 1e3;
      }
      out.push_back(phases);
      for (cudaEvent_t ev : marks) {
        if (ev) pool_.put(ev);
      }
    }
    iterations_.clear();
    return out;
  }

 private:
  void record(int slot) {
    cudaEvent_t e = pool_.get(cudaEventDefault);  // timing enabled
    check(cudaEventRecord(e, c10::cuda::getCurrentCUDAStream().stream()), "cudaEventRecord");
    if (current_[slot]) pool_.put(current_[slot]);  // a phase entered twice: its last marks count
    current_[slot] = e;
  }

  EventPool pool_;
  std::array<cudaEvent_t, 6> current_{};
  std::vector<std::array<cudaEvent_t, 6>> iterations_;
};

}  // namespace

struct DeviceCopier::Impl {
  explicit Impl(const torch::Device& d) : stream(c10::cuda::getStreamFromPool(false, d.index())) {}
  struct InFlight {
    cudaEvent_t done;
    std::vector<torch::Tensor> host;
  };
  c10::cuda::CUDAStream stream;
  EventPool events;
  std::deque<InFlight> in_flight;
};

bool built_with_cuda() { return true; }

std::shared_ptr<core::DeviceTimeline> make_cuda_timeline() { return std::make_shared<CudaTimeline>(); }

DeviceCopier::DeviceCopier(torch::Device device) : device_(device) {
  if (device_.is_cuda()) impl_ = std::make_unique<Impl>(device_);
}

DeviceCopier::~DeviceCopier() {
  if (!impl_) return;
  // The host buffers must outlive the copies that read them.
  for (auto& f : impl_->in_flight) cudaEventSynchronize(f.done);
}

void DeviceCopier::release_finished() {
  if (!impl_) return;
  auto& q = impl_->in_flight;
  while (!q.empty()) {
    const bool too_many = q.size() > kInFlight;
    const cudaError_t state = too_many ? cudaEventSynchronize(q.front().done) : cudaEventQuery(q.front().done);
    if (state == cudaErrorNotReady) break;
    check(state, "copy event");
    impl_->events.put(q.front().done);
    q.pop_front();
  }
}

std::size_t DeviceCopier::in_flight() const { return impl_ ? impl_->in_flight.size() : 0; }

std::vector<torch::Tensor> DeviceCopier::copy(const std::vector<torch::Tensor>& host,
                                              const std::function<void(std::vector<torch::Tensor>&)>& finish) {
  if (!impl_) {
    std::vector<torch::Tensor> out = host;
    if (finish) finish(out);
    return out;
  }
  const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device_.index());
  Impl::InFlight f{impl_->events.get(cudaEventDisableTiming), {}};
  std::vector<torch::Tensor> out;
  {
    c10::cuda::CUDAStreamGuard on_side(impl_->stream);
    for (const auto& t : host) {
      torch::Tensor pinned = t.is_pinned() ? t : t.pin_memory();
      out.push_back(pinned.to(device_, /*non_blocking=*/true));
      f.host.push_back(std::move(pinned));
    }
    if (finish) finish(out);
    check(cudaEventRecord(f.done, impl_->stream.stream()), "cudaEventRecord");
  }
  check(cudaStreamWaitEvent(compute.stream(), f.done, 0), "cudaStreamWaitEvent");
  // Made on the side stream, used on the compute stream: the caching allocator
  // must not hand their memory out again before the compute stream is done.
  for (auto& t : out) t.record_stream(compute);
  impl_->in_flight.push_back(std::move(f));
  return out;
}

#else  // no CUDA in this LibTorch

struct DeviceCopier::Impl {};

bool built_with_cuda() { return false; }

std::shared_ptr<core::DeviceTimeline> make_cuda_timeline() { return nullptr; }

DeviceCopier::DeviceCopier(torch::Device device) : device_(device) {
  if (device_.is_cuda()) throw std::invalid_argument("this LibTorch was built without CUDA");
}
DeviceCopier::~DeviceCopier() = default;
void DeviceCopier::release_finished() {}
std::size_t DeviceCopier::in_flight() const { return 0; }

std::vector<torch::Tensor> DeviceCopier::copy(const std::vector<torch::Tensor>& host,
                                              const std::function<void(std::vector<torch::Tensor>&)>& finish) {
  std::vector<torch::Tensor> out = host;
  if (finish) finish(out);
  return out;
}

#endif

}  // namespace mlbench::bench
