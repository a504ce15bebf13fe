#include "operator/api/failure_policy.h"

#include <gtest/gtest.h>

namespace psflow::api {
namespace {

FailureRule OnCodes(FailureAction action, bool in, std::vector<int> values) {
  FailureRule r;
  r.action = action;
  r.on_exit_codes = ExitCodeRequirement{in, std::move(values)};
  return r;
}

FailureRule OnCondition(FailureAction action, std::string type, std::string status = "True") {
  FailureRule r;
  r.action = action;
  r.on_pod_conditions.push_back({std::move(type), std::move(status)});
  return r;
}

FailureFacts Exit(std::optional<int> code, std::map<std::string, std::string> conditions = {}) {
  return {code, std::move(conditions)};
}

TEST(FailurePolicy, TheFirstMatchingRuleDecides) {
  const std::vector<FailureRule> rules = {
      OnCodes(FailureAction::kFailJob, true, {2, 3}),
      OnCondition(FailureAction::kIgnore, "DisruptionTarget"),
      OnCodes(FailureAction::kCount, false, {2, 3, 137}),
  };
  struct Case {
    const char* name;
    FailureFacts facts;
    std::optional<FailureAction> want;
    std::string rule;
  };
  const Case cases[] = {
      {"exit 3: In [2, 3]", Exit(3), FailureAction::kFailJob,
       "podFailurePolicy rule 1 (FailJob on exit codes In [2, 3])"},
      {"exit 3 and disrupted: the first rule wins", Exit(3, {{"DisruptionTarget", "True"}}),
       FailureAction::kFailJob, "podFailurePolicy rule 1 (FailJob on exit codes In [2, 3])"},
      {"no exit code, disrupted", Exit(std::nullopt, {{"DisruptionTarget", "True"}}),
       FailureAction::kIgnore,
       "podFailurePolicy rule 2 (Ignore on pod condition DisruptionTarget=True)"},
      {"a condition with another status does not match", Exit(137, {{"DisruptionTarget", "False"}}),
       std::nullopt, ""},
      {"exit 1: NotIn [2, 3, 137]", Exit(1), FailureAction::kCount,
       "podFailurePolicy rule 3 (Count on exit codes NotIn [2, 3, 137])"},
      {"exit 137: in no rule", Exit(137), std::nullopt, ""},
      {"no exit code: no exit-code rule matches, NotIn neither", Exit(std::nullopt), std::nullopt,
       ""},
      {"exit 0 never matches NotIn", Exit(0), std::nullopt, ""},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(MatchFailureRules(rules, c.facts), c.want) << c.name;
    EXPECT_EQ(DescribeMatchedRule(rules, c.facts), c.rule) << c.name;
  }
}

TEST(FailurePolicy, NoRulesMatchNothingAndAnyListedConditionMatches) {
  EXPECT_EQ(MatchFailureRules({}, Exit(1, {{"DisruptionTarget", "True"}})), std::nullopt);
  FailureRule either = OnCondition(FailureAction::kIgnore, "DisruptionTarget");
  either.on_pod_conditions.push_back({"ConfigIssue", "True"});
  EXPECT_EQ(MatchFailureRules({either}, Exit(1, {{"ConfigIssue", "True"}})),
            FailureAction::kIgnore);
  EXPECT_EQ(DescribeMatchedRule({either}, Exit(1, {{"ConfigIssue", "True"}})),
            "podFailurePolicy rule 1 (Ignore on pod condition DisruptionTarget=True or "
            "ConfigIssue=True)");
}

TEST(FailurePolicy, ActionNames) {
  EXPECT_EQ(FailureActionName(FailureAction::kFailJob), "FailJob");
  EXPECT_EQ(FailureActionName(FailureAction::kCount), "Count");
  EXPECT_EQ(FailureActionName(FailureAction::kIgnore), "Ignore");
}

}  // namespace
}  // namespace psflow::api
