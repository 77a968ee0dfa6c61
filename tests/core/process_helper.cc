// Test helper for process_test's parent-death case: starts `sleep 600` through
// core::Process, writes its pid to stdout, then waits to be killed. When the
// test SIGKILLs this helper, the sleep must die with it (PR_SET_PDEATHSIG).
#include <unistd.h>

#include <iostream>

#include "core/process.h"

int main() {
  mlbench::core::ProcessSpec spec;
  spec.executable = "/bin/sleep";
  spec.args = {"600"};
  mlbench::core::Process child(spec);
  std::cout << child.pid() << std::endl;
  for (;;) pause();
}
