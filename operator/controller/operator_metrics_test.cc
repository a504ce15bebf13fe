#include "operator/controller/operator_metrics.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace psflow::controller {
namespace {

std::string Exposition(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

// A replica that loses the lead stops counting jobs and its queue: it shows 0, not what it saw
// last, beside the new leader's figures (the dashboards take the max over replicas).
TEST(OperatorMetrics, AReplicaThatStopsLeadingZeroesWhatOnlyALeaderMeasures) {
  prometheus::Registry registry;
  OperatorMetrics metrics(registry);
  metrics.SetLeading(true);
  metrics.SetJobsByState({{"Running", 2}, {"Created", 1}});
  metrics.workqueue_depth.Set(3);
  std::string text = Exposition(registry);
  EXPECT_TRUE(absl::StrContains(text, "psflow_operator_leader 1")) << text;
  EXPECT_TRUE(absl::StrContains(text, "psflow_operator_jobs{state=\"Running\"} 2")) << text;
  EXPECT_TRUE(absl::StrContains(text, "psflow_operator_workqueue_depth 3")) << text;
  metrics.SetLeading(false);
  text = Exposition(registry);
  EXPECT_TRUE(absl::StrContains(text, "psflow_operator_leader 0")) << text;
  EXPECT_TRUE(absl::StrContains(text, "psflow_operator_jobs{state=\"Running\"} 0")) << text;
  EXPECT_TRUE(absl::StrContains(text, "psflow_operator_jobs{state=\"Created\"} 0")) << text;
  EXPECT_TRUE(absl::StrContains(text, "psflow_operator_workqueue_depth 0")) << text;
}

}  // namespace
}  // namespace psflow::controller
