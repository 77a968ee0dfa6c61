// --trace FILE: a Chrome trace-event JSON (open it in Perfetto or
// chrome://tracing). One track per pipeline worker thread (spans "fetch",
// "decode", "augment" per sample, "collate" per batch) and one consumer track
// (spans "wait", "h2d", "compute" per iteration). Each thread appends to its
// own buffer without locks; the file is written once, atomically, at the end.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mlbench::pipeline {

struct TraceEvent {
  const char* name;          // a string literal: "fetch", "decode", ...
  double ts_us;              // start, microseconds since the recorder's origin
  double dur_us;
  std::int64_t batch = -1;   // args.batch (sequence number over the run)
  std::int64_t item = -1;    // args.item (dataset index)
};

class TraceRecorder {
 public:
  using Clock = std::chrono::steady_clock;
  TraceRecorder();

  class Track {
   public:
    void span(const char* name, Clock::time_point start, Clock::time_point end, std::int64_t batch = -1,
              std::int64_t item = -1);
    void span_us(const char* name, double ts_us, double dur_us, std::int64_t batch = -1, std::int64_t item = -1);

   private:
    friend class TraceRecorder;
    Track(std::string name, int tid, Clock::time_point origin) : name_(std::move(name)), tid_(tid), origin_(origin) {}
    std::string name_;
    int tid_;
    Clock::time_point origin_;
    std::vector<TraceEvent> events_;
  };

  // A new track (thread-safe); use it from one thread only.
  Track& add_track(const std::string& name);
  double to_us(Clock::time_point t) const;

  // {"traceEvents": [...], "displayTimeUnit": "ms"}
  nlohmann::json to_json() const;
  void write(const std::filesystem::path& file) const;

 private:
  Clock::time_point origin_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Track>> tracks_;
};

}  // namespace mlbench::pipeline
