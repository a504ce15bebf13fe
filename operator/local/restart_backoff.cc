#include "operator/local/restart_backoff.h"

#include <algorithm>

namespace psflow::local {

std::chrono::milliseconds RestartDelay(int quick_runs) {
  if (quick_runs < 2) return std::chrono::milliseconds(0);
  // 250 ms doubled per further quick run, capped (the shift capped first: no overflow).
  const int doublings = std::min(quick_runs - 2, 16);
  return std::min(std::chrono::milliseconds(250) * (int64_t{1} << doublings), kMaxRestartDelay);
}

}  // namespace psflow::local
