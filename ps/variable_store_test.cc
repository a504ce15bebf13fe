#include "ps/variable_store.h"

#include <gtest/gtest.h>

#include <thread>

#include "core/wire.h"

namespace psflow {
namespace {

void AddTensor(google::protobuf::RepeatedPtrField<proto::NamedTensor>* list,
               const std::string& name, const std::vector<float>& values,
               const std::vector<int64_t>& shape) {
  auto* t = list->Add();
  t->set_name(name);
  EncodeFloat32(values, shape, t->mutable_tensor());
}

proto::InitializeRequest InitRequest(float lr) {
  proto::InitializeRequest r;
  r.mutable_optimizer()->set_name("sgd");
  r.mutable_optimizer()->set_learning_rate(lr);
  AddTensor(r.mutable_variables(), "w", {1.0f, 2.0f, 3.0f, 4.0f}, {2, 2});
  AddTensor(r.mutable_variables(), "b", {0.5f}, {1});
  return r;
}

std::vector<float> Values(const VariableStore& store, const std::string& name) {
  proto::PullRequest req;
  req.add_names(name);
  proto::PullResponse resp;
  EXPECT_TRUE(store.Pull(req, &resp).ok());
  const auto& t = resp.variables(0).tensor();
  std::vector<float> out(t.data().size() / 4);
  EXPECT_TRUE(
      DecodeFloat32(t, std::vector<int64_t>(t.shape().begin(), t.shape().end()), out, name).ok());
  return out;
}

TEST(VariableStore, SgdAppliesLearningRateTimesGradient) {
  VariableStore store;
  ASSERT_EQ(store.Initialize(InitRequest(0.5f)).value(), true);
  EXPECT_EQ(store.bytes(), 20);
  proto::PushRequest push;
  AddTensor(push.mutable_gradients(), "w", {1.0f, -2.0f, 0.0f, 8.0f}, {2, 2});
  AddTensor(push.mutable_gradients(), "b", {0.25f}, {1});
  ASSERT_EQ(store.Push(push).value(), 1);
  EXPECT_EQ(Values(store, "w"), (std::vector<float>{0.5f, 3.0f, 3.0f, 0.0f}));
  EXPECT_EQ(Values(store, "b"), (std::vector<float>{0.375f}));
  ASSERT_EQ(store.Push(push).value(), 2);
  EXPECT_EQ(Values(store, "w"), (std::vector<float>{0.0f, 4.0f, 3.0f, -4.0f}));
  EXPECT_EQ(store.global_step(), 2);
}

TEST(VariableStore, SecondInitializeLeavesVariablesAlone) {
  VariableStore store;
  ASSERT_TRUE(store.Initialize(InitRequest(0.5f)).value());
  proto::PushRequest push;
  AddTensor(push.mutable_gradients(), "b", {1.0f}, {1});
  ASSERT_TRUE(store.Push(push).ok());
  EXPECT_EQ(store.Initialize(InitRequest(0.5f)).value(), false);
  EXPECT_EQ(Values(store, "b"), (std::vector<float>{0.0f}));
  EXPECT_EQ(store.global_step(), 1);
}

TEST(VariableStore, BadRequestsChangeNothing) {
  VariableStore store;
  proto::PullRequest all;
  proto::PullResponse resp;
  EXPECT_EQ(store.Pull(all, &resp).code(), absl::StatusCode::kFailedPrecondition);
  proto::InitializeRequest bad_lr = InitRequest(0.0f);
  EXPECT_EQ(store.Initialize(bad_lr).status().code(), absl::StatusCode::kInvalidArgument);
  proto::InitializeRequest dup = InitRequest(0.1f);
  AddTensor(dup.mutable_variables(), "w", {1}, {1});
  EXPECT_EQ(store.Initialize(dup).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(store.ready());
  ASSERT_TRUE(store.Initialize(InitRequest(0.5f)).value());

  // The first gradient is fine, the second has the wrong shape: neither is applied.
  proto::PushRequest push;
  AddTensor(push.mutable_gradients(), "b", {1.0f}, {1});
  AddTensor(push.mutable_gradients(), "w", {1.0f, 1.0f}, {2});
  EXPECT_EQ(store.Push(push).status().code(), absl::StatusCode::kInvalidArgument);
  proto::PushRequest unknown;
  AddTensor(unknown.mutable_gradients(), "b", {1.0f}, {1});
  AddTensor(unknown.mutable_gradients(), "nope", {1.0f}, {1});
  EXPECT_EQ(store.Push(unknown).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Values(store, "b"), (std::vector<float>{0.5f}));
  EXPECT_EQ(store.global_step(), 0);

  proto::PushRequest twice;
  AddTensor(twice.mutable_gradients(), "b", {1.0f}, {1});
  AddTensor(twice.mutable_gradients(), "b", {1.0f}, {1});
  EXPECT_EQ(store.Push(twice).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Push(proto::PushRequest()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Values(store, "b"), (std::vector<float>{0.5f}));
  EXPECT_EQ(store.global_step(), 0);

  proto::PullRequest missing;
  missing.add_names("nope");
  EXPECT_EQ(store.Pull(missing, &resp).code(), absl::StatusCode::kNotFound);
}

TEST(VariableStore, HugeOrNegativeShapesAreRefusedWithoutAllocating) {
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{int64_t{1} << 40},
                                            {int64_t{1} << 35, int64_t{1} << 35},
                                            {-1, 4},
                                            {3}}) {
    VariableStore store;
    proto::InitializeRequest r = InitRequest(0.1f);
    auto* t = r.mutable_variables(0)->mutable_tensor();
    t->mutable_shape()->Assign(shape.begin(), shape.end());  // data stays 16 bytes
    auto s = store.Initialize(r);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << shape[0];
    EXPECT_FALSE(store.ready());
  }
}

TEST(VariableStore, PullAllReturnsEveryVariableInNameOrder) {
  VariableStore store;
  ASSERT_TRUE(store.Initialize(InitRequest(0.1f)).ok());
  proto::PullResponse resp;
  ASSERT_TRUE(store.Pull(proto::PullRequest(), &resp).ok());
  ASSERT_EQ(resp.variables_size(), 2);
  EXPECT_EQ(resp.variables(0).name(), "b");
  EXPECT_EQ(resp.variables(1).name(), "w");
  // A reused response shrinks to what the next pull asks for.
  proto::PullRequest one;
  one.add_names("w");
  ASSERT_TRUE(store.Pull(one, &resp).ok());
  EXPECT_EQ(resp.variables_size(), 1);
}

TEST(VariableStore, ConcurrentPushesAndPullsLoseNoUpdate) {
  VariableStore store;
  proto::InitializeRequest init;
  init.mutable_optimizer()->set_name("sgd");
  init.mutable_optimizer()->set_learning_rate(1.0f);
  AddTensor(init.mutable_variables(), "v", std::vector<float>(1000, 0.0f), {1000});
  ASSERT_TRUE(store.Initialize(init).ok());
  proto::PushRequest push;
  AddTensor(push.mutable_gradients(), "v", std::vector<float>(1000, -1.0f), {1000});
  constexpr int kThreads = 4, kPushes = 250;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      proto::PullResponse resp;
      for (int i = 0; i < kPushes; ++i) {
        ASSERT_TRUE(store.Push(push).ok());
        ASSERT_TRUE(store.Pull(proto::PullRequest(), &resp).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store.global_step(), kThreads * kPushes);
  for (float x : Values(store, "v")) ASSERT_EQ(x, kThreads * kPushes);
}

}  // namespace
}  // namespace psflow
