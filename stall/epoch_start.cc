#include "epoch_start.h"

#include <cmath>

#include <fmt/format.h>

#include "analysis.h"
#include "decision.h"

namespace mlbench::stall {
namespace {

// One of the probe's stats ({"avg", "sd", "count", ...}, seconds): avg and sd, 0 when null.
struct Stat {
  double avg = 0, sd = 0;
  int count = 0;
};

Stat stat_of(const nlohmann::json& block, const char* key) {
  Stat s;
  if (!block.contains(key) || !block[key].is_object()) return s;
  const auto& j = block[key];
  s.count = j.value("count", 0);
  if (j.contains("avg") && j["avg"].is_number()) s.avg = j["avg"].get<double>();
  if (j.contains("sd") && j["sd"].is_number()) s.sd = j["sd"].get<double>();
  return s;
}

double ms(double s) {
  return 1e3 * s;
}

}  // namespace

std::optional<EpochStartCost> epoch_start_cost(const nlohmann::json& report) {
  if (!report.is_object() || !report.contains("probe") || !report["probe"].is_object()) return std::nullopt;
  const auto& probe = report["probe"];
  if (!probe.contains("epoch_start") || !probe["epoch_start"].is_object()) return std::nullopt;
  const auto& b = probe["epoch_start"];
  const Stat fw = stat_of(b, "wait"), fc = stat_of(b, "compute"), sw = stat_of(b, "steady_wait"),
             sc = stat_of(b, "steady_compute"), it = stat_of(b, "iter");
  EpochStartCost c;
  c.epochs = b.value("epochs", 0);
  if (c.epochs <= 0 || fw.count != c.epochs || sw.count <= 0) return std::nullopt;
  if (b.contains("batches_per_epoch") && b["batches_per_epoch"].is_number_integer()) {
    c.batches_per_epoch = b["batches_per_epoch"].get<int>();
  }
  if (b.contains("workers") && b["workers"].is_number_integer()) c.workers = b["workers"].get<int>();
  if (b.contains("persistent_workers") && b["persistent_workers"].is_boolean()) {
    c.persistent_workers = b["persistent_workers"].get<bool>();
  }
  if (it.count > 0) c.iter_s = it.avg;
  c.first_wait_s = fw.avg;
  c.steady_wait_s = sw.avg;
  c.first_step_s = fw.avg + fc.avg;
  c.steady_step_s = sw.avg + sc.avg;
  c.cost_s = c.first_step_s - c.steady_step_s;
  // The first steps' spread over the epoch starts against the others' (wait and compute each; their
  // covariance left out).
  c.noise_s = std::sqrt((fw.sd * fw.sd + fc.sd * fc.sd) / c.epochs + (sw.sd * sw.sd + sc.sd * sc.sd) / sw.count);
  c.timed_s = c.epochs * c.first_step_s + sw.count * c.steady_step_s;
  if (c.timed_s <= 0) return std::nullopt;
  c.share_pct = 100 * c.epochs * c.cost_s / c.timed_s;
  const auto& item = report.value("train_item", nlohmann::json::object());
  c.rate = item.contains("avg") && item["avg"].is_number() ? item["avg"].get<double>() : 0.0;
  const double without = c.timed_s - c.epochs * std::max(0.0, c.cost_s);
  c.rate_within = without > 0 ? c.rate * c.timed_s / without : 0.0;
  const double gain = without > 0 ? c.timed_s / without : 0.0;
  c.claimed = c.epochs >= 2 && c.cost_s > kSignificanceSigmas * c.noise_s && gain >= kMinRemedyGain;
  return c;
}

std::string epoch_start_text(const EpochStartCost& c, const std::string& run) {
  const char* loader = c.persistent_workers ? "the DataLoader's" : "the loader's";
  const std::string per_epoch =
      c.batches_per_epoch > 0 ? fmt::format(" at {} batches an epoch", c.batches_per_epoch) : std::string();
  std::string text = fmt::format(
      "each epoch's start costs {:.1f} ms (±{:.1f}) more than a step within the epoch: its first step took {:.1f} ms "
      "against {:.1f}, {:.1f} ms of it waiting for {} first batch ({:.1f} ms within an epoch); {:.1f}% of the {} "
      "run ({} epoch starts{}): {:.1f} samples/s over whole epochs, {:.1f}/s without it",
      ms(c.cost_s), ms(c.noise_s), ms(c.first_step_s), ms(c.steady_step_s), ms(c.first_wait_s), loader,
      ms(c.steady_wait_s), c.share_pct, run, c.epochs, per_epoch, c.rate, c.rate_within);
  if (!c.claimed) {
    text = "no measurable cost at each epoch's start (" + text + ")";
  } else {
    // The compute-only run replays batches without the loader, so the split's prep stall holds it.
    text += " (the split counts it as prep stall)";
  }
  return text;
}

std::string epoch_start_advice(const EpochStartCost& c) {
  if (c.workers <= 0 || !c.persistent_workers) return "";
  const std::string later =
      "one iterator over all epochs (a batch sampler that runs through every epoch, as timm's MultiEpochsDataLoader) "
      "loads it while the previous epoch's last steps run";
  if (!*c.persistent_workers) {
    return fmt::format(
        "DataLoader(persistent_workers=True) starts the loader's {} worker{} once instead of at each epoch's start "
        "(and stops {} once, not at each epoch's end); an epoch's first batch is still loaded only once the epoch "
        "starts: {}",
        c.workers, c.workers == 1 ? "" : "s", c.workers == 1 ? "it" : "them", later);
  }
  return "the DataLoader loads an epoch's first batch only once the epoch starts, with persistent_workers too: " +
         later;
}

nlohmann::json epoch_start_json(const nlohmann::json& report, const std::string& run) {
  const auto c = epoch_start_cost(report);
  if (!c) return nullptr;
  return {{"run", run},
          {"epochs", c->epochs},
          {"batches_per_epoch", c->batches_per_epoch > 0 ? nlohmann::json(c->batches_per_epoch) : nlohmann::json()},
          {"workers", c->workers},
          {"persistent_workers", c->persistent_workers ? nlohmann::json(*c->persistent_workers) : nlohmann::json()},
          {"first_wait_ms", ms(c->first_wait_s)},
          {"steady_wait_ms", ms(c->steady_wait_s)},
          {"iter_ms", c->iter_s ? nlohmann::json(ms(*c->iter_s)) : nlohmann::json()},
          {"first_step_ms", ms(c->first_step_s)},
          {"steady_step_ms", ms(c->steady_step_s)},
          {"cost_ms", ms(c->cost_s)},
          {"noise_ms", ms(c->noise_s)},
          {"pct", c->share_pct},
          {"rate", c->rate},
          {"rate_within", c->rate_within},
          {"claimed", c->claimed},
          {"text", epoch_start_text(*c, run)},
          {"advice", epoch_start_advice(*c)}};
}

void add_epoch_start_finding(const nlohmann::json& cached_report, nlohmann::json& result) {
  nlohmann::json f = epoch_start_json(cached_report, "cached");
  if (f.is_null()) return;
  const bool advise = f["claimed"].get<bool>() && !f["advice"].get<std::string>().empty();
  if (advise) {
    auto& advice = result["recommendation"]["advice"];
    if (!advice.is_array()) advice = nlohmann::json::array();
    advice.push_back(f["advice"]);
  }
  result["findings"]["epoch_start"] = std::move(f);
}

}  // namespace mlbench::stall
