// The private two-node Slurm cluster of the Slurm end-to-end tests (slurm_cluster.sh): the one the
// ctest fixture `slurm_cluster` started (MLBENCH_SLURM_DIR), or, when a test program runs alone, one
// of its own, started before its tests and stopped after them. SLURM_CONF points at it; where it is
// not usable, cluster().skip says why and the tests skip with it. Include it in one translation unit
// of a test program whose target defines SLURM_CLUSTER (the script's path).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace mlbench::testing_support {

// The cluster's directory; "" with `skip` set when it is not usable.
struct SlurmCluster {
  std::filesystem::path dir;
  std::string skip;
  bool own = false;  // started by this program (stopped at its end)
};
inline SlurmCluster& cluster() {
  static SlurmCluster c;
  return c;
}

// Starts (or finds) the cluster before the program's tests; `scratch` names its folder when the
// program starts one of its own.
class SlurmEnvironment : public ::testing::Environment {
 public:
  explicit SlurmEnvironment(std::string scratch) : scratch_(std::move(scratch)) {}
  void SetUp() override {
    namespace fs = std::filesystem;
    SlurmCluster& c = cluster();
    if (const char* d = std::getenv("MLBENCH_SLURM_DIR"); d && *d) {
      c.dir = d;
    } else {  // run alone: start one of our own
      c.dir = scratch_dir(scratch_);
      c.own = true;
      std::cerr << run_command(std::string(SLURM_CLUSTER) + " start " + c.dir.string()).output;
    }
    if (std::ifstream skip(c.dir / "skip"); skip) {
      std::getline(skip, c.skip);
    } else if (!fs::exists(c.dir / "slurm.conf")) {
      c.skip = "no cluster in " + c.dir.string() + " (its start failed; see the slurm_cluster_start test)";
    } else {
      setenv("SLURM_CONF", (c.dir / "slurm.conf").c_str(), 1);
    }
  }
  void TearDown() override {
    if (cluster().own) run_command(std::string(SLURM_CLUSTER) + " stop " + cluster().dir.string());
  }

 private:
  std::string scratch_;
};

}  // namespace mlbench::testing_support
