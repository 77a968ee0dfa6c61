// Reading an instance report into its typed record (see instance_report.h). Each block is read by
// a Fields cursor that knows its path in the report, so a wrong type is one error naming the field.
#include "core/instance_report.h"

#include <fstream>

#include <fmt/format.h>

#include "core/json_fields.h"

namespace mlbench::core {
namespace {

using json = nlohmann::json;
using json_fields::Fields;
using json_fields::wrong_type;

// The interference block's figures, read and written by the same table.
constexpr std::pair<const char*, std::optional<double> InterferenceInfo::*> kInterferenceFigures[] = {
    {"other_cpu_pct", &InterferenceInfo::other_cpu_pct},
    {"other_cpu_s", &InterferenceInfo::other_cpu_s},
    {"own_cpu_s", &InterferenceInfo::own_cpu_s},
    {"steal_pct", &InterferenceInfo::steal_pct},
    {"wall_s", &InterferenceInfo::wall_s},
    {"loadavg_start", &InterferenceInfo::loadavg_start},
    {"loadavg_end", &InterferenceInfo::loadavg_end},
    {"probe_before_s", &InterferenceInfo::probe_before_s},
    {"probe_after_s", &InterferenceInfo::probe_after_s},
    {"probe_drift_pct", &InterferenceInfo::probe_drift_pct},
    {"probe_before_wall_s", &InterferenceInfo::probe_before_wall_s},
    {"probe_after_wall_s", &InterferenceInfo::probe_after_wall_s},
    {"parallel_probe_before_s", &InterferenceInfo::parallel_probe_before_s},
    {"parallel_probe_after_s", &InterferenceInfo::parallel_probe_after_s}};

// process_cpu's figures, likewise.
constexpr std::pair<const char*, std::optional<double> ProcessCpuBlock::*> kProcessCpuFigures[] = {
    {"user_s", &ProcessCpuBlock::user_s},
    {"sys_s", &ProcessCpuBlock::sys_s},
    {"wall_s", &ProcessCpuBlock::wall_s},
    {"busy_cpus", &ProcessCpuBlock::busy_cpus},
    {"per_item_us", &ProcessCpuBlock::per_item_us},
    {"host_busy_cpus", &ProcessCpuBlock::host_busy_cpus}};

// stability's figures, likewise.
constexpr std::pair<const char*, std::optional<double> StabilityInfo::*> kStabilityFigures[] = {
    {"sd_pct", &StabilityInfo::sd_pct},       {"min_s", &StabilityInfo::min_s},
    {"max_s", &StabilityInfo::max_s},         {"median_s", &StabilityInfo::median_s},
    {"trend_pct", &StabilityInfo::trend_pct}, {"rho", &StabilityInfo::rho}};

void read_stats(const Fields& f, Stats& s) {
  f.number("avg", s.avg);
  f.number("min", s.min);
  f.number("max", s.max);
  f.number("sd", s.sd);
  f.integer("count", s.count);
  f.text("unit", s.unit);
}

void read_losses(const Fields& f, const char* key, std::vector<std::optional<double>>& out) {
  f.array(key, [&](const json& v, const std::string& path) {
    if (v.is_null()) {
      out.emplace_back();
    } else if (v.is_number()) {
      out.emplace_back(v.get<double>());
    } else {
      throw wrong_type(path, v, "a number or null");
    }
  });
}

void read_machine(const Fields& f, MachineInfo& m) {
  for (auto [key, out] : {std::pair{"hostname", &m.hostname},
                          {"cpu_model", &m.cpu_model},
                          {"kernel", &m.kernel},
                          {"cgroup_mode", &m.cgroup_mode},
                          {"affinity", &m.affinity},
                          {"framework", &m.framework},
                          {"framework_version", &m.framework_version}}) {
    f.text(key, *out);
  }
  f.integer("logical_cores", m.logical_cores);
  f.integer("physical_cores", m.physical_cores);
  f.integer("memory_bytes", m.memory_bytes);
  f.flag("cuda_available", m.cuda_available);
  f.array("gpus", [&](const json& v, const std::string& path) {
    if (!v.is_string()) throw wrong_type(path, v, "a string");
    m.gpus.push_back(v.get<std::string>());
  });
  f.block("blas", m.blas, [](const Fields& b, BlasBlock& blas) {
    b.text("name", blas.name);
    b.text("library", blas.library);
    b.text("backend", blas.backend);
    b.integer("threads", blas.threads);
  });
}

void read_stall(const Fields& f, StallPhases& s) {
  f.block("wait", s.wait, read_stats);
  f.block("h2d", s.h2d, read_stats);
  f.block("compute", s.compute, read_stats);
  f.block("iteration", s.iteration, read_stats);
  f.number("stall_pct", s.stall_pct);
  f.integer("warmup_iterations", s.warmup_iterations);
  f.text("phase_clock", s.phase_clock);
}

void read_interference(const Fields& f, InterferenceInfo& i) {
  for (const auto& [key, member] : kInterferenceFigures) f.number(key, i.*member);
  f.array("slot_cpus", [&](const json& v, const std::string& path) {
    if (!v.is_number_integer()) {
      throw wrong_type(path, v, "an integer");
    }
    i.slot_cpus.push_back(v.get<std::int64_t>());
  });
}

void read_runner(const Fields& f, RunnerInfo& r) {
  for (auto [key, out] :
       {std::pair{"command", &r.command}, {"cpus", &r.cpus}, {"job", &r.job}, {"log", &r.log}, {"sweep", &r.sweep}}) {
    f.text(key, *out);
  }
  f.integer("exit_code", r.exit_code);
  f.integer("signal", r.signal);
  f.integer("memory_limit_bytes", r.memory_limit_bytes);
  f.integer("slot", r.slot);
  f.integer("point", r.point);
  f.number("wall_seconds", r.wall_seconds);
  f.text("slurm_state", r.slurm_state);
  f.text("run_id", r.run_id);
}

void read_partitioned_cache(const Fields& f, PartitionedCacheInfo& c) {
  f.integer("max_ids_per_request", c.max_ids_per_request);
  if (const auto p = f.sub("peer")) {
    p->number("requests", c.peer_requests);
    for (const char* key : {"cache_items", "storage_items", "misses"}) {
      double n = 0;
      p->number(key, n);
      c.peer_items += n;
    }
  }
}

void read_pipeline(const Fields& f, PipelineInfo& p) {
  p.raw = f.object();
  f.text("source", p.source);
  f.text("root", p.root);
  f.text("output", p.output);
  f.integer("bytes_read", p.bytes_read);
  f.integer("corrupt_samples", p.corrupt_samples);
  // atari's reports before its worker count said "processes" here: they read with no count.
  if (const json* w = f.find("workers"); !w || !w->is_string()) f.integer("workers", p.workers);
  f.integer("prefetch", p.prefetch);
  f.integer("image_size", p.image_size);
  f.number("consumer_wait_total_s", p.consumer_wait_total_s);
  f.integer("io_depth", p.io_depth);
  f.flag("pin_memory", p.pin_memory);
  if (const auto ra = f.sub("read_ahead")) {
    ra->integer("window_per_worker", p.read_ahead_window);
    ra->number("per_read_ms", p.read_ahead_per_read_ms);
    ra->number("cpu_per_read_us", p.read_ahead_cpu_per_read_us);
    ra->number("queue_wait_ms", p.read_ahead_queue_wait_ms);
    ra->number("item_wait_ms", p.read_ahead_item_wait_ms);
    ra->number("wake_ms", p.read_ahead_wake_ms);
    ra->number("takes_waited", p.read_ahead_takes_waited);
  }
  if (const auto detail = f.sub("source_detail")) {
    detail->number("requests", p.source_requests);
    detail->number("transfer_cpu_s", p.source_transfer_cpu_s);
  }
  if (const auto cache = f.sub("cache")) cache->number("items", p.cache_items);
  // epochs: the image loader's per-epoch totals, or the in-memory sources' count of epochs begun.
  if (const json* e = f.find("epochs"); e && e->is_number_integer()) {
    p.epoch_count = e->get<std::int64_t>();
  } else {
    bool rated = true;
    f.objects("epochs", [&](const Fields& epoch) {
      double images = 0;
      std::optional<double> rate;
      epoch.number("images", images);
      epoch.number("images_per_s", rate);
      p.epoch_images.push_back(images);
      if (rate) p.epoch_rates.push_back(*rate);
      rated = rated && rate.has_value();
    });
    if (!rated) p.epoch_rates.clear();
  }
  p.has_partitioned_cache_field = f.object().contains("partitioned_cache");
  p.emulated_storage = f.object().contains("emulated_storage");
  f.block("partitioned_cache", p.partitioned_cache, read_partitioned_cache);
  f.members("stages", [&](const std::string& name, const Fields& s) {
    StageTotals t;
    s.number("busy_s", t.busy_s);
    s.number("per_item_ms", t.per_item_ms);
    s.integer("items", t.items);
    p.stages[name] = t;
  });
}

void read_blocks(const Fields& f, InstanceReport& r) {
  f.block("version", r.version, [](const Fields& v, VersionInfo& version) {
    v.text("mlbench", version.mlbench);
    v.text("git", version.git);
    v.text("source", version.source);
  });
  f.block("machine", r.machine, read_machine);
  f.block("train", r.train, read_stats);
  f.block("train_item", r.train_item, [](const Fields& t, TrainItem& item) {
    item.avg_written = t.object().contains("avg");
    t.number("avg", item.avg);
    t.number("min", item.min);
    t.number("max", item.max);
    t.number("range", item.range);
    t.text("unit", item.unit);
  });
  f.block("stall", r.stall, read_stall);
  f.block("process_cpu", r.process_cpu, [](const Fields& c, ProcessCpuBlock& cpu) {
    for (const auto& [key, member] : kProcessCpuFigures) c.number(key, cpu.*member);
  });
  f.block("pipeline", r.pipeline, read_pipeline);
  f.block("stability", r.stability, [](const Fields& s, StabilityInfo& st) {
    s.integer("observations", st.observations);
    for (const auto& [key, member] : kStabilityFigures) s.number(key, st.*member);
    s.flag("warmup_trending", st.warmup_trending);
    s.flag("short_observations", st.short_observations);
  });
  f.block("calibration", r.calibration, [](const Fields& c, CalibrationInfo& cal) {
    c.integer("number", cal.number);
    c.integer("probe_iterations", cal.probe_iterations);
    c.integer("refinements", cal.refinements);
    c.number("seconds_per_iteration", cal.seconds_per_iteration);
    c.number("target_s", cal.target_s);
  });
  f.block("interference", r.interference, read_interference);
  f.block("resources", r.resources, [](const Fields& s, ResourcesInfo& res) {
    s.text("source", res.source);
    s.number("cpu_seconds", res.cpu_seconds);
    s.integer("memory_peak_bytes", res.memory_peak_bytes);
    s.integer("bytes_read", res.bytes_read);
    s.integer("oom_kills", res.oom_kills);
  });
  f.block("runner", r.runner, read_runner);
  f.block("gpu_monitor", r.gpu_monitor, [](const Fields& g, GpuMonitorInfo& mon) {
    mon.raw = g.object();
    g.number("interval_s", mon.interval_s);
    g.text("device", mon.device);
    if (const json* summary = g.find("summary"); summary && summary->is_object()) {
      const Fields s(*summary, g.at("summary"));
      if (const auto u = s.sub("util_pct")) {
        u->number("mean", mon.util_pct_mean);
        u->number("max", mon.util_pct_max);
      }
    }
  });
}

// --- Writing ---

template <class T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json();
}

json stats_json(const Stats& s) {
  return {{"avg", or_null(s.avg)}, {"min", or_null(s.min)}, {"max", or_null(s.max)},
          {"sd", or_null(s.sd)},   {"count", s.count},      {"unit", s.unit}};
}

json block_or_null(const std::optional<Stats>& s) {
  return s ? stats_json(*s) : json();
}

json stall_json(const StallPhases& s) {
  json j = {{"wait", block_or_null(s.wait)},       {"h2d", block_or_null(s.h2d)},
            {"compute", block_or_null(s.compute)}, {"iteration", block_or_null(s.iteration)},
            {"stall_pct", or_null(s.stall_pct)},   {"warmup_iterations", s.warmup_iterations}};
  if (!s.phase_clock.empty()) j["phase_clock"] = s.phase_clock;
  return j;
}

json interference_json(const InterferenceInfo& i) {
  json j = {{"slot_cpus", i.slot_cpus}};
  for (const auto& [key, member] : kInterferenceFigures) j[key] = or_null(i.*member);
  return j;
}

json runner_json(const RunnerInfo& r) {
  json j = {{"job", r.job},
            {"point", or_null(r.point)},
            {"sweep", r.sweep},
            {"slot", r.slot},
            {"cpus", r.cpus},
            {"memory_limit_bytes", or_null(r.memory_limit_bytes)},
            {"command", r.command},
            {"log", r.log},
            {"wall_seconds", or_null(r.wall_seconds)},
            {"exit_code", or_null(r.exit_code)},
            {"signal", or_null(r.signal)}};
  if (r.slurm_state) j["slurm_state"] = *r.slurm_state;
  if (r.run_id) j["run_id"] = *r.run_id;
  return j;
}

json resources_json(const ResourcesInfo& r) {
  json j = {{"cpu_seconds", or_null(r.cpu_seconds)},
            {"memory_peak_bytes", or_null(r.memory_peak_bytes)},
            {"bytes_read", or_null(r.bytes_read)},
            {"oom_kills", or_null(r.oom_kills)}};
  if (!r.source.empty()) j["source"] = r.source;
  return j;
}

json gpu_monitor_json(const GpuMonitorInfo& g) {
  if (g.raw.is_object()) return g.raw;
  return {{"interval_s", g.interval_s},
          {"device", g.device},
          {"summary", {{"util_pct", {{"mean", or_null(g.util_pct_mean)}, {"max", or_null(g.util_pct_max)}}}}}};
}

// The blocks: each typed block over the block `out` has under its key (kept where it is an object).
void write_blocks(const InstanceReport& r, json& out) {
  const auto put = [&](const char* key, const auto& block, const auto& write) {
    if (!block) return;  // as `out` has it: null, absent, or a block kept as written
    json j = out.contains(key) && out[key].is_object() ? out[key] : json::object();
    const json typed = write(*block);
    for (const auto& [k, v] : typed.items()) j[k] = v;
    out[key] = std::move(j);
  };
  put("version", r.version, [](const VersionInfo& v) {
    // A writer with no build behind it (the Python probe) has null git and source: kept so.
    json j = json::object();
    for (auto [key, text] : {std::pair{"mlbench", &v.mlbench}, {"git", &v.git}, {"source", &v.source}}) {
      if (!text->empty()) j[key] = *text;
    }
    return j;
  });
  put("machine", r.machine, [](const MachineInfo& m) { return to_json(m); });
  put("train", r.train, stats_json);
  put("train_item", r.train_item, [](const TrainItem& t) {
    return json{{"avg", or_null(t.avg)},
                {"min", or_null(t.min)},
                {"max", or_null(t.max)},
                {"range", or_null(t.range)},
                {"unit", t.unit}};
  });
  put("stall", r.stall, stall_json);
  put("process_cpu", r.process_cpu, [](const ProcessCpuBlock& c) {
    json j = json::object();
    for (const auto& [key, member] : kProcessCpuFigures) j[key] = or_null(c.*member);
    return j;
  });
  put("stability", r.stability, [](const StabilityInfo& s) {
    json j = {{"observations", s.observations},
              {"warmup_trending", s.warmup_trending},
              {"short_observations", s.short_observations}};
    for (const auto& [key, member] : kStabilityFigures) j[key] = or_null(s.*member);
    return j;
  });
  put("calibration", r.calibration, [](const CalibrationInfo& c) {
    return json{{"number", c.number},
                {"probe_iterations", c.probe_iterations},
                {"seconds_per_iteration", or_null(c.seconds_per_iteration)},
                {"target_s", or_null(c.target_s)},
                {"refinements", c.refinements}};
  });
  put("interference", r.interference, interference_json);
  put("resources", r.resources, resources_json);
  put("runner", r.runner, runner_json);
  // The blocks kept as written.
  if (r.pipeline) out["pipeline"] = r.pipeline->raw;
  if (r.gpu_monitor) out["gpu_monitor"] = gpu_monitor_json(*r.gpu_monitor);
}

json losses_json(const std::vector<std::optional<double>>& xs) {
  json a = json::array();
  for (const auto& x : xs) a.push_back(or_null(x));
  return a;
}

}  // namespace

nlohmann::json to_json(const MachineInfo& m) {
  json j = {{"hostname", m.hostname},
            {"cpu_model", m.cpu_model},
            {"logical_cores", m.logical_cores},
            {"physical_cores", m.physical_cores},
            {"affinity", m.affinity},
            {"memory_bytes", m.memory_bytes},
            {"kernel", m.kernel},
            {"cgroup_mode", m.cgroup_mode},
            {"gpus", m.gpus},
            {"framework", m.framework},
            {"framework_version", m.framework_version},
            {"cuda_available", m.cuda_available}};
  if (m.blas) {
    j["blas"] = {{"name", m.blas->name},
                 {"library", m.blas->library},
                 {"backend", m.blas->backend},
                 {"threads", m.blas->threads}};
  }
  return j;
}

nlohmann::json to_json(const InstanceReport& r) {
  json out = r.raw.is_object() ? r.raw : json::object();
  const auto text = [&](const char* key, const std::string& v) {
    if (!v.empty()) out[key] = v;
  };
  const auto maybe = [&](const char* key, const auto& v) {
    if (v) out[key] = *v;
  };
  if (r.schema_version > 0) out["schema_version"] = r.schema_version;
  out["name"] = r.name;
  out["suite"] = r.suite;
  out["run_id"] = r.run_id;
  out["completed"] = r.completed;
  for (auto [key, v] : {std::pair{"vcd", &r.vcd},
                        {"hostname", &r.hostname},
                        {"device", &r.device},
                        {"unique_id", &r.unique_id},
                        {"isolation", &r.isolation},
                        {"start_time", &r.start_time},
                        {"end_time", &r.end_time}}) {
    text(key, *v);
  }
  for (auto [key, v] : {std::pair{"reason", &r.reason}, {"benchmark_reason", &r.benchmark_reason}}) {
    if (v->empty())
      out.erase(key);
    else
      out[key] = *v;
  }
  maybe("jr_id", r.jr_id);
  for (auto [key, v] : {std::pair{"batch_size", &r.batch_size},
                        {"workers", &r.workers},
                        {"cpu_cores", &r.cpu_cores},
                        {"repeat", &r.repeat},
                        {"number", &r.number},
                        {"seed", &r.seed},
                        {"warmup", &r.warmup},
                        {"iterations", &r.iterations}}) {
    maybe(key, *v);
  }
  maybe("min_time", r.min_time);
  maybe("gpu", r.gpu);
  if (!r.args.is_null()) out["args"] = r.args;
  if (!r.metrics.empty()) out["metrics"] = json(r.metrics);
  if (!r.batch_loss.empty()) out["batch_loss"] = losses_json(r.batch_loss);
  if (!r.epoch_loss.empty()) out["epoch_loss"] = losses_json(r.epoch_loss);
  write_blocks(r, out);
  return out;
}

std::optional<double> InstanceReport::metric(const std::string& key) const {
  const auto it = metrics.find(key);
  if (it == metrics.end() || !it->second.is_number()) return std::nullopt;
  return it->second.get<double>();
}

std::optional<ReportIdentity> report_identity(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  const auto name = j.find("name"), suite = j.find("suite");
  if (name == j.end() || suite == j.end() || !name->is_string() || !suite->is_string()) return std::nullopt;
  return ReportIdentity{suite->get<std::string>(), name->get<std::string>()};
}

MachineInfo parse_machine_info(const nlohmann::json& j) {
  if (!j.is_object()) throw wrong_type("machine", j, "an object");
  MachineInfo m;
  read_machine(Fields(j, "machine"), m);
  return m;
}

InstanceReport parse_instance_report(const nlohmann::json& j) {
  if (!j.is_object()) throw wrong_type("the report", j, "an object");
  InstanceReport r;
  const Fields f(j, "");
  std::int64_t schema = 0;
  f.integer("schema_version", schema);
  if (schema > kInstanceReportSchema) {
    throw ReportFormatError(fmt::format("schema_version {} is newer than this mlbench reads ({}): update mlbench",
                                        schema, kInstanceReportSchema));
  }
  r.schema_version = static_cast<int>(schema);
  for (auto [key, out] : {std::pair{"name", &r.name},
                          {"suite", &r.suite},
                          {"vcd", &r.vcd},
                          {"hostname", &r.hostname},
                          {"device", &r.device},
                          {"unique_id", &r.unique_id},
                          {"isolation", &r.isolation},
                          {"reason", &r.reason},
                          {"benchmark_reason", &r.benchmark_reason},
                          {"start_time", &r.start_time},
                          {"end_time", &r.end_time}}) {
    f.text(key, *out);
  }
  f.integer("run_id", r.run_id);
  f.integer("jr_id", r.jr_id);
  for (auto [key, out] : {std::pair{"batch_size", &r.batch_size},
                          {"workers", &r.workers},
                          {"cpu_cores", &r.cpu_cores},
                          {"repeat", &r.repeat},
                          {"number", &r.number},
                          {"seed", &r.seed},
                          {"warmup", &r.warmup},
                          {"iterations", &r.iterations}}) {
    f.integer(key, *out);
  }
  f.number("min_time", r.min_time);
  f.text("gpu", r.gpu);
  f.flag("completed", r.completed);
  if (const json* args = f.find("args")) r.args = *args;
  if (const json* metrics = f.find("metrics")) {
    if (!metrics->is_object()) f.wrong("metrics", "an object", *metrics);
    for (const auto& [key, v] : metrics->items()) r.metrics[key] = v;
  }
  read_losses(f, "batch_loss", r.batch_loss);
  read_losses(f, "epoch_loss", r.epoch_loss);
  read_blocks(f, r);
  r.raw = j;
  return r;
}

InstanceReport read_instance_report(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw ReportFormatError(fmt::format("{}: cannot read it", file.string()));
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    throw ReportFormatError(fmt::format("{}: not JSON ({})", file.string(), e.what()));
  }
  try {
    return parse_instance_report(j);
  } catch (const ReportFormatError& e) {
    throw ReportFormatError(fmt::format("{}: {}", file.string(), e.what()));
  }
}

}  // namespace mlbench::core
