#include "benchmarks/support/device_copy.h"

#include <array>
#include <deque>
#include <utility>
#include <optional>
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
  explicit Impl(const torch::Device& d) : device(d), stream(c10::cuda::getStreamFromPool(false, d.index())) {}
  struct InFlight {
    cudaEvent_t done;
    std::vector<torch::Tensor> host;
  };
  struct Staged {
    InFlight copy;
    std::vector<torch::Tensor> out;
  };

  void stage(const std::vector<torch::Tensor>& host, const std::function<void(std::vector<torch::Tensor>&)>& finish) {
    const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device.index());
    Staged s{{events.get(cudaEventDisableTiming), {}}, {}};
    {
      c10::cuda::CUDAStreamGuard on_side(stream);
      for (const auto& t : host) {
        torch::Tensor pinned = t.is_pinned() ? t : t.pin_memory();
        s.out.push_back(pinned.to(device, /*non_blocking=*/true));
        s.copy.host.push_back(std::move(pinned));
      }
      if (finish) finish(s.out);
      check(cudaEventRecord(s.copy.done, stream.stream()), "cudaEventRecord");
    }
    // Made on the side stream, used on the compute stream: the caching allocator
    // must not hand their memory out again before the compute stream is done.
    for (auto& t : s.out) t.record_stream(compute);
    staged = std::move(s);
  }

  std::vector<torch::Tensor> take() {
    Staged s = std::move(*staged);
    staged.reset();
    // Only now: the work the current stream holds before this point does not wait for the copy.
    const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device.index());
    check(cudaStreamWaitEvent(compute.stream(), s.copy.done, 0), "cudaStreamWaitEvent");
    in_flight.push_back(std::move(s.copy));
    return std::move(s.out);
  }

  torch::Device device;
  c10::cuda::CUDAStream stream;
  EventPool events;
  std::deque<InFlight> in_flight;
  std::optional<Staged> staged;
};

bool built_with_cuda() { return true; }

void* current_cuda_stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

struct StreamWorker::Impl {
  explicit Impl(const torch::Device& d) : device(d), stream(c10::cuda::getStreamFromPool(false, d.index())) {}
  torch::Device device;
  c10::cuda::CUDAStream stream;
};
StreamWorker::StreamWorker(torch::Device device) {
  if (device.is_cuda()) impl_ = std::make_unique<Impl>(device);
}
StreamWorker::~StreamWorker() = default;
StreamWorker::Mark StreamWorker::run(const std::function<void()>& f) {
  if (!impl_) {
    f();
    return nullptr;
  }
  c10::cuda::CUDAGuard on_device(impl_->device.index());
  c10::cuda::CUDAStreamGuard on_stream(impl_->stream);
  f();
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  Mark mark(e, [](cudaEvent_t ev) { cudaEventDestroy(ev); });
  check(cudaEventRecord(e, impl_->stream.stream()), "cudaEventRecord");
  return mark;
}
void StreamWorker::wait_for(const Mark& mark) {
  if (!mark) return;
  check(cudaStreamWaitEvent(c10::cuda::getCurrentCUDAStream().stream(), static_cast<cudaEvent_t>(mark.get()), 0),
        "cudaStreamWaitEvent");
}

struct DeviceStopwatch::Impl {
  EventPool pool;
  std::deque<std::pair<cudaEvent_t, cudaEvent_t>> spans;  // stopped, not yet summed
  cudaEvent_t open = nullptr;
  double total = 0;
  void fold(bool wait) {
    while (!spans.empty()) {
      auto [b, e] = spans.front();
      const cudaError_t state = wait ? cudaEventSynchronize(e) : cudaEventQuery(e);
      if (state == cudaErrorNotReady) break;
      check(state, "stopwatch event");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, b, e), "cudaEventElapsedTime");
      total += ms / 1e3;
      pool.put(b);
      pool.put(e);
      spans.pop_front();
    }
  }
};
DeviceStopwatch::DeviceStopwatch() : impl_(std::make_unique<Impl>()) {}
DeviceStopwatch::~DeviceStopwatch() {
  for (auto& [b, e] : impl_->spans) cudaEventSynchronize(e);
  if (impl_->open) cudaEventSynchronize(impl_->open);
}
void DeviceStopwatch::start() {
  impl_->fold(false);
  if (impl_->open) impl_->pool.put(impl_->open);
  impl_->open = impl_->pool.get(cudaEventDefault);
  check(cudaEventRecord(impl_->open, c10::cuda::getCurrentCUDAStream().stream()), "cudaEventRecord");
}
void DeviceStopwatch::stop() {
  if (!impl_->open) return;
  cudaEvent_t e = impl_->pool.get(cudaEventDefault);
  check(cudaEventRecord(e, c10::cuda::getCurrentCUDAStream().stream()), "cudaEventRecord");
  impl_->spans.emplace_back(impl_->open, e);
  impl_->open = nullptr;
}
double DeviceStopwatch::total_s() {
  impl_->fold(true);
  return impl_->total;
}

std::shared_ptr<core::DeviceTimeline> make_cuda_timeline() { return std::make_shared<CudaTimeline>(); }

DeviceCopier::DeviceCopier(torch::Device device) : device_(device) {
  if (device_.is_cuda()) impl_ = std::make_unique<Impl>(device_);
}

DeviceCopier::~DeviceCopier() {
  if (!impl_) return;
  // The host buffers must outlive the copies that read them.
  if (impl_->staged) cudaEventSynchronize(impl_->staged->copy.done);
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

#else  // no CUDA in this LibTorch

struct DeviceCopier::Impl {  // never made: the copier of a CPU build has no device half
  std::optional<std::vector<torch::Tensor>> staged;
  void stage(const std::vector<torch::Tensor>&, const std::function<void(std::vector<torch::Tensor>&)>&) {}
  std::vector<torch::Tensor> take() { return {}; }
};

bool built_with_cuda() { return false; }

void* current_cuda_stream() { return nullptr; }

struct StreamWorker::Impl {};
StreamWorker::StreamWorker(torch::Device) {}
StreamWorker::~StreamWorker() = default;
StreamWorker::Mark StreamWorker::run(const std::function<void()>& f) {
  f();
  return nullptr;
}
void StreamWorker::wait_for(const Mark&) {}

struct DeviceStopwatch::Impl {};
DeviceStopwatch::DeviceStopwatch() = default;
DeviceStopwatch::~DeviceStopwatch() = default;
void DeviceStopwatch::start() {}
void DeviceStopwatch::stop() {}
double DeviceStopwatch::total_s() { return 0; }

std::shared_ptr<core::DeviceTimeline> make_cuda_timeline() { return nullptr; }

DeviceCopier::DeviceCopier(torch::Device device) : device_(device) {
  if (device_.is_cuda()) throw std::invalid_argument("this LibTorch was built without CUDA");
}
DeviceCopier::~DeviceCopier() = default;
void DeviceCopier::release_finished() {}
std::size_t DeviceCopier::in_flight() const { return 0; }

#endif

// Both builds: on a GPU the Impl's side stream, else (the CPU) the host tensors after `finish`.
void DeviceCopier::stage(const std::vector<torch::Tensor>& host,
                         const std::function<void(std::vector<torch::Tensor>&)>& finish) {
  if (staged()) throw std::logic_error("DeviceCopier::stage: a copy is already staged (take() it first)");
  if (impl_) return impl_->stage(host, finish);
  cpu_staged_ = host;
  if (finish) finish(*cpu_staged_);
}

bool DeviceCopier::staged() const { return impl_ ? impl_->staged.has_value() : cpu_staged_.has_value(); }

std::vector<torch::Tensor> DeviceCopier::take() {
  if (!staged()) throw std::logic_error("DeviceCopier::take: no copy is staged");
  if (impl_) return impl_->take();
  std::vector<torch::Tensor> out = std::move(*cpu_staged_);
  cpu_staged_.reset();
  return out;
}

std::vector<torch::Tensor> DeviceCopier::copy(const std::vector<torch::Tensor>& host,
                                              const std::function<void(std::vector<torch::Tensor>&)>& finish) {
  stage(host, finish);
  return take();
}

}  // namespace mlbench::bench
