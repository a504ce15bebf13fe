#include "core/prometheus_text.h"

#include <gtest/gtest.h>

namespace psflow {
namespace {

constexpr char kText[] = R"(# HELP psflow_worker_examples_total Training examples processed.
# TYPE psflow_worker_examples_total counter
psflow_worker_examples_total{job="j",replica_index="0"} 1200
psflow_worker_examples_total{job="j",replica_index="1"} 800.5
psflow_worker_examples_total_extra 7
psflow_worker_loss 0.25
)";

TEST(PrometheusText, SumsEverySeriesOfExactlyThatName) {
  EXPECT_EQ(SumSamples(kText, "psflow_worker_examples_total"), 2000.5);
  EXPECT_EQ(SumSamples(kText, "psflow_worker_loss"), 0.25);
  EXPECT_EQ(SumSamples(kText, "psflow_worker_los"), std::nullopt);
  EXPECT_EQ(SumSamples("", "psflow_worker_loss"), std::nullopt);
}

}  // namespace
}  // namespace psflow
