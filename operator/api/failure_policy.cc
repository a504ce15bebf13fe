#include "operator/api/failure_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psflow::api {
namespace {

bool Matches(const FailureRule& rule, const FailureFacts& facts) {
  if (rule.on_exit_codes) {
    if (!facts.exit_code || *facts.exit_code == 0) return false;
    const bool listed = std::binary_search(rule.on_exit_codes->values.begin(),
                                           rule.on_exit_codes->values.end(), *facts.exit_code);
    return listed == rule.on_exit_codes->in;
  }
  return std::any_of(rule.on_pod_conditions.begin(), rule.on_pod_conditions.end(),
                     [&](const PodConditionRequirement& c) {
                       auto it = facts.conditions.find(c.type);
                       return it != facts.conditions.end() && it->second == c.status;
                     });
}

// The index of the first rule that matches, or -1.
int FirstMatch(const std::vector<FailureRule>& rules, const FailureFacts& facts) {
  for (size_t i = 0; i < rules.size(); ++i) {
    if (Matches(rules[i], facts)) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

absl::string_view FailureActionName(FailureAction action) {
  switch (action) {
    case FailureAction::kFailJob:
      return "FailJob";
    case FailureAction::kCount:
      return "Count";
    case FailureAction::kIgnore:
      return "Ignore";
  }
  return "?";
}

std::optional<FailureAction> MatchFailureRules(const std::vector<FailureRule>& rules,
                                               const FailureFacts& facts) {
  const int i = FirstMatch(rules, facts);
  if (i < 0) return std::nullopt;
  return rules[i].action;
}

std::string DescribeMatchedRule(const std::vector<FailureRule>& rules, const FailureFacts& facts) {
  const int i = FirstMatch(rules, facts);
  if (i < 0) return "";
  const FailureRule& rule = rules[i];
  std::string on;
  if (rule.on_exit_codes) {
    on = absl::StrCat("exit codes ", rule.on_exit_codes->in ? "In" : "NotIn", " [",
                      absl::StrJoin(rule.on_exit_codes->values, ", "), "]");
  } else {
    std::vector<std::string> conditions;
    for (const PodConditionRequirement& c : rule.on_pod_conditions) {
      conditions.push_back(absl::StrCat(c.type, "=", c.status));
    }
    on = absl::StrCat("pod condition ", absl::StrJoin(conditions, " or "));
  }
  return absl::StrCat("podFailurePolicy rule ", i + 1, " (", FailureActionName(rule.action), " on ",
                      on, ")");
}

}  // namespace psflow::api
