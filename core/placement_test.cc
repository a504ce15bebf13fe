#include "core/placement.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace psflow {
namespace {

// The variables of the seeds' models, with their TensorFlow shapes (see issue 4's model zoo).
std::vector<VariableInfo> PtbLstm(int64_t hidden, int layers) {
  std::vector<VariableInfo> v = {{"embedding", {10000, hidden}}};
  for (int l = 0; l < layers; ++l) {
    const std::string cell = "lstm/cell_" + std::to_string(l);
    v.push_back({cell + "/kernel", {2 * hidden, 4 * hidden}});
    v.push_back({cell + "/bias", {4 * hidden}});
  }
  v.push_back({"softmax_w", {hidden, 10000}});
  v.push_back({"softmax_b", {10000}});
  return v;
}

std::map<std::string, std::vector<VariableInfo>> SeedModels() {
  return {
      {"mnist_mlp", {{"hid_w", {784, 100}}, {"hid_b", {100}}, {"sm_w", {100, 10}}, {"sm_b", {10}}}},
      {"mnist_cnn",
       {{"conv1/w", {5, 5, 1, 32}},
        {"conv1/b", {32}},
        {"conv2/w", {5, 5, 32, 64}},
        {"conv2/b", {64}},
        {"fc1/w", {3136, 1024}},
        {"fc1/b", {1024}},
        {"fc2/w", {1024, 10}},
        {"fc2/b", {10}}}},
      {"cifar10_cnn",
       {{"conv1/weights", {5, 5, 3, 64}},
        {"conv1/biases", {64}},
        {"conv2/weights", {5, 5, 64, 64}},
        {"conv2/biases", {64}},
        {"local3/weights", {2304, 384}},
        {"local3/biases", {384}},
        {"local4/weights", {384, 192}},
        {"local4/biases", {192}},
        {"softmax_linear/weights", {192, 10}},
        {"softmax_linear/biases", {10}}}},
      {"ptb_small", PtbLstm(200, 2)},
      {"ptb_medium", PtbLstm(650, 2)},
      {"ptb_large", PtbLstm(1500, 2)},
      {"ptb_test", PtbLstm(2, 1)},
  };
}

TEST(Placement, EverySeedModelIsBalancedOnOneToFourTasks) {
  for (const auto& [model, variables] : SeedModels()) {
    for (int tasks = 1; tasks <= 4; ++tasks) {
      auto p = PlaceVariables(variables, tasks);
      ASSERT_TRUE(p.ok()) << model << ": " << p.status();
      EXPECT_LE(p->imbalance(), 1.1) << model << " on " << tasks << " tasks: " << p->Describe();
      // Every row of every variable is held exactly once.
      std::vector<int64_t> rows(variables.size(), 0);
      int64_t total = 0;
      for (const auto& part : p->partitions) {
        rows[part.variable] += part.row_end - part.row_begin;
        total += part.bytes();
        EXPECT_EQ(p->task_partitions[part.task][part.index_on_task], &part - p->partitions.data());
      }
      for (size_t i = 0; i < variables.size(); ++i) {
        EXPECT_EQ(rows[i], variables[i].shape.empty() ? 1 : variables[i].shape[0]) << model;
      }
      int64_t sum = 0;
      for (int64_t b : p->bytes_per_task) sum += b;
      EXPECT_EQ(sum, total);
    }
  }
}

TEST(Placement, PtbLargeEmbeddingAndSoftmaxAreSplitAcrossEveryTask) {
  const auto variables = PtbLstm(1500, 2);
  for (int tasks = 2; tasks <= 4; ++tasks) {
    auto p = PlaceVariables(variables, tasks);
    ASSERT_TRUE(p.ok());
    for (const std::string name : {"embedding", "softmax_w"}) {
      std::set<int> holders;
      for (const auto& part : p->partitions) {
        if (variables[part.variable].name == name) holders.insert(part.task);
      }
      EXPECT_EQ(holders.size(), static_cast<size_t>(tasks)) << name << ": " << p->Describe();
    }
  }
}

TEST(Placement, OneTaskHoldsEveryVariableWhole) {
  auto p = PlaceVariables(SeedModels()["mnist_mlp"], 1);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->partitions.size(), 4u);
  for (const auto& part : p->partitions) EXPECT_EQ(part.num_parts, 1);
  EXPECT_EQ(p->bytes_per_task, (std::vector<int64_t>{318040}));
  EXPECT_EQ(p->task_partitions[0], (std::vector<int>{0, 1, 2, 3}));
}

TEST(Placement, SplitsAlongTheFirstDimensionIntoNearlyEqualRowRanges) {
  // 1000 rows of 64 floats = 256000 bytes; piece = max(16 KiB, 256000 / (2 * 8)) = 16384
  // bytes, so ceil(256000 / 16384) = 16 parts of 62 or 63 rows.
  auto p =
      PlaceVariables({{"w", {1000, 64}}}, 2, {.min_partition_bytes = 16384, .pieces_per_task = 8});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->partitions.size(), 16u);
  int64_t next = 0;
  for (const auto& part : p->partitions) {
    EXPECT_EQ(part.row_begin, next);
    EXPECT_TRUE(part.row_end - part.row_begin == 62 || part.row_end - part.row_begin == 63);
    EXPECT_EQ(part.row_elements, 64);
    next = part.row_end;
  }
  EXPECT_EQ(next, 1000);
  EXPECT_EQ(p->bytes_per_task[0], 128000);
  EXPECT_EQ(p->bytes_per_task[1], 128000);
}

TEST(Placement, DeterministicAndIndependentOfOtherProcesses) {
  const auto variables = SeedModels()["cifar10_cnn"];
  auto a = PlaceVariables(variables, 3);
  auto b = PlaceVariables(variables, 3);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->fingerprint, b->fingerprint);
  ASSERT_EQ(a->partitions.size(), b->partitions.size());
  for (size_t i = 0; i < a->partitions.size(); ++i) {
    EXPECT_EQ(a->partitions[i].task, b->partitions[i].task);
    EXPECT_EQ(a->partitions[i].row_begin, b->partitions[i].row_begin);
  }
  // A different model or task count gives a different fingerprint.
  EXPECT_NE(a->fingerprint, PlaceVariables(variables, 2)->fingerprint);
  auto changed = variables;
  changed[4].shape = {2304, 385};
  EXPECT_NE(a->fingerprint, PlaceVariables(changed, 3)->fingerprint);
}

TEST(Placement, EqualSizesTieByName) {
  auto p1 = PlaceVariables({{"x", {4}}, {"y", {4}}}, 2);
  auto p2 = PlaceVariables({{"y", {4}}, {"x", {4}}}, 2);
  ASSERT_TRUE(p1.ok() && p2.ok());
  // "x" sorts first by name, so it lands on task 0 in both orders.
  EXPECT_EQ(p1->partitions[0].task, 0);
  EXPECT_EQ(p2->partitions[0].task, 1);
}

TEST(Placement, RejectsBadInput) {
  EXPECT_EQ(PlaceVariables({{"a", {1}}}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlaceVariables({{"a", {1}}, {"a", {2}}}, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlaceVariables({}, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlaceVariables({{"", {1}}}, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlaceVariables({{"a", {-1, 3}}}, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Placement, RoundRobinPutsVariableIOnTaskIModN) {
  const auto variables = SeedModels()["cifar10_cnn"];
  auto p = PlaceVariables(variables, 2, {.strategy = PlacementStrategy::kRoundRobin});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->partitions.size(), variables.size());
  for (size_t i = 0; i < variables.size(); ++i) {
    EXPECT_EQ(p->partitions[i].task, static_cast<int>(i % 2)) << variables[i].name;
    EXPECT_EQ(p->partitions[i].num_parts, 1);
  }
  // TensorFlow 1.x's imbalance on the seed's model: the weights on task 0, the biases on task 1.
  EXPECT_EQ(p->bytes_per_task[0],
            4 * (5 * 5 * 3 * 64 + 5 * 5 * 64 * 64 + 2304 * 384 + 384 * 192 + 192 * 10));
  EXPECT_EQ(p->bytes_per_task[1], 4 * (64 + 64 + 384 + 192 + 10));
  EXPECT_NE(p->fingerprint, PlaceVariables(variables, 2)->fingerprint);
  // One task: the same layout, and so the same fingerprint, as balanced.
  EXPECT_EQ(PlaceVariables(variables, 1, {.strategy = PlacementStrategy::kRoundRobin})->fingerprint,
            PlaceVariables(variables, 1)->fingerprint);
}

TEST(Placement, ParsesItsStrategies) {
  EXPECT_EQ(*ParsePlacementStrategy("balanced"), PlacementStrategy::kBalanced);
  EXPECT_EQ(*ParsePlacementStrategy("round_robin"), PlacementStrategy::kRoundRobin);
  EXPECT_EQ(ParsePlacementStrategy("roundrobin").status().message(),
            "unknown placement \"roundrobin\" (balanced or round_robin)");
}

}  // namespace
}  // namespace psflow
