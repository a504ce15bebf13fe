#include "tests/faults/fault_plan.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psflow::faults {
namespace {

// Uniform in [lo, hi] from raw engine output (std::uniform_int_distribution's algorithm is the
// library's choice; the plan must not change with it). The modulo bias is < 2^-40 here.
int64_t Draw(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

}  // namespace

const char* FaultKindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kKill:
      return "kill";
    case FaultKind::kPause:
      return "pause";
    case FaultKind::kPartition:
      return "partition";
  }
  return "?";
}

std::string Describe(const Fault& fault) {
  const double at = static_cast<double>(fault.at.count()) / 1e3;
  if (fault.kind == FaultKind::kKill) {
    return absl::StrFormat("kill %s @%.2fs", fault.replica, at);
  }
  return absl::StrFormat("%s %s %.2fs @%.2fs", FaultKindName(fault.kind), fault.replica,
                         static_cast<double>(fault.duration.count()) / 1e3, at);
}

std::vector<Fault> MakeFaultPlan(uint64_t seed, const PlanOptions& options) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> everyone = {"chief-0"};
  for (int i = 0; i < options.ps; ++i) everyone.push_back(absl::StrCat("ps-", i));
  for (int i = 0; i < options.workers; ++i) everyone.push_back(absl::StrCat("worker-", i));
  std::vector<Fault> plan;
  for (int f = 0; f < options.faults; ++f) {
    Fault fault;
    fault.at = std::chrono::milliseconds(Draw(rng, 0, options.window.count() - 1));
    switch (Draw(rng, 0, 3)) {
      case 0:
        fault.replica = absl::StrCat("ps-", Draw(rng, 0, options.ps - 1));
        break;
      case 1:
        fault.replica = "chief-0";
        break;
      case 2:
        fault.replica = options.workers > 0
                            ? absl::StrCat("worker-", Draw(rng, 0, options.workers - 1))
                            : "chief-0";
        break;
      default:
        fault.kind = FaultKind::kPause;
        fault.replica =
            everyone[static_cast<size_t>(Draw(rng, 0, static_cast<int64_t>(everyone.size()) - 1))];
        fault.duration = std::chrono::milliseconds(
            Draw(rng, options.min_pause.count(), options.max_pause.count()));
        break;
    }
    plan.push_back(fault);
  }
  std::stable_sort(plan.begin(), plan.end(),
                   [](const Fault& a, const Fault& b) { return a.at < b.at; });
  return plan;
}

}  // namespace psflow::faults
