// The host-to-device side of a batch on a GPU: copies of pinned host tensors on
// a side stream (non_blocking), which the compute stream waits for with an
// event, so the copy of the next batch overlaps whatever the device still runs
// and the step waits only for its own copy; and device phase timing through
// CUDA events (core::DeviceTimeline). Compiled with CUDA only where LibTorch has
// it (MLBENCH_WITH_CUDA); elsewhere the copier hands the host tensors back and
// there is no timeline.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "core/train_loop.h"

namespace mlbench::bench {

// Whether this build has the CUDA paths (LibTorch with CUDA).
bool built_with_cuda();

// Device phase times from CUDA events on the current stream; nullptr without CUDA.
std::shared_ptr<core::DeviceTimeline> make_cuda_timeline();

// The current CUDA stream of the current device, as a cudaStream_t (for
// libraries that take one, e.g. nvJPEG); nullptr in a build without CUDA.
void* current_cuda_stream();

// Device time of spans on the current stream (CUDA events at start() and stop()),
// summed by total_s(), which waits for the marks the device has not reached yet.
// In a build without CUDA, every span is 0.
class DeviceStopwatch {
 public:
  DeviceStopwatch();
  ~DeviceStopwatch();
  DeviceStopwatch(const DeviceStopwatch&) = delete;
  DeviceStopwatch& operator=(const DeviceStopwatch&) = delete;
  void start();
  void stop();
  double total_s();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Work issued from a thread of its own on a CUDA stream of its own (the GPU
// decode's thread, image_stream.cc): run() makes the stream current on the
// calling thread while `f` runs, then marks the end of what `f` enqueued with an
// event; wait_for() makes the current stream wait for such a mark. In a build
// without CUDA, run() only calls `f` and the mark is empty.
class StreamWorker {
 public:
  using Mark = std::shared_ptr<void>;
  explicit StreamWorker(torch::Device device);
  ~StreamWorker();
  StreamWorker(const StreamWorker&) = delete;
  StreamWorker& operator=(const StreamWorker&) = delete;
  Mark run(const std::function<void()>& f);
  static void wait_for(const Mark& mark);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class DeviceCopier {
 public:
  explicit DeviceCopier(torch::Device device);
  ~DeviceCopier();
  DeviceCopier(const DeviceCopier&) = delete;
  DeviceCopier& operator=(const DeviceCopier&) = delete;

  // Lets go of the host tensors whose copies have finished (their pinned
  // buffers go back to the loader's pool); at most `kInFlight` copies stay
  // outstanding (the oldest is waited for). Call before blocking on the loader.
  void release_finished();

  // The tensors on the device. On a GPU: copied on the side stream from pinned
  // memory (pageable tensors are pinned first), then `finish` runs on the side
  // stream (e.g. normalising uint8 images), and the current stream waits for
  // all of it; the host tensors stay alive until the copy has finished. On the
  // CPU: the host tensors, after `finish`. Same as stage() then take().
  std::vector<torch::Tensor> copy(const std::vector<torch::Tensor>& host,
                                  const std::function<void(std::vector<torch::Tensor>&)>& finish = {});

  // One batch ahead: stage() issues the copy (and `finish`) on the side stream
  // now and keeps it; take() hands it out later, and only then makes the
  // current stream wait for it. Staging batch n+1 before batch n's step is
  // enqueued lets the copy run behind that step even when the step ends by
  // reading a value back (a loss scaler's overflow check), which would hold
  // back a copy issued after it. At most one copy is staged (a second stage()
  // is a std::logic_error, as is take() with none).
  void stage(const std::vector<torch::Tensor>& host,
             const std::function<void(std::vector<torch::Tensor>&)>& finish = {});
  bool staged() const;
  std::vector<torch::Tensor> take();

  static constexpr std::size_t kInFlight = 2;
  // Copies handed out by take() whose host tensors are still held (a staged one not counted).
  std::size_t in_flight() const;

 private:
  struct Impl;
  torch::Device device_;
  std::unique_ptr<Impl> impl_;                             // on a GPU
  std::optional<std::vector<torch::Tensor>> cpu_staged_;  // on the CPU: the staged tensors, after `finish`
};

}  // namespace mlbench::bench
