// Test support: run a command line through the shell (core::Process, so the
// command runs in its own process group and dies with the test) and capture
// its output and exit status.
#pragma once

#include <string>

#include "core/process.h"
#include "tests/support/temp_dir.h"

namespace mlbench::testing_support {

struct CommandResult {
  int exit_code = -1;   // exit status, or 128 + signal when killed
  std::string output;   // stdout and stderr together
  int signal = 0;       // the signal that killed it, 0 after a normal exit
};

inline CommandResult run_command(const std::string& command) {
  core::ProcessSpec spec;
  spec.executable = "/bin/sh";
  spec.args = {"-c", command};
  const core::CommandResult r = core::run_captured(spec);
  return {r.status.shell_code(), r.output, r.status.signal};
}

}  // namespace mlbench::testing_support
