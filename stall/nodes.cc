#include "nodes.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "core/sysinfo.h"
#include "partitioned_model.h"

namespace mlbench::stall {
namespace {

std::optional<double> number_at(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}

// A rate of whatif.partitioned: null there is an unbounded one (JSON has no infinity).
double rate_at(const nlohmann::json& j, const char* key) {
  const auto v = number_at(j, key);
  return v && *v > 0 ? *v : std::numeric_limits<double>::infinity();
}

nlohmann::json opt(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

struct Node {
  std::string name;
  std::vector<const RankPlace*> ranks;
  std::set<int> cpus;
};

}  // namespace

RankPlace rank_place(const nlohmann::json& b, int rank, double rate) {
  RankPlace p;
  p.rank = rank;
  p.rate = rate;
  if (!b.is_object()) return p;
  p.host = b.value("host", "");
  p.node = b.contains("node") && b["node"].is_string() ? b["node"].get<std::string>() : p.host;
  if (b.contains("node_id") && b["node_id"].is_number_integer()) p.node_id = b["node_id"].get<int>();
  if (b.contains("boot_id") && b["boot_id"].is_string()) p.boot_id = b["boot_id"].get<std::string>();
  if (b.contains("cpus") && b["cpus"].is_array()) {
    for (const auto& c : b["cpus"])
      if (c.is_number_integer()) p.cpus.push_back(c.get<int>());
  }
  if (b.contains("cpus_per_task") && b["cpus_per_task"].is_number_integer()) {
    p.cpus_per_task = b["cpus_per_task"].get<int>();
  }
  p.mem_total_mib = number_at(b, "mem_total_mib");
  p.memory_max_mib = number_at(b, "memory_max_mib");
  return p;
}

nlohmann::json nodes_json(const std::vector<RankPlace>& ranks, const nlohmann::json& partitioned_whatif,
                          const std::string& analyzer_boot_id, double dataset_bytes) {
  // The nodes in the order of their first rank.
  std::vector<RankPlace> sorted = ranks;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  std::vector<Node> nodes;
  for (const auto& r : sorted) {
    auto it = std::find_if(nodes.begin(), nodes.end(), [&](const Node& n) { return n.name == r.node; });
    if (it == nodes.end()) it = nodes.insert(nodes.end(), Node{r.node, {}, {}});
    it->ranks.push_back(&r);
    it->cpus.insert(r.cpus.begin(), r.cpus.end());
  }
  std::set<std::string> boots;
  std::set<int> all_cpus;
  bool boots_known = true;
  for (const auto& r : sorted) {
    if (r.boot_id.empty()) {
      boots_known = false;
    } else {
      boots.insert(r.boot_id);
    }
    all_cpus.insert(r.cpus.begin(), r.cpus.end());
  }
  const bool shared = boots_known && boots.size() == 1 && nodes.size() > 1;

  nlohmann::json list = nlohmann::json::array();
  std::size_t ranks_per_node = 0;
  bool uniform = true;
  for (const auto& n : nodes) {
    if (ranks_per_node && n.ranks.size() != ranks_per_node) uniform = false;
    ranks_per_node = std::max(ranks_per_node, n.ranks.size());
    nlohmann::json rs = nlohmann::json::array();
    double rate = 0;
    std::optional<double> cache_mib;
    std::optional<int> node_id;
    nlohmann::json cpus_per_rank = nlohmann::json::object();
    for (const RankPlace* r : n.ranks) {
      rs.push_back(r->rank);
      rate += r->rate;
      cpus_per_rank[std::to_string(r->rank)] = core::format_cpu_list(r->cpus);
      if (r->node_id) node_id = r->node_id;
      // The page cache a rank can keep: the kernel's memory, at most its cgroup's memory.max
      // (Slurm's --mem: a job's page cache is charged to its cgroup).
      std::optional<double> m = r->mem_total_mib;
      if (r->memory_max_mib) m = m ? std::min(*m, *r->memory_max_mib) : *r->memory_max_mib;
      if (m) cache_mib = cache_mib ? std::max(*cache_mib, *m) : *m;
    }
    nlohmann::json fraction;
    if (cache_mib && dataset_bytes > 0) fraction = std::min(1.0, *cache_mib * (1 << 20) / dataset_bytes);
    list.push_back({{"node", n.name},
                    {"node_id", node_id ? nlohmann::json(*node_id) : nlohmann::json()},
                    {"host", n.ranks.front()->host},
                    {"ranks", rs},
                    {"rate", rate},
                    {"cpus", core::format_cpu_list({n.cpus.begin(), n.cpus.end()})},
                    {"cpu_count", n.cpus.size()},
                    {"cpus_per_rank", cpus_per_rank},
                    {"cpus_per_task", n.ranks.front()->cpus_per_task ? nlohmann::json(*n.ranks.front()->cpus_per_task)
                                                                     : nlohmann::json()},
                    {"page_cache_mib", opt(cache_mib)},
                    {"dataset_fraction_fits", fraction}});
  }

  // The page cache: one per kernel.
  nlohmann::json page = {{"shared", shared},
                         {"kernels", boots_known ? nlohmann::json(boots.size()) : nlohmann::json()}};
  std::string text;
  if (!boots_known) {
    text = "not known (a rank's report has no boot id: a probe older than node identity)";
  } else if (shared) {
    text = fmt::format(
        "the {} nodes run on one kernel (boot id {}): they share one page cache and one memory, so the page-cache "
        "states and figures are this machine's, not each node's; on a real cluster each node has its own",
        nodes.size(), boots.begin()->substr(0, 8));
  } else if (nodes.size() > 1) {
    text = fmt::format("each of the {} nodes has a page cache of its own ({} kernels)", nodes.size(), boots.size());
  } else {
    text = "one node: one page cache";
  }
  std::vector<std::string> elsewhere;
  if (boots_known && !analyzer_boot_id.empty()) {
    for (const auto& n : nodes) {
      const bool here = std::any_of(n.ranks.begin(), n.ranks.end(),
                                    [&](const RankPlace* r) { return r->boot_id == analyzer_boot_id; });
      if (!here) elsewhere.push_back(n.name);
    }
  }
  page["nodes_elsewhere"] = elsewhere;
  if (!elsewhere.empty()) {
    std::string names;
    for (const auto& e : elsewhere) names += (names.empty() ? "" : ", ") + e;
    text += fmt::format(
        "; the warm state is set on this machine only: {} read what their own page cache held in the cached runs "
        "(the cold state is each rank's own eviction, on every node)",
        names);
  }
  page["text"] = text;

  // The partitioned cache at the job's node count, a node being its ranks.
  nlohmann::json part;
  std::string note;
  const int n_nodes = static_cast<int>(nodes.size());
  if (n_nodes < 2) {
    note = "one node: nothing to partition";
  } else if (!partitioned_whatif.is_object()) {
    note = "no partitioned-cache what-if in this analysis (no peer rate measured)";
  } else if (!uniform) {
    note = "the nodes run different numbers of ranks";
  } else {
    const auto& w = partitioned_whatif;
    const double k = static_cast<double>(ranks_per_node);
    PartitionedNodes base;
    base.nodes = n_nodes;
    base.device_rate = k * rate_at(w, "G");
    base.prep_rate = k * rate_at(w, "P");
    base.memory_rate = k * rate_at(w, "C");
    base.storage_rate = rate_at(w, "S");
    base.peer_rate = rate_at(w, "R");
    base.batch_items = number_at(w, "batch_items").value_or(1);
    base.max_ids_per_request = static_cast<int>(number_at(w, "max_ids_per_request").value_or(256));
    base.prep_cpu_s = number_at(w, "prep_cpu_us").value_or(0) / 1e6;
    base.peer_request_cpu_s = number_at(w, "peer_request_cpu_us").value_or(0) / 1e6;
    base.memory_fraction = number_at(w, "memory_fraction").value_or(0);  // "1/N": 0, each its partition
    // A node's CPUs as Slurm gave its ranks; nodes on one kernel share that machine's.
    base.shared_cpus = shared;
    std::size_t node_cpus = 0;
    for (const auto& n : nodes) node_cpus = std::max(node_cpus, n.cpus.size());
    base.cores = shared ? static_cast<double>(all_cpus.size()) : static_cast<double>(node_cpus);
    if (base.cores <= 0) base.cores = number_at(w, "cores").value_or(0);
    try {
      const PartitionedNodes at = partitioned_at(base, n_nodes);
      const PartitionedPrediction p = predict_partitioned(at);
      part = {{"nodes", n_nodes},
              {"ranks_per_node", ranks_per_node},
              {"memory_fraction", at.memory_fraction},
              {"cores", base.cores},
              {"shared_cpus", base.shared_cpus},
              {"own", p.own},
              {"partitioned", p.partitioned},
              {"gain", p.gain},
              {"bound_own", p.bound_own},
              {"bound_partitioned", p.bound_partitioned},
              {"job_own", p.own * n_nodes},
              {"job_partitioned", p.partitioned * n_nodes},
              {"unit", "samples/s per node (job_*: the job's)"},
              {"from",
               "whatif.partitioned's model at the job's node count: G, P and C each x the ranks a node runs (each rank "
               "its own loader and step), S shared by the nodes, cores the node's CPUs as Slurm gave its ranks (the "
               "machine's, shared, when the nodes run on one kernel)"}};
    } catch (const std::invalid_argument& e) {
      note = e.what();
    }
  }
  return {{"count", n_nodes},    {"ranks_per_node", uniform ? nlohmann::json(ranks_per_node) : nlohmann::json()},
          {"nodes", list},       {"page_cache", page},
          {"partitioned", part}, {"partitioned_note", note}};
}

std::vector<std::string> cpu_sweep_warnings(const std::map<std::string, std::vector<RankPlace>>& ranks_by_run) {
  std::vector<std::string> out;
  for (const auto& [label, ranks] : ranks_by_run) {
    if (label.rfind("cpus-", 0) != 0) continue;
    int n = 0;
    try {
      n = std::stoi(label.substr(5));
    } catch (const std::exception&) {
      continue;
    }
    std::string over;
    for (const auto& r : ranks) {
      if (static_cast<int>(r.cpus.size()) > n) {
        over += fmt::format("{}rank {} on CPUs {}", over.empty() ? "" : ", ", r.rank, core::format_cpu_list(r.cpus));
      }
    }
    if (!over.empty()) {
      out.push_back(fmt::format(
          "run {} did not limit the ranks to {} CPU{} ({}): the probe's split was not applied in them (each rank's "
          "cpu_split.error says why: fewer CPUs from Slurm than that, or no probe in the task) or the script set its "
          "own affinity; its rate is not that of {} CPU{} (run the analysis once per --cpus-per-task instead)",
          label, n, n == 1 ? "" : "s", over, n, n == 1 ? "" : "s"));
    }
  }
  return out;
}

namespace {

// Each rank's report's `rank` block (null when unreadable).
nlohmann::json rank_block_of(const nlohmann::json& rank_entry) {
  if (!rank_entry.contains("report") || !rank_entry["report"].is_string()) return nullptr;
  std::ifstream in(rank_entry["report"].get<std::string>());
  const nlohmann::json report = nlohmann::json::parse(in, nullptr, false);
  return report.is_object() && report.contains("rank") ? report["rank"] : nlohmann::json();
}

}  // namespace

void add_nodes_block(nlohmann::json& result) {
  if (!result.contains("ranks") || !result["ranks"].is_array() || result["ranks"].empty()) return;
  std::vector<RankPlace> places;
  for (auto& r : result["ranks"]) {
    RankPlace p = rank_place(rank_block_of(r), r.value("rank", 0), r.value("rate", 0.0));
    if (p.node.empty()) p.node = r.value("host", "");
    r["node"] = p.node;
    r["cpus"] = p.cpus.empty() ? nlohmann::json() : nlohmann::json(core::format_cpu_list(p.cpus));
    places.push_back(std::move(p));
  }
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  double dataset_bytes = 0;
  if (result.contains("storage") && result.contains("items")) {
    dataset_bytes = number_at(result["storage"], "mean_file_bytes").value_or(0) *
                    (result["items"].is_number() ? result["items"].get<double>() : 0);
  }
  const nlohmann::json whatif = result.contains("whatif") && result["whatif"].is_object()
                                    ? result["whatif"].value("partitioned", nlohmann::json())
                                    : nlohmann::json();
  result["nodes"] = nodes_json(places, whatif, boot, dataset_bytes);
  std::map<std::string, std::vector<RankPlace>> by_run;
  if (result.contains("runs") && result["runs"].is_object()) {
    for (const auto& [label, run] : result["runs"].items()) {
      if (!run.is_object() || !run.contains("ranks") || !run["ranks"].is_array()) continue;
      for (const auto& r : run["ranks"]) by_run[label].push_back(rank_place(rank_block_of(r), r.value("rank", 0), 0));
    }
  }
  for (auto& w : cpu_sweep_warnings(by_run)) result["warnings"].push_back(std::move(w));
}

std::string nodes_text(const nlohmann::json& result) {
  if (!result.contains("nodes") || !result["nodes"].is_object()) return "";
  const auto& n = result["nodes"];
  if (n.value("count", 0) < 2) return "";
  std::string line = fmt::format("nodes: {}:", n["count"].get<int>());
  const char* sep = " ";
  for (const auto& node : n["nodes"]) {
    std::string ranks;
    for (const auto& r : node["ranks"]) ranks += (ranks.empty() ? "" : ",") + std::to_string(r.get<int>());
    const std::string cpus = node.value("cpus", "");
    line += fmt::format("{}{}: rank{} {}{}, {:.1f}/s", sep, node.value("node", ""), node["ranks"].size() > 1 ? "s" : "",
                        ranks, cpus.empty() ? "" : fmt::format(" (CPUs {})", cpus), node.value("rate", 0.0));
    sep = "; ";
  }
  std::string out = line + "\n";
  if (n.contains("page_cache")) out += "page cache: " + n["page_cache"].value("text", "") + "\n";
  if (n.contains("partitioned") && n["partitioned"].is_object()) {
    const auto& p = n["partitioned"];
    out += fmt::format(
        "partitioned cache across the job's {} nodes (per node, {} rank{} each, samples/s): each caching {:.0f}% on "
        "its "
        "own {:.1f} -> partitioned {:.1f} (x{:.2f}), {}-bound\n",
        p["nodes"].get<int>(), p["ranks_per_node"].get<int>(), p["ranks_per_node"].get<int>() > 1 ? "s" : "",
        100 * p["memory_fraction"].get<double>(), p["own"].get<double>(), p["partitioned"].get<double>(),
        p["gain"].get<double>(), p.value("bound_partitioned", ""));
  } else if (!n.value("partitioned_note", "").empty()) {
    out += "partitioned cache across the nodes: not predicted (" + n.value("partitioned_note", "") + ")\n";
  }
  return out;
}

}  // namespace mlbench::stall
