#include "core/nvtx.h"

#ifdef MLBENCH_WITH_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace mlbench::core::nvtx {

bool available() {
#ifdef MLBENCH_WITH_NVTX
  return true;
#else
  return false;
#endif
}

void enable(bool on) {
  enabled_flag().store(on && available(), std::memory_order_relaxed);
}

void push(const char* name) {
#ifdef MLBENCH_WITH_NVTX
  nvtxRangePushA(name);
#else
  (void)name;
#endif
}

void pop() {
#ifdef MLBENCH_WITH_NVTX
  nvtxRangePop();
#endif
}

}  // namespace mlbench::core::nvtx
