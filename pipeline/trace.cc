#include "pipeline/trace.h"

#include <nlohmann/json.hpp>

#include "core/report.h"

namespace mlbench::pipeline {

TraceRecorder::TraceRecorder() : origin_(Clock::now()) {}

double TraceRecorder::to_us(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

void TraceRecorder::Track::span(const char* name, Clock::time_point start, Clock::time_point end, std::int64_t batch,
                                std::int64_t item) {
  events_.push_back({name, std::chrono::duration<double, std::micro>(start - origin_).count(),
                     std::chrono::duration<double, std::micro>(end - start).count(), batch, item});
}

void TraceRecorder::Track::span_us(const char* name, double ts_us, double dur_us, std::int64_t batch,
                                   std::int64_t item) {
  events_.push_back({name, ts_us, dur_us, batch, item});
}

TraceRecorder::Track& TraceRecorder::add_track(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  tracks_.push_back(std::unique_ptr<Track>(new Track(name, static_cast<int>(tracks_.size()) + 1, origin_)));
  return *tracks_.back();
}

nlohmann::json TraceRecorder::to_json() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 0}, {"args", {{"name", "mlbench"}}}});
  for (const auto& t : tracks_) {
    events.push_back(
        {{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", t->tid_}, {"args", {{"name", t->name_}}}});
    events.push_back(
        {{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", 1}, {"tid", t->tid_}, {"args", {{"sort_index", t->tid_}}}});
    for (const TraceEvent& e : t->events_) {
      nlohmann::json ev{{"name", e.name}, {"cat", t->name_ == "consumer" ? "loop" : "pipeline"},
                        {"ph", "X"},      {"ts", e.ts_us},
                        {"dur", e.dur_us}, {"pid", 1},
                        {"tid", t->tid_}};
      nlohmann::json args = nlohmann::json::object();
      if (e.batch >= 0) args["batch"] = e.batch;
      if (e.item >= 0) args["item"] = e.item;
      if (!args.empty()) ev["args"] = args;
      events.push_back(std::move(ev));
    }
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

void TraceRecorder::write(const std::filesystem::path& file) const { core::write_json_atomic(file, to_json()); }

}  // namespace mlbench::pipeline
