// What machine this is, gathered in one place: CPU, cores, affinity, memory,
// kernel, cgroup mode, GPUs. No LibTorch: benchmarks add its version themselves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "instance_report.h"

namespace mlbench::core {

enum class CgroupMode { None, V1, V2 };
const char* to_string(CgroupMode mode);
CgroupMode cgroup_mode(const std::string& mount_point = "/sys/fs/cgroup");

std::string hostname();
std::string cpu_model();
int logical_cores();
int physical_cores();
std::vector<int> affinity_cpus();        // CPUs this process may run on
std::uint64_t memory_total_bytes();      // MemTotal of /proc/meminfo
std::uint64_t memory_available_bytes();  // MemAvailable of /proc/meminfo (0 when unknown)
std::string kernel_release();
// GPU model names from the NVIDIA driver's /proc entries (empty without one).
std::vector<std::string> gpu_names();

// "0-3,6,8-9" from CPU ids; and back (throws std::invalid_argument on bad text).
std::string format_cpu_list(std::vector<int> cpus);
std::vector<int> parse_cpu_list(const std::string& text);

// The report's machine block as far as the system tells it (hostname, CPU model, cores,
// affinity, memory, kernel, cgroup mode, GPUs); the benchmark adds its framework and BLAS.
MachineInfo machine_info();
// The same as JSON: {"hostname","cpu_model","logical_cores","physical_cores","affinity",
//  "memory_bytes","kernel","cgroup_mode","gpus"} (mlbench-run's machine.json).
nlohmann::json machine_description();

}  // namespace mlbench::core
