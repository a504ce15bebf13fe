// psflow run's CrashLoopBackOff: a replica that keeps failing soon after it starts waits longer
// before each restart, so a command that exits at once under restarts the job does not count (an
// Evaluator's, or those a podFailurePolicy rule Ignores) does not spin. The kubelet waits 10 s,
// 20 s, ... up to 5 min before every restart of a pod; here a replica that ran for kQuickRun or
// longer, or failed quickly once, restarts at once (a ps killed mid-job is back at once), and only
// consecutive quick failures wait: 0.25 s, 0.5 s, 1 s, ... up to kMaxRestartDelay.
#ifndef PSFLOW_OPERATOR_LOCAL_RESTART_BACKOFF_H_
#define PSFLOW_OPERATOR_LOCAL_RESTART_BACKOFF_H_

#include <chrono>

namespace psflow::local {

inline constexpr std::chrono::seconds kQuickRun{10};
inline constexpr std::chrono::milliseconds kMaxRestartDelay{10000};

// The wait before a restart, given `quick_runs`: how many of the replica's runs in a row, the one
// that just ended included, ended within kQuickRun of their start (0: this one ran longer).
std::chrono::milliseconds RestartDelay(int quick_runs);

}  // namespace psflow::local

#endif  // PSFLOW_OPERATOR_LOCAL_RESTART_BACKOFF_H_
