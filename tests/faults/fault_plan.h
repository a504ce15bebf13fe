// A seeded schedule of faults against one `psflow run` job: which replica is hit, how, and when.
// The same seed and options give the same plan on every machine (std::mt19937_64 and integer
// arithmetic only; no distribution whose output the standard leaves to the library).
#ifndef PSFLOW_TESTS_FAULTS_FAULT_PLAN_H_
#define PSFLOW_TESTS_FAULTS_FAULT_PLAN_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace psflow::faults {

enum class FaultKind {
  kKill,       // SIGKILL; the runner restarts the replica (restartPolicy OnFailure)
  kPause,      // SIGSTOP, then SIGCONT after `duration`
  kPartition,  // the replica's link to the bridge down for `duration` (--emulate_network only)
};
const char* FaultKindName(FaultKind kind);  // "kill", "pause", "partition"

struct Fault {
  FaultKind kind = FaultKind::kKill;
  std::string replica;                    // the runner's name: "ps-0", "chief-0", "worker-1"
  std::chrono::milliseconds at{0};        // after the chief initialised the ps tasks
  std::chrono::milliseconds duration{0};  // kPause and kPartition
};
std::string Describe(const Fault& fault);  // "kill ps-0 @4.20s", "pause worker-1 2.10s @6.00s"

struct PlanOptions {
  int ps = 1;
  int workers = 2;  // besides the chief
  int faults = 2;   // per plan
  // Faults fall in [0, window) after training starts, in time order.
  std::chrono::milliseconds window{std::chrono::seconds(8)};
  std::chrono::milliseconds min_pause{std::chrono::seconds(1)};
  std::chrono::milliseconds max_pause{std::chrono::seconds(4)};
};

// `options.faults` faults drawn from `seed`: each a kill of a ps task, the chief or a worker, or
// a pause of any replica, with the same odds (1/4 each); targets uniform among their kind.
std::vector<Fault> MakeFaultPlan(uint64_t seed, const PlanOptions& options);

}  // namespace psflow::faults

#endif  // PSFLOW_TESTS_FAULTS_FAULT_PLAN_H_
