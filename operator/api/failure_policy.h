// A replica type's failure rules (spec.replicaSpecs.<T>.podFailurePolicy, after Kubernetes Job's
// podFailurePolicy): what happens when one of its replicas fails, decided from the main
// container's exit code or the pod's conditions before its restartPolicy is asked.
//
//   podFailurePolicy:
//     rules:
//       - action: FailJob                      # the program's own verdict: do not retry
//         onExitCodes: {operator: In, values: [2, 3]}
//       - action: Ignore                       # preempted, evicted, node lost: not the program's
//         onPodConditions: [{type: DisruptionTarget}]
//
// Actions: FailJob (the job fails now, naming the replica and the rule), Count (the replica is
// run again and the restart counts against backoffLimit), Ignore (run again, not counted).
// onExitCodes matches a failure whose main container exited with a code In (or NotIn) `values`;
// a replica that ended without an exit code (evicted, node lost) or with 0 never matches it.
// onPodConditions matches when the pod has any of the listed conditions with the given status
// (default "True"). The first rule that matches decides; when none does, a pod with the condition
// DisruptionTarget True (Kubernetes sets it on a pod it preempts, evicts or deletes for a lost
// node) is run again without counting (kDefaultDisruptionAction), and otherwise the replica's
// restartPolicy decides as it always has (api/job_policy.h). Locally (`psflow run`) processes
// have no pod conditions: only onExitCodes rules can match.
#ifndef PSFLOW_OPERATOR_API_FAILURE_POLICY_H_
#define PSFLOW_OPERATOR_API_FAILURE_POLICY_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace psflow::api {

enum class FailureAction { kFailJob, kCount, kIgnore };
// "FailJob", "Count", "Ignore".
absl::string_view FailureActionName(FailureAction action);

struct ExitCodeRequirement {
  bool in = true;           // operator In (else NotIn)
  std::vector<int> values;  // 0..255, sorted, unique; In never lists 0
};

struct PodConditionRequirement {
  std::string type;             // e.g. "DisruptionTarget"
  std::string status = "True";  // "True", "False" or "Unknown"
};

struct FailureRule {
  FailureAction action = FailureAction::kCount;
  // Exactly one of the two is given.
  std::optional<ExitCodeRequirement> on_exit_codes;
  std::vector<PodConditionRequirement> on_pod_conditions;
};

// At most this many rules per replica type (as Kubernetes' podFailurePolicy).
inline constexpr int kMaxFailureRules = 20;

// How a replica failed, as the rules see it.
struct FailureFacts {
  std::optional<int> exit_code;                   // the main container's; nullopt: none
  std::map<std::string, std::string> conditions;  // the pod's: type -> status
};

// The rule's action that applies to `facts` (the first rule that matches), else nullopt.
std::optional<FailureAction> MatchFailureRules(const std::vector<FailureRule>& rules,
                                               const FailureFacts& facts);
// The rule MatchFailureRules chose, described for a message: "rule 1 (FailJob on exit codes In
// [2, 3])"; "" when none matched.
std::string DescribeMatchedRule(const std::vector<FailureRule>& rules, const FailureFacts& facts);

// What a failure no rule matches gets when its pod carries DisruptionTarget True.
inline constexpr FailureAction kDefaultDisruptionAction = FailureAction::kIgnore;
inline constexpr char kDisruptionTarget[] = "DisruptionTarget";

}  // namespace psflow::api

#endif  // PSFLOW_OPERATOR_API_FAILURE_POLICY_H_
