#include "rendezvous.h"

#include <charconv>
#include <cstdlib>
#include <stdexcept>

namespace mlbench::scaling {
namespace {

int to_int(const std::string& name, const std::string& value, int lo, int hi) {
  int v = 0;
  const auto* end = value.data() + value.size();
  const auto [p, ec] = std::from_chars(value.data(), end, v);
  if (ec != std::errc() || p != end || v < lo || v > hi) {
    throw std::invalid_argument(name + "=" + value + " is not an integer in [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "]");
  }
  return v;
}

std::string required(const Getenv& env, const std::string& name, const std::string& why) {
  auto v = env(name);
  if (!v || v->empty()) throw std::invalid_argument(name + " is not set (" + why + ")");
  return *v;
}

}  // namespace

std::optional<std::string> process_env(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

std::string first_host(const std::string& nodelist) {
  if (nodelist.empty()) throw std::invalid_argument("empty Slurm node list");
  // The first entry ends at a comma outside brackets.
  std::string first;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    first += c;
  }
  const auto open = first.find('[');
  if (open == std::string::npos) return first;
  const std::string prefix = first.substr(0, open);
  std::string range = first.substr(open + 1);
  range = range.substr(0, range.find_first_of(",]"));
  const std::string lo = range.substr(0, range.find('-'));
  if (lo.empty()) throw std::invalid_argument("malformed Slurm node list: " + nodelist);
  return prefix + lo;  // keeps leading zeros, as Slurm does
}

std::optional<Rendezvous> rendezvous_from_env(const Getenv& env) {
  if (auto world = env("WORLD_SIZE"); world && !world->empty()) {
    Rendezvous r;
    r.source = "env";
    r.world = to_int("WORLD_SIZE", *world, 1, 1 << 16);
    r.rank = to_int("RANK", required(env, "RANK", "set with WORLD_SIZE"), 0, r.world - 1);
    r.master_addr = env("MASTER_ADDR").value_or("127.0.0.1");
    if (r.master_addr.empty()) r.master_addr = "127.0.0.1";
    r.master_port = to_int("MASTER_PORT", required(env, "MASTER_PORT", "set with WORLD_SIZE"), 1, 65535);
    return r;
  }
  if (auto ntasks = env("SLURM_NTASKS"); ntasks && !ntasks->empty()) {
    const int world = to_int("SLURM_NTASKS", *ntasks, 1, 1 << 16);
    if (world < 2) return std::nullopt;
    Rendezvous r;
    r.source = "slurm";
    r.world = world;
    r.rank = to_int("SLURM_PROCID", required(env, "SLURM_PROCID", "set in a Slurm step"), 0, world - 1);
    auto nodes = env("SLURM_STEP_NODELIST");
    if (!nodes || nodes->empty()) nodes = env("SLURM_JOB_NODELIST");
    if (!nodes || nodes->empty()) throw std::invalid_argument("SLURM_STEP_NODELIST is not set (set in a Slurm step)");
    r.master_addr = env("MASTER_ADDR").value_or(first_host(*nodes));
    if (auto port = env("MASTER_PORT"); port && !port->empty()) {
      r.master_port = to_int("MASTER_PORT", *port, 1, 65535);
    } else {
      const int job = to_int("SLURM_JOB_ID", required(env, "SLURM_JOB_ID", "set in a Slurm step"), 0, 1 << 30);
      const int step = to_int("SLURM_STEP_ID", env("SLURM_STEP_ID").value_or("0"), 0, 1 << 30);
      r.master_port = kSlurmPortBase + static_cast<int>((static_cast<long>(job) * 64 + step) % 10000);
    }
    return r;
  }
  return std::nullopt;
}

std::vector<int> rank_cpus(const std::vector<int>& affinity, int threads, int world, int rank) {
  if (world < 2 || threads < 1 || rank < 0 || rank >= world) return {};
  const auto each = static_cast<std::size_t>(threads);
  if (static_cast<std::size_t>(world) * each > affinity.size()) return {};
  const auto first = affinity.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(rank) * each);
  return {first, first + static_cast<std::ptrdiff_t>(each)};
}

std::optional<int> local_rank_of(const Rendezvous& rv, const Getenv& env) {
  if (rv.source == "local") return rv.rank;
  for (const char* name : {"LOCAL_RANK", "SLURM_LOCALID"}) {
    if (auto v = env(name); v && !v->empty()) {
      try {
        return to_int(name, *v, 0, 1 << 16);
      } catch (const std::invalid_argument&) {
        return std::nullopt;  // a label in a report: a malformed variable leaves it unknown
      }
    }
  }
  return std::nullopt;
}

}  // namespace mlbench::scaling
