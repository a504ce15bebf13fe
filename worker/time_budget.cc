#include "worker/time_budget.h"

#include <algorithm>
#include <cmath>

namespace psflow {

int64_t StepsWithinBudget(int64_t total, int64_t done, double elapsed_s, double budget_s) {
  if (!(budget_s > 0) || done <= 0 || !(elapsed_s > 0)) return total;
  const double left = std::max(budget_s - elapsed_s, 0.0);
  const double more = std::floor(static_cast<double>(done) / elapsed_s * left);
  // Compared in double: a rate over a tiny elapsed time can exceed int64_t.
  if (more >= static_cast<double>(total - done)) return total;
  return done + static_cast<int64_t>(more);  // more >= 0
}

}  // namespace psflow
