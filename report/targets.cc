#include "report/targets.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "core/statistics.h"
#include "report/reports_tree.h"

#include "core/layout.h"

namespace mlbench::report {
namespace fs = std::filesystem;

namespace {
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

double positive(const nlohmann::json& v, const std::string& source, const std::string& field) {
  if (!v.is_number() || !(v.get<double>() > 0.0) || !std::isfinite(v.get<double>())) {
    throw InputError(fmt::format("{}: {} must be a positive number, got {}", source, field, v.dump()));
  }
  return v.get<double>();
}
}  // namespace

Targets parse_targets(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw InputError(fmt::format("{}: a targets file must be a JSON object", source));
  if (!j.contains("benchmarks") || !j["benchmarks"].is_object()) {
    throw InputError(fmt::format("{}: missing object \"benchmarks\" (bench -> target items/s)", source));
  }
  Targets t;
  t.source = source;
  t.model =
      j.contains("model") && j["model"].is_string() ? j["model"].get<std::string>() : fs::path(source).stem().string();
  if (j.contains("note") && j["note"].is_string()) t.note = j["note"].get<std::string>();
  if (j.contains("cpu_model") && !j["cpu_model"].is_null()) {
    if (!j["cpu_model"].is_string()) throw InputError(fmt::format("{}: cpu_model must be a string", source));
    t.cpu_model = j["cpu_model"].get<std::string>();
  }
  if (j.contains("logical_cores") && !j["logical_cores"].is_null()) {
    const nlohmann::json& c = j["logical_cores"];
    if (!c.is_number_integer() || c.get<std::int64_t>() <= 0) {
      throw InputError(fmt::format("{}: logical_cores must be a positive whole number, got {}", source, c.dump()));
    }
    t.logical_cores = c.get<std::int64_t>();
  }
  for (const auto& [bench, v] : j["benchmarks"].items()) {
    Target target;
    const std::string where = "benchmarks." + bench;
    if (v.is_number()) {
      target.items_per_s = positive(v, source, where);
    } else if (v.is_object()) {
      if (!v.contains("target")) throw InputError(fmt::format("{}: {} has no \"target\"", source, where));
      target.items_per_s = positive(v["target"], source, where + ".target");
      if (v.contains("perf_target")) target.perf_target = positive(v["perf_target"], source, where + ".perf_target");
      if (v.contains("sd_target")) target.sd_target = positive(v["sd_target"], source, where + ".sd_target");
    } else {
      throw InputError(fmt::format("{}: {} must be a number or an object with \"target\"", source, where));
    }
    t.benchmarks[bench] = target;
  }
  return t;
}

Targets load_targets_file(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw InputError(fmt::format("--targets {}: cannot open the file", file.string()));
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) throw InputError(fmt::format("{}: not valid JSON", file.string()));
  return parse_targets(j, file.string());
}

fs::path find_targets_file(const std::string& model, const std::vector<fs::path>& dirs) {
  const std::string want = lower(model);
  std::vector<std::string> available;
  for (const fs::path& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
      if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      if (lower(f.stem().string()) == want) return f;
    }
    for (const fs::path& f : files) {
      std::ifstream in(f);
      const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
      if (j.is_object() && j.contains("model") && j["model"].is_string() &&
          lower(j["model"].get<std::string>()) == want) {
        return f;
      }
      available.push_back(f.stem().string());
    }
    if (!files.empty()) break;  // the first directory with targets is the one in use
  }
  std::string where;
  for (const fs::path& d : dirs) where += (where.empty() ? "" : ", ") + d.string();
  std::string list;
  for (const std::string& a : available) list += (list.empty() ? "" : ", ") + a;
  throw InputError(fmt::format("--gpu-model {}: no targets file for this model in {} (available: {})", model, where,
                               list.empty() ? "none" : list));
}

std::vector<fs::path> default_target_dirs() {
  return {fs::path("configs") / "targets", core::layout::configs_dir() / "targets"};
}

namespace {
// "AMD  EPYC 7B13 " and "amd epyc 7b13" are one model.
std::string normal_model(const std::string& s) {
  std::string out;
  for (char c : lower(s)) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string cpu_line(const std::string& cpu_model, std::int64_t logical_cores) {
  return fmt::format("{} x{}", cpu_model.empty() ? "unknown model" : cpu_model, logical_cores);
}
}  // namespace

bool is_cpu_targets(const Targets& t) {
  return lower(t.model) == "cpu" || !t.cpu_model.empty();
}

std::string targets_kind(const Targets& t) {
  if (!is_cpu_targets(t)) return t.model;
  if (t.cpu_model.empty()) return "CPU of unknown model";
  return "CPU: " + cpu_line(t.cpu_model, t.logical_cores);
}

void set_targets_machine(nlohmann::json& targets, const std::string& cpu_model, std::int64_t logical_cores) {
  targets["cpu_model"] = cpu_model;
  targets["logical_cores"] = logical_cores;
}

std::optional<std::string> cpu_targets_mismatch(const Targets& t, const std::string& cpu_model,
                                                std::int64_t logical_cores, const std::string& available) {
  if (!is_cpu_targets(t)) return std::nullopt;
  const bool fits = !t.cpu_model.empty() && normal_model(t.cpu_model) == normal_model(cpu_model) &&
                    (t.logical_cores <= 0 || t.logical_cores == logical_cores);
  if (fits) return std::nullopt;
  return fmt::format("no target for this CPU ({}); targets exist for: {}", cpu_line(cpu_model, logical_cores),
                     available.empty() ? "none" : available);
}

std::vector<fs::path> targets_files(const std::vector<fs::path>& dirs) {
  for (const fs::path& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
    }
    if (files.empty()) continue;
    std::sort(files.begin(), files.end());
    return files;
  }
  return {};
}

std::string available_targets(const std::vector<fs::path>& dirs) {
  std::string out;
  for (const fs::path& f : targets_files(dirs)) {
    std::string kind;
    try {
      const Targets t = load_targets_file(f);
      kind = targets_kind(t);
      if (kind.rfind("CPU: ", 0) == 0) kind = kind.substr(5);
      if (t.cpu_model.empty() && is_cpu_targets(t)) kind += ", made before targets named their CPU";
    } catch (const InputError&) {
      kind = "unreadable";
    }
    out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", kind, f.filename().string());
  }
  return out;
}

double round_down_2_significant(double x) {
  if (!(x > 0.0) || !std::isfinite(x)) return kNaN;
  const int k = 1 - static_cast<int>(std::floor(std::log10(x)));
  // The 1e-9 keeps a value already at 2 digits (4.6e6, 0.9) from dropping a step through
  // the binary representation of the scaled product.
  if (k >= 0) {
    const double scale = std::pow(10.0, k);
    return std::floor(x * scale * (1 + 1e-9)) / scale;
  }
  const double scale = std::pow(10.0, -k);
  return std::floor(x / scale * (1 + 1e-9)) * scale;
}

nlohmann::json make_targets(const std::vector<BenchResult>& benches, const std::string& model, const std::string& note,
                            std::vector<std::string>& skipped) {
  nlohmann::json out = {{"model", model}, {"note", note}, {"benchmarks", nlohmann::json::object()}};
  for (const BenchResult& b : benches) {
    std::vector<double> values;
    for (const RunValue& r : b.runs) {
      if (std::isfinite(r.items_per_s) && r.items_per_s > 0.0) values.push_back(r.items_per_s);
    }
    const double target = values.empty() ? kNaN : round_down_2_significant(core::median(values));
    if (!std::isfinite(target)) {
      skipped.push_back(b.name);
      continue;
    }
    // Whole numbers as integers: the files are read and edited by people.
    if (target == std::floor(target) && target < 9e15) {
      out["benchmarks"][b.name] = static_cast<long long>(target);
    } else {
      out["benchmarks"][b.name] = target;
    }
  }
  return out;
}

std::vector<std::string> targets_from_failing_benches(const std::vector<BenchResult>& benches,
                                                      const nlohmann::json& targets) {
  std::vector<std::string> out;
  for (const BenchResult& b : benches) {
    if (b.failures <= 0 || !targets["benchmarks"].contains(b.name)) continue;
    out.push_back(fmt::format(
        "--write-targets: {}'s target comes from {} of its {} instances ({} failed{}); check them before holding "
        "runs to it",
        b.name, b.instances - b.failures, b.instances, b.failures,
        b.failure_reasons.empty() ? "" : ": " + b.failure_reasons.front()));
  }
  return out;
}

}  // namespace mlbench::report
