// Slices on cgroup v1 (libcgroup: create, attach, delete per controller) and
// v2 (the unified filesystem: libcgroup 2.0.2 does not enable controllers in
// cgroup.subtree_control, so v2 is driven through the files directly).
#include "slice.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <libcgroup.h>
#include <nlohmann/json.hpp>

#include "core/sysinfo.h"

namespace mlbench::cgroup {

namespace fs = std::filesystem;

const char* to_string(Isolation i) {
  switch (i) {
    case Isolation::CgroupV1: return "cgroup-v1";
    case Isolation::CgroupV2: return "cgroup-v2";
    case Isolation::Affinity: break;
  }
  return "affinity";
}

nlohmann::json Usage::to_json() const {
  return {{"cpu_seconds", cpu_seconds},
          {"memory_peak_bytes", memory_peak_bytes},
          {"oom_kills", oom_kills},
          {"bytes_read", bytes_read}};
}

namespace {

constexpr const char* kV2Root = "/sys/fs/cgroup";

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const fs::path& file, const std::string& value) {
  std::ofstream out(file);
  out << value;
  out.close();
  if (!out) throw CgroupError(file.string() + ": cannot write '" + value + "': " + std::strerror(errno));
}

std::string libcgroup_error(int rc) {
  if (rc == ECGOTHER) return std::strerror(cgroup_get_last_errno());
  return cgroup_strerror(rc);
}

int init_libcgroup() {
  static int rc = -1;
  static std::once_flag once;
  std::call_once(once, [] { rc = cgroup_init(); });
  return rc;
}

std::string online_mems() {
  std::string text = read_text("/sys/devices/system/node/online");
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? "0" : text;
}

std::string cpus_text(const std::vector<int>& cpus) {
  return core::format_cpu_list(cpus.empty() ? core::affinity_cpus() : cpus);
}

}  // namespace

std::optional<Hierarchy> Hierarchy::open(std::string* why) {
  Hierarchy h;
  const core::CgroupMode mode = core::cgroup_mode();
  if (mode == core::CgroupMode::None) {
    if (why) *why = "no cgroup filesystem mounted at /sys/fs/cgroup";
    return std::nullopt;
  }
  h.version_ = mode == core::CgroupMode::V1 ? Version::V1 : Version::V2;
  if (h.version_ == Version::V1) {
    if (int rc = init_libcgroup(); rc != 0) {
      if (why) *why = std::string("libcgroup: ") + libcgroup_error(rc);
      return std::nullopt;
    }
    for (const std::string& c : slice_controllers(Version::V1, true)) {
      char* mount = nullptr;
      if (cgroup_get_subsys_mount_point(c.c_str(), &mount) == 0 && mount) {
        h.mounts_.emplace_back(c, fs::path(mount));
        std::free(mount);
      } else if (c != "blkio") {
        if (why) *why = "cgroup v1 controller '" + c + "' is not mounted";
        return std::nullopt;
      }
    }
    h.has_io_ = h.mounts_.size() == 5;
  } else {
    const std::string available = read_text(fs::path(kV2Root) / "cgroup.controllers");
    for (const std::string& c : slice_controllers(Version::V2, false)) {
      if (available.find(c) == std::string::npos) {
        if (why) *why = "cgroup v2 controller '" + c + "' is not available in " + kV2Root;
        return std::nullopt;
      }
    }
    h.has_io_ = available.find("io") != std::string::npos;
    for (const std::string& c : slice_controllers(Version::V2, h.has_io_)) h.mounts_.emplace_back(c, fs::path(kV2Root));
  }
  if (access(h.mounts_.front().second.c_str(), W_OK) != 0) {
    if (why) *why = "no permission to create cgroups under " + h.mounts_.front().second.string() + " (run as root or delegate a subtree)";
    return std::nullopt;
  }
  return h;
}

fs::path Hierarchy::dir(const std::string& controller, const std::string& group) const {
  for (const auto& [c, mount] : mounts_) {
    if (c == controller) return mount / group;
  }
  throw CgroupError("cgroup controller '" + controller + "' is not available");
}

void Hierarchy::create(const std::string& group, const Limits& limits) const {
  const std::string cpus = cpus_text(limits.cpus);
  const std::string mems = limits.mems.empty() ? online_mems() : core::format_cpu_list(limits.mems);
  const std::string memory = memory_limit_value(version_, limits.memory_bytes);
  if (version_ == Version::V1) {
    ::cgroup* cg = cgroup_new_cgroup(group.c_str());
    if (!cg) throw CgroupError("cgroup " + group + ": cannot allocate");
    for (const auto& [c, mount] : mounts_) {
      ::cgroup_controller* cc = cgroup_add_controller(cg, c.c_str());
      if (!cc) {
        cgroup_free(&cg);
        throw CgroupError("cgroup " + group + ": cannot add controller " + c);
      }
      if (c == "cpuset") {
        cgroup_add_value_string(cc, control_file(version_, Knob::CpusetCpus).file.c_str(), cpus.c_str());
        cgroup_add_value_string(cc, control_file(version_, Knob::CpusetMems).file.c_str(), mems.c_str());
      } else if (c == "memory" && limits.memory_bytes) {
        cgroup_add_value_string(cc, control_file(version_, Knob::MemoryLimit).file.c_str(), memory.c_str());
      }
    }
    const int rc = cgroup_create_cgroup(cg, 0);
    cgroup_free(&cg);
    if (rc != 0) throw CgroupError("cgroup " + group + ": cannot create: " + libcgroup_error(rc));
    return;
  }
  // v2: enable the controllers for the parent's children, then make the group.
  const fs::path parent = fs::path(kV2Root) / fs::path(group).parent_path();
  std::string enable;
  for (const auto& [c, mount] : mounts_) enable += "+" + c + " ";
  write_text(parent / "cgroup.subtree_control", enable);
  const fs::path d = fs::path(kV2Root) / group;
  std::error_code ec;
  fs::create_directory(d, ec);
  if (ec) throw CgroupError("cgroup " + d.string() + ": cannot create: " + ec.message());
  write_text(d / control_file(version_, Knob::CpusetCpus).file, cpus);
  write_text(d / control_file(version_, Knob::CpusetMems).file, mems);
  write_text(d / control_file(version_, Knob::MemoryLimit).file, memory);
}

bool Hierarchy::remove(const std::string& group) const {
  bool all_gone = true;
  auto gone = [&](const fs::path& d) {
    std::error_code ec;
    return !fs::exists(d, ec);
  };
  if (version_ == Version::V2) {
    const fs::path d = fs::path(kV2Root) / group;
    for (int attempt = 0; attempt < 50 && !gone(d); ++attempt) {
      if (rmdir(d.c_str()) == 0 || errno == ENOENT) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return gone(d);
  }
  for (const auto& [c, mount] : mounts_) {
    const fs::path d = mount / group;
    // A just-exited task may still be accounted for a moment: retry briefly.
    for (int attempt = 0; attempt < 50 && !gone(d); ++attempt) {
      ::cgroup* cg = cgroup_new_cgroup(group.c_str());
      if (cg && cgroup_add_controller(cg, c.c_str())) cgroup_delete_cgroup_ext(cg, CGFLAG_DELETE_IGNORE_MIGRATION);
      cgroup_free(&cg);
      if (gone(d)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    all_gone = all_gone && gone(d);
  }
  return all_gone;
}

std::vector<std::string> Hierarchy::procs_files(const std::string& group) const {
  std::vector<std::string> files;
  if (version_ == Version::V2) return {(fs::path(kV2Root) / group / "cgroup.procs").string()};
  for (const auto& [c, mount] : mounts_) files.push_back((mount / group / "cgroup.procs").string());
  return files;
}

void Hierarchy::attach(const std::string& group, int pid) const {
  if (version_ == Version::V1) {
    ::cgroup* cg = cgroup_new_cgroup(group.c_str());
    for (const auto& [c, mount] : mounts_) cgroup_add_controller(cg, c.c_str());
    const int rc = cgroup_attach_task_pid(cg, pid);
    cgroup_free(&cg);
    if (rc != 0) throw CgroupError("cgroup " + group + ": cannot attach pid " + std::to_string(pid) + ": " + libcgroup_error(rc));
    return;
  }
  if (int err = attach_self_to(procs_files(group), pid); err != 0) {
    throw CgroupError("cgroup " + group + ": cannot attach pid " + std::to_string(pid) + ": " + std::strerror(err));
  }
}

Usage Hierarchy::usage(const std::string& group) const {
  Usage u;
  auto read = [&](Knob k) {
    const ControlFile f = control_file(version_, k);
    for (const auto& [c, mount] : mounts_) {
      if (c == f.controller) return read_text(mount / group / f.file);
    }
    return std::string();
  };
  try {
    if (auto t = read(Knob::CpuUsage); !t.empty()) u.cpu_seconds = parse_cpu_seconds(version_, t);
    if (auto t = read(Knob::MemoryPeak); !t.empty()) u.memory_peak_bytes = parse_integer(t, "memory peak");
    u.oom_kills = parse_oom_kills(read(Knob::OomEvents));
    if (has_io_) u.bytes_read = parse_bytes_read(version_, read(Knob::IoStat));
  } catch (const std::invalid_argument&) {
    // A counter the kernel does not provide stays 0.
  }
  return u;
}

int attach_self_to(const std::vector<std::string>& procs_files, int pid) {
  char buf[24];
  int len = 0;
  {
    char tmp[24];
    int n = 0;
    unsigned v = static_cast<unsigned>(pid);
    do {
      tmp[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v && n < 23);
    while (n) buf[len++] = tmp[--n];
  }
  for (const std::string& file : procs_files) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    const ssize_t w = ::write(fd, buf, static_cast<size_t>(len));
    const int err = errno;
    ::close(fd);
    if (w != len) return err ? err : EIO;
  }
  return 0;
}

}  // namespace mlbench::cgroup
