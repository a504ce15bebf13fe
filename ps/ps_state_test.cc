#include "ps/ps_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/byte_source.h"
#include "core/frame.h"
#include "prometheus/registry.h"
#include "proto/ps.pb.h"
#include "ps/checkpoint.h"
#include "ps/checkpoint_scheduler.h"
#include "ps/ps_metrics.h"
#include "ps/versioned_values.h"

namespace psflow {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr uint64_t kFingerprint = 0x5EED0F5EED0F0001ull;

// The task's partitions: 0 = w rows [0, 2) and 1 = w rows [2, 4) of a {4, 2} variable ("w[0:2]",
// "w[2:4]", 4 elements each), 2 = b, a whole {3} variable. 11 elements in all, in this order.
constexpr int kNumElements = 11;
std::vector<float> Init() { return {1, 2, 3, 4, 5, 6, 7, 8, 10, 20, 30}; }

// --- Requests ------------------------------------------------------------------------------------

proto::OptimizerConfig Sgd(float lr) {
  proto::OptimizerConfig c;
  c.set_name("sgd");
  c.set_learning_rate(lr);
  return c;
}

proto::OptimizerConfig Momentum(float lr, float momentum, bool nesterov = false) {
  proto::OptimizerConfig c;
  c.set_name("momentum");
  c.set_learning_rate(lr);
  c.set_momentum(momentum);
  c.set_use_nesterov(nesterov);
  return c;
}

proto::OptimizerConfig Adam(float lr) {
  proto::OptimizerConfig c;
  c.set_name("adam");
  c.set_learning_rate(lr);
  return c;
}

proto::SyncConfig Async(int workers = 1) {
  proto::SyncConfig s;
  s.set_total_workers(workers);
  return s;
}

proto::SyncConfig Sync(int workers, int aggregate) {
  proto::SyncConfig s;
  s.set_sync_replicas(true);
  s.set_total_workers(workers);
  s.set_replicas_to_aggregate(aggregate);
  return s;
}

proto::InitializeRequest Request(const proto::OptimizerConfig& optimizer,
                                 const proto::SyncConfig& sync, bool commit = false,
                                 uint64_t fingerprint = kFingerprint) {
  proto::InitializeRequest r;
  for (int64_t begin : {0, 2}) {
    proto::PartitionSpec* p = r.add_partitions();
    p->set_variable("w");
    p->add_variable_shape(4);
    p->add_variable_shape(2);
    p->set_row_begin(begin);
    p->set_row_end(begin + 2);
  }
  proto::PartitionSpec* b = r.add_partitions();
  b->set_variable("b");
  b->add_variable_shape(3);
  b->set_row_begin(0);
  b->set_row_end(3);
  *r.mutable_optimizer() = optimizer;
  *r.mutable_sync() = sync;
  r.set_fingerprint(fingerprint);
  r.set_commit(commit);
  return r;
}

// --- Frames --------------------------------------------------------------------------------------

struct Seg {
  uint32_t partition = 0;
  int64_t offset = 0;
  int64_t count = 0;
  std::vector<int64_t> rows = {};
};

// Every element of the task: the three partitions whole.
std::vector<Seg> All() { return {{0, 0, 4}, {1, 0, 4}, {2, 0, 3}}; }
// Chunk 0 and chunk 1 of a two-chunk push: w's partitions, then b.
std::vector<Seg> Chunk0() { return {{0, 0, 4}, {1, 0, 4}}; }
std::vector<Seg> Chunk1() { return {{2, 0, 3}}; }

proto::TransferHeader Header(proto::TransferKind kind, const std::vector<Seg>& segments,
                             int64_t step = 0, int worker = 0, uint32_t chunk = 0,
                             uint32_t num_chunks = 1) {
  proto::TransferHeader h;
  h.set_kind(kind);
  h.set_fingerprint(kFingerprint);
  h.set_wire_dtype(proto::DT_FLOAT32);
  h.set_step(step);
  h.set_worker(worker);
  h.set_chunk(chunk);
  h.set_num_chunks(num_chunks);
  h.set_examples(32);
  for (const Seg& s : segments) {
    proto::Segment* seg = h.add_segments();
    seg->set_partition(s.partition);
    seg->set_offset(s.offset);
    seg->set_count(s.count);
    for (int64_t r : s.rows) seg->add_rows(r);
  }
  return h;
}

proto::TransferHeader Gradient(const std::vector<Seg>& segments, int64_t step = 0, int worker = 0,
                               uint32_t chunk = 0, uint32_t num_chunks = 1) {
  return Header(proto::TK_GRADIENT, segments, step, worker, chunk, num_chunks);
}

std::string Frame(const proto::TransferHeader& header, std::span<const float> payload) {
  std::string frame = EncodeFrameHeader(header);
  frame.append(reinterpret_cast<const char*>(payload.data()), payload.size_bytes());
  return frame;
}

// `frame` as pieces of `piece` bytes (the last shorter), as gRPC may slice a message; 0: whole.
std::vector<std::span<const std::byte>> Pieces(const std::string& frame, size_t piece) {
  const auto* data = reinterpret_cast<const std::byte*>(frame.data());
  if (piece == 0) return {std::span<const std::byte>(data, frame.size())};
  std::vector<std::span<const std::byte>> pieces;
  for (size_t at = 0; at < frame.size(); at += piece) {
    pieces.emplace_back(data + at, std::min(piece, frame.size() - at));
  }
  return pieces;
}

absl::StatusOr<proto::TransferReply> PushFrame(PsState& state, const std::string& frame,
                                               size_t piece = 0) {
  ByteSource source(Pieces(frame, piece));
  return state.Push(source);
}

absl::StatusOr<proto::TransferReply> Push(PsState& state, const proto::TransferHeader& header,
                                          std::span<const float> payload, size_t piece = 0) {
  return PushFrame(state, Frame(header, payload), piece);
}

absl::StatusOr<int64_t> CheckPullFrame(const PsState& state, const std::string& frame,
                                       proto::TransferHeader* header) {
  ByteSource source(Pieces(frame, 3));
  return state.CheckPull(source, header);
}

// Pulls the segments (CheckPull + FillPull); empty on error (reported as a failure).
std::vector<float> PullSegments(const PsState& state, const std::vector<Seg>& segments,
                                int64_t* step = nullptr) {
  proto::TransferHeader header;
  auto bytes = CheckPullFrame(state, EncodeFrameHeader(Header(proto::TK_PULL, segments)), &header);
  if (!bytes.ok()) {
    ADD_FAILURE() << bytes.status();
    return {};
  }
  EXPECT_EQ(*bytes % 4, 0);
  std::vector<float> values(static_cast<size_t>(*bytes / 4), -12345.0f);
  const proto::TransferReply reply =
      state.FillPull(header, reinterpret_cast<std::byte*>(values.data()));
  EXPECT_FALSE(reply.timed_out());
  EXPECT_FALSE(reply.dropped());
  if (step != nullptr) *step = reply.global_step();
  return values;
}

// The push went through and was not dropped.
::testing::AssertionResult Accepted(const absl::StatusOr<proto::TransferReply>& reply) {
  if (!reply.ok()) return ::testing::AssertionFailure() << reply.status();
  if (reply->dropped()) return ::testing::AssertionFailure() << "dropped";
  return ::testing::AssertionSuccess();
}

// The push went through and was dropped.
::testing::AssertionResult Dropped(const absl::StatusOr<proto::TransferReply>& reply) {
  if (!reply.ok()) return ::testing::AssertionFailure() << reply.status();
  if (!reply->dropped()) return ::testing::AssertionFailure() << "not dropped";
  return ::testing::AssertionSuccess();
}

std::vector<float> PullAll(const PsState& state) { return PullSegments(state, All()); }

// Floats of small integers and halves: compared exactly.
void ExpectValues(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_FLOAT_EQ(actual[i], expected[i]) << "element " << i;
  }
}

// Every element is its initial value minus `delta` (within 4 ulps).
void ExpectShifted(const std::vector<float>& actual, float delta) {
  const std::vector<float> init = Init();
  ASSERT_EQ(actual.size(), init.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_FLOAT_EQ(actual[i], init[i] - delta) << "element " << i;
  }
}

std::vector<float> Fill(float v) { return std::vector<float>(kNumElements, v); }

std::span<const float> Part(const std::vector<float>& v, size_t begin, size_t end) {
  return std::span<const float>(v).subspan(begin, end - begin);
}

// The chief's flow: create the partitions, assign `init` (in two frames, sliced), commit.
void InitializeAsChief(PsState& state, const proto::InitializeRequest& request,
                       const std::vector<float>& init = Init()) {
  proto::InitializeRequest create = request;
  create.set_commit(false);
  auto created = state.Initialize(create);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(created->initialized_now());
  EXPECT_FALSE(state.ReadyResponse().ready());

  auto r = Push(state, Header(proto::TK_ASSIGN, Chunk0()), Part(init, 0, 8), 5);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->dropped());
  r = Push(state, Header(proto::TK_ASSIGN, Chunk1()), Part(init, 8, 11), 1);
  ASSERT_TRUE(r.ok()) << r.status();

  proto::InitializeRequest commit = request;
  commit.set_commit(true);
  auto committed = state.Initialize(commit);
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_TRUE(committed->initialized_now());
  EXPECT_EQ(committed->global_step(), 0);
  EXPECT_TRUE(state.ReadyResponse().ready());
}

std::unique_ptr<PsState> ReadyState(const proto::InitializeRequest& request,
                                    PsState::Options options = {}, PsMetrics* metrics = nullptr) {
  auto state = std::make_unique<PsState>(std::move(options), metrics);
  InitializeAsChief(*state, request);
  return state;
}

// A fresh, empty folder for the running test.
std::string TestDir() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string dir = absl::StrCat(::testing::TempDir(), "psflow_ps_state_",
                                       info->test_suite_name(), "_", info->name(), "_", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

PsState::Options CheckpointOptions(const std::string& dir) {
  PsState::Options options;
  options.task = 0;
  options.checkpoint_dir = dir;
  options.keep_checkpoints = 3;
  return options;
}

struct Metrics {
  prometheus::Registry registry;
  PsMetrics ps{registry, Labels{{"job", "test"}}};
};

// --- Initialize
// ------------------------------------------------------------------------------------

TEST(PsStateTest, ChiefFlowMakesTheTaskReadyWithTheAssignedValues) {
  PsState state({}, nullptr);
  EXPECT_FALSE(state.ReadyResponse().ready());
  EXPECT_EQ(state.global_step(), -1);
  EXPECT_EQ(state.bytes(), 0);
  ASSERT_NO_FATAL_FAILURE(InitializeAsChief(state, Request(Sgd(0.5f), Sync(3, 2))));

  const proto::WaitReadyResponse ready = state.ReadyResponse();
  EXPECT_TRUE(ready.ready());
  EXPECT_EQ(ready.global_step(), 0);
  EXPECT_EQ(ready.fingerprint(), kFingerprint);
  EXPECT_TRUE(ready.sync().sync_replicas());
  EXPECT_EQ(ready.sync().total_workers(), 3);
  EXPECT_EQ(ready.sync().replicas_to_aggregate(), 2);
  EXPECT_FLOAT_EQ(ready.learning_rate(), 0.5f);
  EXPECT_EQ(state.global_step(), 0);
  EXPECT_EQ(state.bytes(), kNumElements * 4);
  int64_t step = -1;
  EXPECT_EQ(PullSegments(state, All(), &step), Init());
  EXPECT_EQ(step, 0);
}

// A chief re-creating a task that restarted without a checkpoint commits at the last step it
// saw: the task starts there, not at 0, and counts on from it.
TEST(PsStateTest, CommitAtAStartStepMakesTheTaskReadyThere) {
  PsState state({}, nullptr);
  proto::InitializeRequest request = Request(Sgd(1), Async());
  ASSERT_TRUE(state.Initialize(request).ok());
  request.set_commit(true);
  request.set_start_step(-1);
  EXPECT_EQ(state.Initialize(request).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(state.ReadyResponse().ready());
  request.set_start_step(1234);
  auto committed = state.Initialize(request);
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_TRUE(committed->initialized_now());
  EXPECT_EQ(committed->global_step(), 1234);
  EXPECT_EQ(state.ReadyResponse().global_step(), 1234);
  const auto r = Push(state, Gradient(All(), 1234), Fill(1));
  ASSERT_TRUE(Accepted(r));
  EXPECT_EQ(r->global_step(), 1235);
}

TEST(PsStateTest, PartitionsStartZeroedAndPartialAssignmentsLandAtTheirOffsets) {
  PsState state({}, nullptr);
  ASSERT_TRUE(state.Initialize(Request(Sgd(1), Async())).ok());
  const std::vector<float> values = {7, 9};
  ASSERT_TRUE(Push(state, Header(proto::TK_ASSIGN, {{1, 2, 2}}), values).ok());
  ASSERT_TRUE(state.Initialize(Request(Sgd(1), Async(), /*commit=*/true)).ok());
  ExpectValues(PullAll(state), {0, 0, 0, 0, 0, 0, 7, 9, 0, 0, 0});
}

TEST(PsStateTest, RestartedChiefReassignsBeforeCommit) {
  PsState state({}, nullptr);
  ASSERT_TRUE(state.Initialize(Request(Sgd(1), Async())).ok());
  const std::vector<float> first = Fill(99);
  ASSERT_TRUE(Push(state, Header(proto::TK_ASSIGN, All()), first).ok());
  // The chief restarts: creates again (same model) and assigns its values.
  ASSERT_NO_FATAL_FAILURE(InitializeAsChief(state, Request(Sgd(1), Async())));
  EXPECT_EQ(PullAll(state), Init());
}

TEST(PsStateTest, InitializeAfterCommitLeavesTheVariables) {
  auto state = ReadyState(Request(Sgd(1), Async()));
  const std::vector<float> g = Fill(1);
  ASSERT_TRUE(Push(*state, Gradient(All()), g).ok());
  for (bool commit : {false, true}) {
    auto r = state->Initialize(Request(Sgd(1), Async(), commit));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(r->initialized_now());
    EXPECT_EQ(r->global_step(), 1);
  }
  auto other = state->Initialize(Request(Sgd(1), Async(), false, kFingerprint + 1));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("fingerprint"));
  // A chief asking for another optimizer or step rules is refused (they would be ignored); a new
  // learning rate is not.
  auto adam = state->Initialize(Request(Adam(0.1f), Async()));
  EXPECT_EQ(adam.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(adam.status().message()), HasSubstr("optimizer sgd, async steps"));
  auto sync = state->Initialize(Request(Sgd(1), Sync(1, 1)));
  EXPECT_EQ(sync.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(state->Initialize(Request(Sgd(0.5f), Async())).ok());
  EXPECT_EQ(state->ReadyResponse().optimizer(), "sgd");
  ExpectValues(PullAll(*state), {0, 1, 2, 3, 4, 5, 6, 7, 9, 19, 29});
  EXPECT_EQ(state->global_step(), 1);
}

TEST(PsStateTest, InitializeRejectsBadRequestsAndCreatesNothing) {
  PsState state({}, nullptr);
  auto bad_sync = state.Initialize(Request(Sgd(1), Sync(2, 3)));
  EXPECT_EQ(bad_sync.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(state.Initialize(Request(Sgd(1), Async(0))).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(state.Initialize(Request(Sgd(1), Sync(2, -1))).status().code(),
            absl::StatusCode::kInvalidArgument);
  proto::OptimizerConfig unknown = Sgd(1);
  unknown.set_name("lion");
  EXPECT_EQ(state.Initialize(Request(unknown, Async())).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(state.Initialize(Request(Sgd(0), Async())).status().code(),
            absl::StatusCode::kInvalidArgument);
  proto::InitializeRequest empty = Request(Sgd(1), Async());
  empty.clear_partitions();
  EXPECT_EQ(state.Initialize(empty).status().code(), absl::StatusCode::kInvalidArgument);
  proto::InitializeRequest duplicate = Request(Sgd(1), Async());
  *duplicate.add_partitions() = duplicate.partitions(2);
  auto dup = state.Initialize(duplicate);
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dup.status().message()), HasSubstr("b"));
  proto::InitializeRequest bad_rows = Request(Sgd(1), Async());
  bad_rows.mutable_partitions(1)->set_row_end(5);
  auto rows = state.Initialize(bad_rows);
  EXPECT_EQ(rows.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(rows.status().message()), HasSubstr("\"w\""));

  // Nothing was created: assignments and a commit are still too early.
  EXPECT_EQ(Push(state, Header(proto::TK_ASSIGN, All()), Init()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(state.Initialize(Request(Sgd(1), Async(), /*commit=*/true)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(state.ReadyResponse().ready());
  // And a good request still works.
  ASSERT_NO_FATAL_FAILURE(InitializeAsChief(state, Request(Sgd(1), Async())));
}

TEST(PsStateTest, InitializeForAnotherModelBeforeCommitIsFailedPrecondition) {
  PsState state({}, nullptr);
  ASSERT_TRUE(state.Initialize(Request(Sgd(1), Async())).ok());
  EXPECT_EQ(state.Initialize(Request(Sgd(1), Async(), false, kFingerprint + 1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(state.Initialize(Request(Sgd(1), Async(), true, kFingerprint + 1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(state.ReadyResponse().ready());
}

// A model bigger than the ps may hold is refused with one line naming the bytes and the bound,
// before anything is allocated (it was a bad_alloc on a gRPC thread, or an OOM kill).
TEST(PsStateTest, InitializeBeyondTheMemoryBoundIsResourceExhaustedNamingTheBytes) {
  // 11 floats of values, one momentum slot and the sync accumulators: 3 x 44 = 132 bytes.
  PsState::Options tight;
  tight.max_variable_bytes = 131;
  tight.max_variable_bytes_source = "--max_variable_bytes";
  PsState state(tight, nullptr);
  const absl::StatusOr<proto::InitializeResponse> r =
      state.Initialize(Request(Momentum(1, 0.9f), Sync(2, 2)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("need 132 bytes (44 of values x 3: the values, 1 optimizer slot(s), the "
                        "sync accumulators), more than the 131 bytes of --max_variable_bytes"));
  EXPECT_FALSE(state.ReadyResponse().ready());

  PsState::Options enough = tight;
  enough.max_variable_bytes = 132;
  PsState fits(enough, nullptr);
  EXPECT_TRUE(fits.Initialize(Request(Momentum(1, 0.9f), Sync(2, 2))).ok());
}

// --- Async ---------------------------------------------------------------------------------------

TEST(PsStateTest, AsyncSgdAppliesEveryPush) {
  auto state = ReadyState(Request(Sgd(0.5f), Async(2)));
  const std::vector<float> g1 = {1, 2, 3, 4, -1, -2, -3, -4, 2, 4, 6};
  auto r = Push(*state, Gradient(All(), 0, 0), g1, 7);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->dropped());
  EXPECT_EQ(r->global_step(), 1);
  int64_t step = -1;
  ExpectValues(PullSegments(*state, All(), &step), {0.5, 1, 1.5, 2, 5.5, 7, 8.5, 10, 9, 18, 27});
  EXPECT_EQ(step, 1);

  // Worker 1's push, computed at step 0, in two chunks: chunk 0 counts the step.
  const std::vector<float> g2 = Fill(2);
  r = Push(*state, Gradient(Chunk0(), 0, 1, 0, 2), Part(g2, 0, 8), 3);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->global_step(), 2);
  ExpectValues(PullAll(*state), {-0.5, 0, 0.5, 1, 4.5, 6, 7.5, 9, 9, 18, 27});
  r = Push(*state, Gradient(Chunk1(), 0, 1, 1, 2), Part(g2, 8, 11));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->dropped());
  EXPECT_EQ(r->global_step(), 2);

  ExpectValues(PullSegments(*state, All(), &step), {-0.5, 0, 0.5, 1, 4.5, 6, 7.5, 9, 8, 17, 26});
  EXPECT_EQ(step, 2);
  EXPECT_EQ(state->global_step(), 2);
  EXPECT_EQ(state->ReadyResponse().global_step(), 2);

  // Pulls of parts of partitions, in any order.
  ExpectValues(PullSegments(*state, {{2, 1, 2}, {1, 1, 2}, {0, 3, 1}}), {17, 26, 6, 7.5, 1});
  ExpectValues(PullSegments(*state, {{1, 4, 0}, {2, 2, 1}}), {26});
}

TEST(PsStateTest, AsyncSparsePushUpdatesOnlyItsRows) {
  auto state = ReadyState(Request(Sgd(1), Async()));
  // w[0:2] row 1 (elements 2, 3); w[2:4] row 1 twice (the gradients add up); b rows 2 and 0; and
  // a dense run of w[2:4] in the same frame.
  const std::vector<float> g = {10, 20, 1, 1, 2, 2, 1, 2, 0.5};
  auto r = Push(*state, Gradient({{0, 0, 2, {1}}, {1, 0, 4, {1, 1}}, {2, 0, 2, {2, 0}}, {1, 0, 1}}),
                g, 5);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->global_step(), 1);
  ExpectValues(PullAll(*state), {1, 2, -7, -16, 4.5, 6, 4, 5, 8, 20, 29});
}

TEST(PsStateTest, MomentumCarriesItsSlotAcrossPushes) {
  auto state = ReadyState(Request(Momentum(0.1f, 0.9f), Async()));
  const std::vector<float> one = Fill(1);
  const std::vector<float> two = Fill(2);
  ASSERT_TRUE(Push(*state, Gradient(All()), one).ok());
  // accum = 1; var -= 0.1
  ExpectShifted(PullAll(*state), 0.1f);
  ASSERT_TRUE(Push(*state, Gradient(All(), 1), two).ok());
  // accum = 0.9 * 1 + 2 = 2.9; var -= 0.29: 0.39 in all.
  const std::vector<float> values = PullAll(*state);
  ASSERT_EQ(values.size(), 11u);
  const std::vector<float> expected = {0.61f, 1.61f, 2.61f, 3.61f,  4.61f, 5.61f,
                                       6.61f, 7.61f, 9.61f, 19.61f, 29.61f};
  for (size_t i = 0; i < values.size(); ++i) EXPECT_FLOAT_EQ(values[i], expected[i]) << i;
  EXPECT_EQ(state->global_step(), 2);
}

TEST(PsStateTest, NesterovMomentum) {
  auto state = ReadyState(Request(Momentum(0.1f, 0.9f, /*nesterov=*/true), Async()));
  const std::vector<float> one = Fill(1);
  const std::vector<float> two = Fill(2);
  ASSERT_TRUE(Push(*state, Gradient(All()), one).ok());
  ASSERT_TRUE(Push(*state, Gradient(All(), 1), two).ok());
  // Step 1: accum 1, var -= 0.1 * 1 + 0.09 * 1 = 0.19. Step 2: accum 2.9,
  // var -= 0.1 * 2 + 0.09 * 2.9 = 0.461. 0.651 in all.
  ExpectShifted(PullAll(*state), 0.651f);
}

TEST(PsStateTest, AdamCountsItsStepsFromTheGlobalStep) {
  auto state = ReadyState(Request(Adam(0.1f), Async()));
  // A constant gradient g moves every element by exactly lr * sign(g) per step once the bias is
  // corrected with the right t (t = 1, then 2): m_t / sqrt(v_t) = g (1 - b1^t) / (|g|
  // sqrt(1 - b2^t)). A wrong t at step 2 would move w by 0.134 instead of 0.1.
  const std::vector<float> g = {1, 1, 1, 1, 3, 3, 3, 3, -2, -2, -2};
  ASSERT_TRUE(Push(*state, Gradient(All()), g).ok());
  ASSERT_TRUE(Push(*state, Gradient(All(), 1), g).ok());
  const std::vector<float> values = PullAll(*state);
  ASSERT_EQ(values.size(), Init().size());
  const std::vector<float> expected = {0.8f, 1.8f, 2.8f,  3.8f,  4.8f, 5.8f,
                                       6.8f, 7.8f, 10.2f, 20.2f, 30.2f};
  for (size_t i = 0; i < Init().size(); ++i) EXPECT_FLOAT_EQ(values[i], expected[i]) << i;
}

TEST(PsStateTest, SetLearningRateChangesTheNextUpdate) {
  auto state = ReadyState(Request(Sgd(1), Async()));
  const std::vector<float> g = {4, 4, 4, 4, 8, 8, 8, 8, -4, -4, -4};
  ASSERT_TRUE(Push(*state, Gradient(All()), g).ok());
  ExpectValues(PullAll(*state), {-3, -2, -1, 0, -3, -2, -1, 0, 14, 24, 34});

  auto lr = state->SetLearningRate(0.25f);
  ASSERT_TRUE(lr.ok()) << lr.status();
  EXPECT_FLOAT_EQ(*lr, 0.25f);
  EXPECT_FLOAT_EQ(state->ReadyResponse().learning_rate(), 0.25f);
  ASSERT_TRUE(Push(*state, Gradient(All(), 1), g).ok());
  ExpectValues(PullAll(*state), {-4, -3, -2, -1, -5, -4, -3, -2, 15, 25, 35});

  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(state->SetLearningRate(bad).status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_FLOAT_EQ(state->ReadyResponse().learning_rate(), 0.25f);
  ASSERT_TRUE(Push(*state, Gradient(All(), 2), g).ok());
  ExpectValues(PullAll(*state), {-5, -4, -3, -2, -7, -6, -5, -4, 16, 26, 36});
}

// Unavailable, not failed: to a worker, a task not (or no longer) initialised is one that went
// away, and it recovers (ps_state.h).
TEST(PsStateTest, ControlCallsBeforeReadyAreUnavailable) {
  PsState state({}, nullptr);
  EXPECT_EQ(state.SetLearningRate(0.5f).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(state.Leave(0).status().code(), absl::StatusCode::kUnavailable);
  auto ckpt = state.Checkpoint();
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_FALSE(ckpt->has_value());
}

// --- Sync ----------------------------------------------------------------------------------------

TEST(PsStateTest, SyncAveragesTheWorkersGradientsOncePerStep) {
  Metrics metrics;
  auto state = ReadyState(Request(Sgd(0.5f), Sync(2, 2)), {}, &metrics.ps);
  auto step1 = std::make_shared<std::promise<bool>>();
  auto step1_answer = step1->get_future();
  state->coordinator().Park(1, {}, std::chrono::steady_clock::now() + std::chrono::hours(1),
                            [step1](bool reached) { step1->set_value(reached); });

  const std::vector<float> g0 = {2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6};
  const std::vector<float> g1 = {4, 4, 4, 4, 0, 0, 0, 0, -2, -4, -6};
  auto r = Push(*state, Gradient(All(), 0, 0), g0, 6);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->dropped());
  EXPECT_EQ(r->global_step(), 0);
  EXPECT_EQ(PullAll(*state), Init());  // accumulated, not applied
  EXPECT_EQ(step1_answer.wait_for(std::chrono::milliseconds(10)), std::future_status::timeout);

  r = Push(*state, Gradient(All(), 0, 1), g1, 6);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->dropped());
  EXPECT_EQ(r->global_step(), 1);
  ASSERT_EQ(step1_answer.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(step1_answer.get());
  // mean = {3, 4, 5, 6, 1, 2, 3, 4, 0, 0, 0}; var -= 0.5 * mean.
  const std::vector<float> after_step0 = {-0.5, 0, 0.5, 1, 4.5, 5, 5.5, 6, 10, 20, 30};
  int64_t step = -1;
  ExpectValues(PullSegments(*state, All(), &step), after_step0);
  EXPECT_EQ(step, 1);
  EXPECT_EQ(state->global_step(), 1);
  EXPECT_DOUBLE_EQ(metrics.ps.updates.Value(), 1);

  // Worker 0 again for step 0: stale, dropped, nothing changes.
  r = Push(*state, Gradient(All(), 0, 0), g0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->dropped());
  EXPECT_EQ(r->global_step(), 1);
  ExpectValues(PullAll(*state), after_step0);
  EXPECT_EQ(state->global_step(), 1);
  EXPECT_DOUBLE_EQ(metrics.ps.dropped_stale.Value(), 1);
  EXPECT_DOUBLE_EQ(metrics.ps.dropped_backup.Value(), 0);

  // Step 1 from both workers (worker 1 first this time); the accumulators started from zero.
  ASSERT_TRUE(Push(*state, Gradient(All(), 1, 1), g0).ok());
  EXPECT_EQ(state->global_step(), 1);
  r = Push(*state, Gradient(All(), 1, 0), g0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->global_step(), 2);
  ExpectValues(PullAll(*state), {-1.5, -2, -2.5, -3, 3.5, 3, 2.5, 2, 9, 18, 27});
  EXPECT_DOUBLE_EQ(metrics.ps.updates.Value(), 2);
}

TEST(PsStateTest, SyncBackupWorkerIsDroppedAndChunksWaitForEachOther) {
  Metrics metrics;
  auto state = ReadyState(Request(Sgd(0.5f), Sync(3, 2)), {}, &metrics.ps);
  const std::vector<float> g0 = {2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6};
  const std::vector<float> g1 = {4, 4, 4, 4, 0, 0, 0, 0, -2, -4, -6};
  const std::vector<float> g2 = Fill(1000);

  // Chunk 0 from workers 0 and 1: admitted. Worker 2 is the third: a backup. Chunk 0 holds
  // partitions 0 and 1 whole: both admitted workers delivered them, they are applied at once.
  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk0(), 0, 0, 0, 2), Part(g0, 0, 8))));
  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk0(), 0, 1, 0, 2), Part(g1, 0, 8))));
  auto r = Push(*state, Gradient(Chunk0(), 0, 2, 0, 2), Part(g2, 0, 8));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->dropped());
  EXPECT_EQ(r->global_step(), 0);
  r = Push(*state, Gradient(Chunk1(), 0, 2, 1, 2), Part(g2, 8, 11));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->dropped());
  EXPECT_DOUBLE_EQ(metrics.ps.dropped_backup.Value(), 2);
  // Worker 0 complete, worker 1 not yet: partition 2 waits.
  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk1(), 0, 0, 1, 2), Part(g0, 8, 11))));
  ExpectValues(PullAll(*state), {-0.5, 0, 0.5, 1, 4.5, 5, 5.5, 6, 10, 20, 30});
  EXPECT_EQ(state->global_step(), 0);

  r = Push(*state, Gradient(Chunk1(), 0, 1, 1, 2), Part(g1, 8, 11));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->dropped());
  EXPECT_EQ(r->global_step(), 1);
  // Only workers 0 and 1: var -= 0.5 * (g0 + g1) / 2.
  const std::vector<float> after_step0 = {-0.5, 0, 0.5, 1, 4.5, 5, 5.5, 6, 10, 20, 30};
  ExpectValues(PullAll(*state), after_step0);

  // The backup's push for step 0, now stale.
  r = Push(*state, Gradient(Chunk0(), 0, 2, 0, 2), Part(g2, 0, 8));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->dropped());
  EXPECT_DOUBLE_EQ(metrics.ps.dropped_stale.Value(), 1);
  ExpectValues(PullAll(*state), after_step0);
  EXPECT_EQ(state->global_step(), 1);
}

TEST(PsStateTest, SyncChunkedGradientIsAppliedPartitionByPartitionTheStepAfterItsLastChunk) {
  auto state = ReadyState(Request(Sgd(0.5f), Sync(1, 1)));
  const std::vector<float> g = {2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6};
  // Chunk 1 arrives first: its partition is whole, the only worker delivered it: applied.
  auto r = Push(*state, Gradient(Chunk1(), 0, 0, 1, 2), Part(g, 8, 11), 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->dropped());
  EXPECT_EQ(r->global_step(), 0);
  ExpectValues(PullAll(*state), {1, 2, 3, 4, 5, 6, 7, 8, 9, 18, 27});
  r = Push(*state, Gradient(Chunk0(), 0, 0, 0, 2), Part(g, 0, 8), 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->global_step(), 1);
  ExpectValues(PullAll(*state), {0, 0, 0, 0, 4, 4, 4, 4, 9, 18, 27});
}

TEST(PsStateTest, SyncSparsePushIsAccumulated) {
  auto state = ReadyState(Request(Sgd(1), Sync(2, 2)));
  const std::vector<float> sparse = {2, 4, 6};
  ASSERT_TRUE(Push(*state, Gradient({{0, 0, 2, {0}}, {2, 0, 1, {1}}}, 0, 0), sparse).ok());
  const std::vector<float> dense = Fill(2);
  ASSERT_TRUE(Push(*state, Gradient(All(), 0, 1), dense).ok());
  EXPECT_EQ(state->global_step(), 1);
  // (sparse + dense) / 2.
  ExpectValues(PullAll(*state), {-1, -1, 2, 3, 4, 5, 6, 7, 9, 16, 29});
}

// A sparse gradient updates only the rows it names, in sync mode as in async mode and alone
// (core/optimizer.h): with momentum or Adam, a row touched once stays where that step left it
// while later steps update other variables (a dense update of the partition would go on moving
// it with the row's slots).
TEST(PsStateTest, SyncSparsePushesUpdateOnlyTheirRowsAsAsyncPushesDo) {
  for (const proto::OptimizerConfig& optimizer : {Momentum(0.1f, 0.9f), Adam(0.1f)}) {
    SCOPED_TRACE(optimizer.name());
    auto sync = ReadyState(Request(optimizer, Sync(1, 1)));
    auto async = ReadyState(Request(optimizer, Async()));
    for (int step = 0; step < 3; ++step) {
      // Step 0: row 0 of w[0:2] and b; later steps: b alone.
      const std::vector<Seg> segments =
          step == 0 ? std::vector<Seg>{{0, 0, 2, {0}}, {2, 0, 3}} : std::vector<Seg>{{2, 0, 3}};
      const std::vector<float> g =
          step == 0 ? std::vector<float>{1, 1, 1, 1, 1} : std::vector<float>{1, 1, 1};
      ASSERT_TRUE(Accepted(Push(*sync, Gradient(segments, step, 0), g)));
      ASSERT_TRUE(Accepted(Push(*async, Gradient(segments, step, 0), g)));
      const std::vector<float> values = PullAll(*sync);
      EXPECT_EQ(values, PullAll(*async)) << step;
      // Both optimizers' first step moves each element by the learning rate.
      const std::vector<float> w = {0.9f, 1.9f, 3, 4, 5, 6, 7, 8};
      for (size_t i = 0; i < w.size(); ++i) EXPECT_FLOAT_EQ(values[i], w[i]) << step << " " << i;
    }
  }
}

TEST(PsStateTest, SyncLeaveCompletesTheStepWithTheWorkersThatPushed) {
  auto state = ReadyState(Request(Sgd(0.5f), Sync(2, 2)));
  const std::vector<float> g0 = {2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6};
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 0, 0), g0)));
  EXPECT_EQ(state->global_step(), 0);
  EXPECT_EQ(state->Leave(kMaxWorkers).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(state->Leave(-1).status().code(), absl::StatusCode::kInvalidArgument);
  auto step = state->Leave(1);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 1);
  // Averaged over the one worker that pushed: var -= 0.5 * g0.
  ExpectValues(PullAll(*state), {0, 0, 0, 0, 4, 4, 4, 4, 9, 18, 27});
  // Worker 0 alone makes the next steps.
  ASSERT_TRUE(Push(*state, Gradient(All(), 1, 0), g0).ok());
  EXPECT_EQ(state->global_step(), 2);
  ExpectValues(PullAll(*state), {-1, -2, -3, -4, 3, 2, 1, 0, 8, 16, 24});
  step = state->Leave(1);  // again: nothing happens
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 2);
}

// A pull parked on the state (ParkPull) for `step`; `answered` holds its answer once given (the
// pushes that make it due answer it before they return).
struct ParkedPull {
  std::shared_ptr<std::promise<bool>> promise = std::make_shared<std::promise<bool>>();
  std::future<bool> answer = promise->get_future();
  bool answered() const {
    return answer.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
};

std::unique_ptr<ParkedPull> ParkPull(PsState& state, const std::vector<Seg>& segments,
                                     int64_t step) {
  auto parked = std::make_unique<ParkedPull>();
  state.ParkPull(Header(proto::TK_PULL, segments, step),
                 std::chrono::steady_clock::now() + std::chrono::hours(1),
                 [promise = parked->promise](bool reached) { promise->set_value(reached); });
  return parked;
}

TEST(PsStateTest, SyncAppliesEachPartitionOnceEveryAdmittedWorkerDeliveredIt) {
  auto state = ReadyState(Request(Sgd(0.5f), Sync(2, 2)));
  const std::vector<float> g0 = {2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6};
  const std::vector<float> g1 = {4, 4, 4, 4, 0, 0, 0, 0, -2, -4, -6};
  auto w_first = ParkPull(*state, {{0, 0, 4}}, 1);
  auto b = ParkPull(*state, {{2, 0, 3}}, 1);
  auto all = ParkPull(*state, All(), 1);

  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk0(), 0, 0, 0, 2), Part(g0, 0, 8))));
  EXPECT_FALSE(w_first->answered());
  EXPECT_EQ(PullAll(*state), Init());
  // Worker 1's partitions 0 and 1 too: they are applied; partition 2 still waits.
  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk0(), 0, 1, 0, 2), Part(g1, 0, 8))));
  ASSERT_TRUE(w_first->answered());
  EXPECT_TRUE(w_first->answer.get());
  EXPECT_FALSE(b->answered());
  EXPECT_FALSE(all->answered());
  EXPECT_EQ(state->global_step(), 0);
  int64_t step = -1;
  ExpectValues(PullSegments(*state, {{0, 0, 4}, {1, 0, 4}}, &step),
               {-0.5, 0, 0.5, 1, 4.5, 5, 5.5, 6});
  EXPECT_EQ(step, 1);  // these partitions are at step 1 already
  ExpectValues(PullSegments(*state, {{2, 0, 3}}, &step), {10, 20, 30});
  EXPECT_EQ(step, 0);

  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk1(), 0, 0, 1, 2), Part(g0, 8, 11))));
  EXPECT_FALSE(b->answered());
  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk1(), 0, 1, 1, 2), Part(g1, 8, 11))));
  ASSERT_TRUE(b->answered() && all->answered());
  EXPECT_TRUE(b->answer.get());
  EXPECT_EQ(state->global_step(), 1);
  ExpectValues(PullAll(*state), {-0.5, 0, 0.5, 1, 4.5, 5, 5.5, 6, 10, 20, 30});
}

// Per-partition application gives exactly the values of whole pushes (each worker's gradients in
// one chunk, applied when the last worker's arrives), whatever the chunking and the order.
TEST(PsStateTest, SyncPartitionByPartitionEqualsTheWholeStepRule) {
  auto whole = ReadyState(Request(Momentum(0.25f, 0.5f), Sync(3, 2)));
  auto chunked = ReadyState(Request(Momentum(0.25f, 0.5f), Sync(3, 2)));
  // Partition 0 split across chunks 1 and 2, as a chunk plan splits a large partition.
  const std::vector<std::vector<Seg>> chunks = {{{2, 0, 3}}, {{1, 0, 4}, {0, 0, 1}}, {{0, 1, 3}}};
  for (int64_t step = 0; step < 3; ++step) {
    std::vector<std::vector<float>> g;
    for (int w = 0; w < 3; ++w) {
      std::vector<float> v(kNumElements);
      for (size_t i = 0; i < v.size(); ++i) {
        v[i] = static_cast<float>((static_cast<int>(i) * (w + 1) + 3 * static_cast<int>(step)) % 7 -
                                  3);
      }
      g.push_back(std::move(v));
    }
    // Workers 2 and 0 are admitted; worker 1 is a backup.
    ASSERT_TRUE(Accepted(Push(*whole, Gradient(All(), step, 2), g[2])));
    ASSERT_TRUE(Accepted(Push(*whole, Gradient(All(), step, 0), g[0])));
    ASSERT_TRUE(Dropped(Push(*whole, Gradient(All(), step, 1), g[1])));
    EXPECT_EQ(whole->global_step(), step + 1);

    // The chunked worker's payload is its gradients in segment order: p2, p1 + p0[0], p0[1..4).
    auto payload = [&](int w, size_t c) {
      std::vector<float> out;
      for (const Seg& s : chunks[c]) {
        const size_t base = s.partition == 0 ? 0 : s.partition == 1 ? 4 : 8;
        for (int64_t i = 0; i < s.count; ++i) {
          out.push_back(g[static_cast<size_t>(w)][base + static_cast<size_t>(s.offset + i)]);
        }
      }
      return out;
    };
    const std::vector<std::pair<int, size_t>> order = {{2, 1}, {0, 2}, {2, 0}, {1, 0},
                                                       {0, 1}, {2, 2}, {0, 0}};
    for (const auto& [w, c] : order) {
      const auto r =
          Push(*chunked, Gradient(chunks[c], step, w, static_cast<uint32_t>(c), 3), payload(w, c));
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->dropped(), w == 1) << "worker " << w << " chunk " << c;
    }
    EXPECT_EQ(chunked->global_step(), step + 1);
    EXPECT_EQ(PullAll(*chunked), PullAll(*whole)) << "step " << step;
  }
}

// A worker that leaves with half a push: none of its pieces reaches a partition; the step is the
// average of the others' gradients only.
TEST(PsStateTest, SyncWorkerLeavingMidPushHasNoneOfItsPiecesApplied) {
  auto state = ReadyState(Request(Sgd(0.5f), Sync(3, 3)));
  auto reference = ReadyState(Request(Sgd(0.5f), Sync(2, 2)));
  const std::vector<float> g0 = {2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6};
  const std::vector<float> g1 = {4, 4, 4, 4, 0, 0, 0, 0, -2, -4, -6};
  const std::vector<float> g2 = Fill(1000);
  // Worker 2, admitted first, sends half of partition 0 and half of partition 1, then leaves.
  ASSERT_TRUE(Accepted(Push(*state, Gradient({{0, 0, 2}}, 0, 2, 0, 4), Part(g2, 0, 2))));
  ASSERT_TRUE(Accepted(Push(*state, Gradient({{1, 2, 2}}, 0, 2, 1, 4), Part(g2, 6, 8))));
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 0, 0), g0)));
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 0, 1), g1)));
  EXPECT_EQ(state->global_step(), 0);
  EXPECT_EQ(PullAll(*state), Init());
  auto step = state->Leave(2);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 1);

  ASSERT_TRUE(Accepted(Push(*reference, Gradient(All(), 0, 0), g0)));
  ASSERT_TRUE(Accepted(Push(*reference, Gradient(All(), 0, 1), g1)));
  ASSERT_EQ(reference->global_step(), 1);
  EXPECT_EQ(PullAll(*state), PullAll(*reference));

  // The next step needs the two workers left, and nothing of worker 2 lingers.
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 1, 0), g1)));
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 1, 1), g0)));
  ASSERT_TRUE(Accepted(Push(*reference, Gradient(All(), 1, 0), g1)));
  ASSERT_TRUE(Accepted(Push(*reference, Gradient(All(), 1, 1), g0)));
  EXPECT_EQ(state->global_step(), 2);
  EXPECT_EQ(PullAll(*state), PullAll(*reference));
}

// Elastic workers (worker_membership.h), as `kubectl scale` makes them: a worker that finishes
// first still counts in the step it pushed to; a new worker pushing mid-step counts from the next
// step; the gauge and the dropped counter say so.
TEST(PsStateTest, SyncWorkersJoinAndLeaveAtStepBoundaries) {
  Metrics metrics;
  auto state = ReadyState(Request(Sgd(0.5f), Sync(2, 0)), {}, &metrics.ps);
  EXPECT_DOUBLE_EQ(metrics.ps.workers.Value(), 2);
  const std::vector<float> g0 = {2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6};
  const std::vector<float> g1 = Fill(2);
  auto reference = ReadyState(Request(Sgd(0.5f), Sync(2, 0)));

  // Worker 0 pushes its last step and leaves: the step still waits for worker 1.
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 0, 0), g0)));
  ASSERT_TRUE(state->Leave(0).ok());
  EXPECT_EQ(state->global_step(), 0);
  EXPECT_DOUBLE_EQ(metrics.ps.workers.Value(), 1);
  // A new worker (a scale-up) pushes mid-step: dropped, it counts from step 1.
  auto joining = Push(*state, Gradient(All(), 0, 2), g1);
  ASSERT_TRUE(joining.ok()) << joining.status();
  EXPECT_TRUE(joining->dropped());
  EXPECT_DOUBLE_EQ(metrics.ps.dropped_joining.Value(), 1);
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 0, 1), g1)));
  EXPECT_EQ(state->global_step(), 1);
  EXPECT_DOUBLE_EQ(metrics.ps.workers.Value(), 2);  // workers 1 and 2
  ASSERT_TRUE(Accepted(Push(*reference, Gradient(All(), 0, 0), g0)));
  ASSERT_TRUE(Accepted(Push(*reference, Gradient(All(), 0, 1), g1)));
  EXPECT_EQ(PullAll(*state), PullAll(*reference));  // averaged over both

  // Step 1 waits for workers 1 and 2.
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 1, 1), g0)));
  EXPECT_EQ(state->global_step(), 1);
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 1, 2), g1)));
  EXPECT_EQ(state->global_step(), 2);
  ASSERT_TRUE(Accepted(Push(*reference, Gradient(All(), 1, 0), g0)));
  ASSERT_TRUE(Accepted(Push(*reference, Gradient(All(), 1, 1), g1)));
  EXPECT_EQ(PullAll(*state), PullAll(*reference));
}

// Waits up to `wait` for the state's step to reach `step`; true when it did.
bool ReachesStepWithin(PsState& state, int64_t step, std::chrono::milliseconds wait) {
  auto parked = ParkPull(state, All(), step);
  return parked->answer.wait_for(wait) == std::future_status::ready && parked->answer.get();
}

bool ReachesStep(PsState& state, int64_t step) {
  return ReachesStepWithin(state, step, std::chrono::seconds(10));
}

PsState::Options QuickExpiry() {
  PsState::Options options;
  options.incomplete_push_timeout = std::chrono::milliseconds(100);
  return options;
}

// A worker that dies in the middle of a sync push (no Leave: it never sends the rest) gives its
// place up once its push has been incomplete for incomplete_push_timeout: the step completes
// with the workers still there, none of the dead worker's pieces applied.
TEST(PsStateTest, SyncWorkerDyingMidPushIsDroppedAfterTheTimeout) {
  auto state = ReadyState(Request(Sgd(0.5f), Sync(2, 2)), QuickExpiry());
  const std::vector<float> g0 = {2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6};
  const std::vector<float> g1 = Fill(1000);
  // Worker 1 sends half of partition 0 (chunk 0 of 4) and dies.
  ASSERT_TRUE(Accepted(Push(*state, Gradient({{0, 0, 2}}, 0, 1, 0, 4), Part(g1, 0, 2))));
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 0, 0), g0)));
  ASSERT_TRUE(ReachesStep(*state, 1));
  EXPECT_EQ(state->global_step(), 1);
  // Averaged over worker 0 alone: var -= 0.5 * g0.
  ExpectValues(PullAll(*state), {0, 0, 0, 0, 4, 4, 4, 4, 9, 18, 27});

  // The worker comes back (restarted) and both make the next step again.
  const std::vector<float> g2 = {4, 4, 4, 4, 0, 0, 0, 0, -2, -4, -6};
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 1, 1), g2)));
  EXPECT_EQ(state->global_step(), 1);  // the step needs both again
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 1, 0), g0)));
  EXPECT_EQ(state->global_step(), 2);
  // var -= 0.5 * (g0 + g2) / 2.
  ExpectValues(PullAll(*state), {-1.5, -2, -2.5, -3, 3.5, 3, 2.5, 2, 9, 18, 27});
}

// A dead worker's staged pieces are dropped when its push is given up; if it comes back within
// the same step, its new push of that step is dropped too (the given-up push stands for it), and
// the step completes with the others.
TEST(PsStateTest, SyncWorkerBackAfterItsPushWasGivenUpCountsFromTheNextStep) {
  auto state = ReadyState(Request(Sgd(0.5f), Sync(3, 2)), QuickExpiry());
  const std::vector<float> g0 = {2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6};
  const std::vector<float> g2 = {4, 4, 4, 4, 0, 0, 0, 0, -2, -4, -6};
  const std::vector<float> dead = Fill(1000);
  ASSERT_TRUE(Accepted(Push(*state, Gradient({{0, 0, 2}}, 0, 1, 0, 4), Part(dead, 0, 2))));
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 0, 0), g0)));
  // Worker 1's push is given up; the step still needs two workers of the two left.
  EXPECT_FALSE(ReachesStepWithin(*state, 1, std::chrono::milliseconds(500)));
  EXPECT_FALSE(Accepted(Push(*state, Gradient(All(), 0, 1), dead)));
  EXPECT_EQ(state->global_step(), 0);
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 0, 2), g2)));
  EXPECT_EQ(state->global_step(), 1);
  // var -= 0.5 * (g0 + g2) / 2: nothing of the 1000s.
  ExpectValues(PullAll(*state), {-0.5, 0, 0.5, 1, 4.5, 5, 5.5, 6, 10, 20, 30});
  // Worker 1 counts again from step 1: with worker 0 it completes it.
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 1, 1), g0)));
  EXPECT_EQ(state->global_step(), 1);
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 1, 0), g0)));
  EXPECT_EQ(state->global_step(), 2);
}

TEST(PsStateTest, SyncElementsOfAPartitionSentTwiceAreRejected) {
  auto state = ReadyState(Request(Sgd(0.5f), Sync(2, 2)));
  const std::vector<float> g = Fill(1);
  ASSERT_TRUE(Accepted(Push(*state, Gradient({{0, 0, 3}}, 0, 0, 0, 3), Part(g, 0, 3))));
  const auto r = Push(*state, Gradient({{0, 2, 2}}, 0, 0, 1, 3), Part(g, 0, 2));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

// --- Bad input -----------------------------------------------------------------------------------

struct BadFrame {
  std::string what;
  std::string frame;
  absl::StatusCode code;
  std::string message;  // a part of the error message
};

std::string Truncate(std::string s, size_t n) {
  s.resize(n);
  return s;
}

std::vector<BadFrame> BadGradientFrames() {
  using absl::StatusCode::kInvalidArgument;
  const std::vector<float> f1 = {1};
  const std::vector<float> f2 = {1, 1};
  const std::vector<float> f3 = {1, 1, 1};
  const std::vector<float> f4 = {1, 1, 1, 1};
  const std::vector<float> f6 = {1, 1, 1, 1, 1, 1};
  const std::vector<float> all = Fill(1);
  const std::string good = Frame(Gradient(All(), 1), all);
  const size_t header_bytes = EncodeFrameHeader(Gradient(All(), 1)).size();
  proto::TransferHeader other_model = Gradient(All(), 1);
  other_model.set_fingerprint(kFingerprint + 1);
  proto::TransferHeader int32_dtype = Gradient(All(), 1);
  int32_dtype.set_wire_dtype(proto::DT_INT32);
  proto::TransferHeader no_dtype = Gradient(All(), 1);
  no_dtype.clear_wire_dtype();
  proto::TransferHeader pull = Gradient(All(), 1);
  pull.set_kind(proto::TK_PULL);
  std::string odd = Frame(Gradient({{2, 0, 3}}, 1), f3);
  odd.pop_back();

  return {
      {"unknown partition", Frame(Gradient({{3, 0, 1}}, 1), f1), kInvalidArgument, "partition 3"},
      {"huge partition index", Frame(Gradient({{0xFFFFFFFFu, 0, 1}}, 1), f1), kInvalidArgument,
       "partition 4294967295"},
      {"offset + count past the end", Frame(Gradient({{1, 3, 2}}, 1), f2), kInvalidArgument,
       "w[2:4]"},
      {"count past the end", Frame(Gradient({{2, 0, 4}}, 1), f4), kInvalidArgument, "b: elements"},
      {"negative offset", Frame(Gradient({{0, -1, 2}}, 1), f2), kInvalidArgument, "w[0:2]"},
      {"negative count", Frame(Gradient({{2, 0, -1}}, 1), {}), kInvalidArgument, "b: elements"},
      {"offset overflow", Frame(Gradient({{0, std::numeric_limits<int64_t>::max(), 1}}, 1), f1),
       kInvalidArgument, "w[0:2]"},
      {"second segment out of range", Frame(Gradient({{1, 0, 4}, {2, 2, 2}}, 1), f6),
       kInvalidArgument, "b: elements"},
      {"payload too short", Frame(Gradient({{0, 0, 4}}, 1), f3), kInvalidArgument, "payload"},
      {"payload too long", Frame(Gradient({{2, 0, 3}}, 1), f4), kInvalidArgument, "payload"},
      {"payload not whole floats", odd, kInvalidArgument, "payload"},
      {"wire dtype int32", Frame(int32_dtype, all), kInvalidArgument, "DT_INT32"},
      {"wire dtype unset", Frame(no_dtype, all), kInvalidArgument, "DT_INVALID"},
      {"other fingerprint", Frame(other_model, all), kInvalidArgument, "fingerprint"},
      {"step from the future", Frame(Gradient(All(), 2), all), kInvalidArgument, "future"},
      {"sparse row past the end", Frame(Gradient({{0, 0, 2, {2}}}, 1), f2), kInvalidArgument,
       "w[0:2]: row 2"},
      {"negative sparse row", Frame(Gradient({{2, 0, 1, {-1}}}, 1), f1), kInvalidArgument,
       "b: row -1"},
      {"sparse count mismatch", Frame(Gradient({{1, 0, 3, {0}}}, 1), f3), kInvalidArgument,
       "w[2:4]"},
      {"worker index too high", Frame(Gradient(All(), 1, kMaxWorkers), all), kInvalidArgument,
       "worker 4096"},
      {"negative worker", Frame(Gradient(All(), 1, -1), all), kInvalidArgument, "worker -1"},
      {"chunk past num_chunks", Frame(Gradient(All(), 1, 0, 1, 1), all), kInvalidArgument, "chunk"},
      {"no chunks", Frame(Gradient(All(), 1, 0, 0, 0), all), kInvalidArgument, "chunk"},
      {"no segments", Frame(Gradient({}, 1), {}), kInvalidArgument, "no segments"},
      {"pull kind", Frame(pull, all), kInvalidArgument, "TK_PULL"},
      {"empty header", EncodeFrameHeader(proto::TransferHeader()), kInvalidArgument, "TK_INVALID"},
      {"garbage", "\xff\xff\xff\xffgarbage", kInvalidArgument, "frame header"},
      {"header does not parse", std::string("\x03\x00\x00\x00\xff\xff\xff", 7), kInvalidArgument,
       "does not parse"},
      {"empty frame", "", kInvalidArgument, "prefix"},
      {"truncated prefix", Truncate(good, 3), kInvalidArgument, "prefix"},
      {"truncated header", Truncate(good, header_bytes - 1), kInvalidArgument, "frame header"},
      {"truncated payload", Truncate(good, good.size() - 1), kInvalidArgument, "payload"},
      {"payload missing", Truncate(good, header_bytes), kInvalidArgument, "payload"},
  };
}

TEST(PsStateTest, BadGradientPushesChangeNothing) {
  Metrics metrics;
  auto state = ReadyState(Request(Sgd(1), Async(2)), {}, &metrics.ps);
  const std::vector<float> g = Fill(1);
  ASSERT_TRUE(Push(*state, Gradient(All()), g).ok());
  const std::vector<float> before = PullAll(*state);
  ASSERT_EQ(before, std::vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 9, 19, 29}));
  const double pushes = metrics.ps.pushes.Value();

  for (const BadFrame& bad : BadGradientFrames()) {
    for (size_t piece : {size_t{0}, size_t{3}}) {
      SCOPED_TRACE(absl::StrCat(bad.what, ", pieces of ", piece));
      auto r = PushFrame(*state, bad.frame, piece);
      EXPECT_EQ(r.status().code(), bad.code) << r.status();
      EXPECT_THAT(std::string(r.status().message()), HasSubstr(bad.message));
      EXPECT_EQ(PullAll(*state), before);
      EXPECT_EQ(state->global_step(), 1);
    }
  }
  EXPECT_DOUBLE_EQ(metrics.ps.pushes.Value(), pushes);
  // A good push still works afterwards.
  ASSERT_TRUE(Push(*state, Gradient(All(), 1), g).ok());
  ExpectValues(PullAll(*state), {-1, 0, 1, 2, 3, 4, 5, 6, 8, 18, 28});
  EXPECT_EQ(state->global_step(), 2);
}

TEST(PsStateTest, BadSyncPushesChangeNothing) {
  auto state = ReadyState(Request(Sgd(1), Sync(2, 2)));
  const std::vector<float> g = Fill(2);
  // Worker 0: chunk 0 of 2 is in.
  ASSERT_TRUE(Push(*state, Gradient(Chunk0(), 0, 0, 0, 2), Part(g, 0, 8)).ok());
  // A chunk beyond those announced; a future step.
  for (const std::string& frame : {Frame(Gradient(Chunk1(), 0, 0, 2, 2), Part(g, 8, 11)),
                                   Frame(Gradient(Chunk1(), 1, 1, 0, 1), Part(g, 8, 11))}) {
    auto r = PushFrame(*state, frame);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
  // The same worker's push of 3 chunks (it restarted): dropped, and it changes nothing.
  auto repeated = Push(*state, Gradient(Chunk1(), 0, 0, 1, 3), Part(g, 8, 11));
  ASSERT_TRUE(repeated.ok()) << repeated.status();
  EXPECT_TRUE(repeated->dropped());
  EXPECT_EQ(PullAll(*state), Init());
  EXPECT_EQ(state->global_step(), 0);
  // The step completes with exactly the two good pushes.
  ASSERT_TRUE(Push(*state, Gradient(Chunk1(), 0, 0, 1, 2), Part(g, 8, 11)).ok());
  ASSERT_TRUE(Push(*state, Gradient(All(), 0, 1), g).ok());
  EXPECT_EQ(state->global_step(), 1);
  ExpectValues(PullAll(*state), {-1, 0, 1, 2, 3, 4, 5, 6, 8, 18, 28});
}

TEST(PsStateTest, BadPullsAreRejected) {
  auto state = ReadyState(Request(Sgd(1), Async()));
  proto::TransferHeader other_model = Header(proto::TK_PULL, All());
  other_model.set_fingerprint(kFingerprint + 1);
  proto::TransferHeader int64_dtype = Header(proto::TK_PULL, All());
  int64_dtype.set_wire_dtype(proto::DT_INT64);
  const std::vector<float> payload = {1};
  const struct {
    std::string what;
    std::string frame;
    std::string message;
  } cases[] = {
      {"unknown partition", EncodeFrameHeader(Header(proto::TK_PULL, {{3, 0, 1}})), "partition 3"},
      {"out of range", EncodeFrameHeader(Header(proto::TK_PULL, {{0, 2, 3}})), "w[0:2]"},
      {"sparse row out of range", EncodeFrameHeader(Header(proto::TK_PULL, {{1, 0, 2, {2}}})),
       "w[2:4]: row 2 outside [0, 2)"},
      {"sparse count", EncodeFrameHeader(Header(proto::TK_PULL, {{1, 0, 4, {0}}})),
       "w[2:4]: 1 rows of 2 elements, but count 4"},
      {"no segments", EncodeFrameHeader(Header(proto::TK_PULL, {})), "no segments"},
      {"payload in a pull", Frame(Header(proto::TK_PULL, All()), payload), "payload"},
      {"gradient kind", EncodeFrameHeader(Header(proto::TK_GRADIENT, All())), "TK_GRADIENT"},
      {"other fingerprint", EncodeFrameHeader(other_model), "fingerprint"},
      {"int64", EncodeFrameHeader(int64_dtype), "DT_INT64"},
      {"garbage", "\xff\xff\xff\xffgarbage", "frame header"},
      {"truncated", "\x01\x00", "prefix"},
  };
  for (const auto& bad : cases) {
    SCOPED_TRACE(bad.what);
    proto::TransferHeader header;
    auto r = CheckPullFrame(*state, bad.frame, &header);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(bad.message));
  }
  EXPECT_EQ(PullAll(*state), Init());
}

TEST(PsStateTest, GradientsAndPullsBeforeReadyAreUnavailable) {
  PsState state({}, nullptr);
  const std::vector<float> g = Fill(1);
  proto::TransferHeader header;
  EXPECT_EQ(Push(state, Gradient(All()), g).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CheckPullFrame(state, EncodeFrameHeader(Header(proto::TK_PULL, All())), &header)
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(Push(state, Header(proto::TK_ASSIGN, All()), Init()).status().code(),
            absl::StatusCode::kFailedPrecondition);

  ASSERT_TRUE(state.Initialize(Request(Sgd(1), Async())).ok());
  ASSERT_TRUE(Push(state, Header(proto::TK_ASSIGN, All()), Init()).ok());
  EXPECT_EQ(Push(state, Gradient(All()), g).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CheckPullFrame(state, EncodeFrameHeader(Header(proto::TK_PULL, All())), &header)
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
  ASSERT_TRUE(state.Initialize(Request(Sgd(1), Async(), /*commit=*/true)).ok());
  EXPECT_EQ(PullAll(state), Init());
  EXPECT_EQ(state.global_step(), 0);
}

TEST(PsStateTest, BadAssignmentsChangeNothing) {
  PsState state({}, nullptr);
  ASSERT_TRUE(state.Initialize(Request(Sgd(1), Async())).ok());
  ASSERT_TRUE(Push(state, Header(proto::TK_ASSIGN, All()), Init()).ok());
  proto::TransferHeader other_model = Header(proto::TK_ASSIGN, All());
  other_model.set_fingerprint(kFingerprint + 1);
  const std::vector<float> junk = Fill(-1);
  const std::vector<float> two = {-1, -1};
  for (const std::string& frame : {
           Frame(other_model, junk),
           Frame(Header(proto::TK_ASSIGN, {{0, 0, 2, {1}}}), two),         // sparse
           Frame(Header(proto::TK_ASSIGN, {{1, 3, 2}}), two),              // out of range
           Frame(Header(proto::TK_ASSIGN, {{0, 0, 4}}), two),              // payload too short
           Frame(Header(proto::TK_ASSIGN, {{5, 0, 2}}), two),              // unknown partition
           Frame(Header(proto::TK_ASSIGN, {{0, 0, 2}, {2, 0, 4}}), junk),  // 2nd out of range
       }) {
    auto r = PushFrame(state, frame, 4);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
  ASSERT_TRUE(state.Initialize(Request(Sgd(1), Async(), /*commit=*/true)).ok());
  EXPECT_EQ(PullAll(state), Init());
}

TEST(PsStateTest, AssignmentAfterCommitIsFailedPrecondition) {
  auto state = ReadyState(Request(Sgd(1), Async()));
  const std::vector<float> junk = Fill(-1);
  auto r = Push(*state, Header(proto::TK_ASSIGN, All()), junk);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_EQ(PullAll(*state), Init());
  EXPECT_EQ(state->global_step(), 0);
}

// --- Concurrency ---------------------------------------------------------------------------------

TEST(PsStateTest, ConcurrentAsyncPushesAreAllApplied) {
  constexpr int kThreads = 4;
  constexpr int kPushes = 200;
  auto state = ReadyState(Request(Sgd(1), Async(kThreads)));
  const std::vector<float> ones = Fill(1);
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};

  // A reader pulls all along: within a partition every element has moved by the same amount
  // (never a torn copy), and values only go down.
  std::thread reader([&] {
    const std::vector<float> init = Init();
    std::vector<float> last = init;
    while (!done.load()) {
      const std::vector<float> v = PullAll(*state);
      if (v.size() != init.size()) {
        ++failures;
        return;
      }
      const float d0 = init[0] - v[0];
      const float d1 = init[4] - v[4];
      const float d2 = init[8] - v[8];
      for (size_t i = 0; i < v.size(); ++i) {
        const float d = i < 4 ? d0 : i < 8 ? d1 : d2;
        if (init[i] - v[i] != d || v[i] > last[i]) ++failures;
      }
      last = v;
    }
  });

  std::vector<std::thread> pushers;
  for (int t = 0; t < kThreads; ++t) {
    pushers.emplace_back([&, t] {
      const std::string frame = Frame(Gradient(All(), 0, t), ones);
      for (int i = 0; i < kPushes; ++i) {
        auto r = PushFrame(*state, frame, 1 + static_cast<size_t>((t + i) % 9));
        if (!r.ok() || r->dropped() || r->global_step() < 1 ||
            r->global_step() > kThreads * kPushes) {
          ++failures;
        }
      }
    });
  }
  for (auto& t : pushers) t.join();
  done.store(true);
  reader.join();

  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(state->global_step(), kThreads * kPushes);
  std::vector<float> expected = Init();
  for (float& v : expected) v -= kThreads * kPushes;
  ExpectValues(PullAll(*state), expected);
}

TEST(PsStateTest, ConcurrentSyncWorkersApplyEveryStepOnce) {
  constexpr int kWorkers = 3;
  constexpr int kSteps = 40;
  auto state = ReadyState(Request(Sgd(1), Sync(kWorkers, 2)));
  const std::vector<float> ones = Fill(1);
  std::atomic<int> failures{0};
  std::atomic<int> dropped{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      for (int64_t s = 0; s < kSteps; ++s) {
        // Wait for step s as a pull would.
        auto reached = std::make_shared<std::promise<bool>>();
        auto answer = reached->get_future();
        state->coordinator().Park(s, {},
                                  std::chrono::steady_clock::now() + std::chrono::seconds(60),
                                  [reached](bool r) { reached->set_value(r); });
        if (!answer.get()) {
          ++failures;
          return;
        }
        auto r0 = Push(*state, Gradient(Chunk0(), s, w, 0, 2), Part(ones, 0, 8), 5);
        if (!r0.ok()) {
          ++failures;
          continue;
        }
        if (r0->dropped()) {
          ++dropped;
          continue;
        }
        auto r1 = Push(*state, Gradient(Chunk1(), s, w, 1, 2), Part(ones, 8, 11), 5);
        if (!r1.ok() || r1->dropped()) ++failures;
      }
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(dropped.load(), kSteps * (kWorkers - 2));
  EXPECT_EQ(state->global_step(), kSteps);
  std::vector<float> expected = Init();
  for (float& v : expected) v -= kSteps;  // the mean of ones, once per step
  ExpectValues(PullAll(*state), expected);
}

// --- Float32 pulls without a copy (PinPull) -----------------------------------------------------

// One variable "big" of kBig elements, whole: several VersionedValues blocks, the last one short.
constexpr int64_t kBig = 2 * VersionedValues::kDefaultBlockElements + 1000;

std::unique_ptr<PsState> ReadyBigState(const proto::SyncConfig& sync) {
  proto::InitializeRequest request = Request(Sgd(1), sync);
  request.clear_partitions();
  proto::PartitionSpec* p = request.add_partitions();
  p->set_variable("big");
  p->add_variable_shape(kBig);
  p->set_row_begin(0);
  p->set_row_end(kBig);
  auto state = std::make_unique<PsState>(PsState::Options{}, nullptr);
  EXPECT_TRUE(state->Initialize(request).ok());  // the partition starts zeroed
  request.set_commit(true);
  EXPECT_TRUE(state->Initialize(request).ok());
  return state;
}

// A pinned float32 pull of `segments` (CheckPull + PinPull), unpinned when it goes.
class PinnedPull {
 public:
  PinnedPull(const PsState& state, const std::vector<Seg>& segments) {
    proto::TransferHeader header;
    auto bytes =
        CheckPullFrame(state, EncodeFrameHeader(Header(proto::TK_PULL, segments)), &header);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    step_ = state.PinPull(header, [this](const VersionedValues::Pin& pin) { pins_.push_back(pin); })
                .global_step();
  }
  ~PinnedPull() {
    for (const auto& pin : pins_) VersionedValues::Unpin(pin.handle);
  }
  PinnedPull(const PinnedPull&) = delete;
  PinnedPull& operator=(const PinnedPull&) = delete;

  std::vector<float> Values() const {
    std::vector<float> out;
    for (const auto& pin : pins_) out.insert(out.end(), pin.values.begin(), pin.values.end());
    return out;
  }
  int64_t step() const { return step_; }

 private:
  std::vector<VersionedValues::Pin> pins_;
  int64_t step_ = 0;
};

// Elements [begin, end) of `values` all equal `expected`.
::testing::AssertionResult AllEqual(const std::vector<float>& values, size_t begin, size_t end,
                                    float expected) {
  for (size_t i = begin; i < end; ++i) {
    if (values[i] != expected) {
      return ::testing::AssertionFailure()
             << "element " << i << " is " << values[i] << ", not " << expected;
    }
  }
  return ::testing::AssertionSuccess();
}

// A pull of rows (an embedding's, for the step about to read them): each sparse segment's rows in
// the order asked, consecutive ones as one run, beside dense segments; copied and pinned alike.
TEST(PsStateTest, SparsePullsAnswerTheRowsAskedInTheirOrder) {
  auto state = ReadyState(Request(Sgd(1), Async()));
  ASSERT_TRUE(Accepted(Push(*state, Gradient({{1, 0, 2, {1}}}), std::vector<float>{10, 20})));
  const std::vector<float> all = PullAll(*state);
  ExpectValues(all, {1, 2, 3, 4, 5, 6, -3, -12, 10, 20, 30});
  // w[0:2] rows 0 and 1 (one run), w[2:4] rows 1 then 0, b rows 2 and 0, b elements [1, 2).
  const std::vector<Seg> segments = {
      {0, 0, 4, {0, 1}}, {1, 0, 4, {1, 0}}, {2, 0, 2, {2, 0}}, {2, 1, 1}};
  const std::vector<float> expected = {1, 2, 3, 4, -3, -12, 5, 6, 30, 10, 20};
  ExpectValues(PullSegments(*state, segments), expected);
  ExpectValues(PinnedPull(*state, segments).Values(), expected);
  // No rows: a segment of no elements, answered with the step alone.
  int64_t step = 0;
  EXPECT_TRUE(PullSegments(*state, {{1, 0, 0, {}}}, &step).empty());
  EXPECT_EQ(step, 1);
}

TEST(PsStateTest, PinnedPullMatchesTheCopyAndKeepsItsVersionWhilePushesApply) {
  ExpectValues(PinnedPull(*ReadyState(Request(Sgd(1), Async())), All()).Values(), Init());

  auto state = ReadyBigState(Async());
  const auto n = static_cast<size_t>(kBig);
  const std::vector<float> ones(n, 1.0f);
  PinnedPull before(*state, {{0, 0, kBig}});
  EXPECT_EQ(before.step(), 0);
  ASSERT_TRUE(Accepted(Push(*state, Gradient({{0, 0, kBig}}), ones, 4096)));
  PinnedPull middle(*state, {{0, 0, kBig}});
  // Across the first block boundary: the rest of both blocks carries over to their new versions.
  const int64_t edge = VersionedValues::kDefaultBlockElements - 10;
  ASSERT_TRUE(Accepted(Push(*state, Gradient({{0, edge, 20}}), Part(ones, 0, 20))));

  EXPECT_TRUE(AllEqual(before.Values(), 0, n, 0.0f));
  EXPECT_EQ(middle.step(), 1);
  EXPECT_TRUE(AllEqual(middle.Values(), 0, n, -1.0f));
  const std::vector<float> now = PullSegments(*state, {{0, 0, kBig}});
  ASSERT_EQ(now.size(), n);
  const auto e = static_cast<size_t>(edge);
  EXPECT_TRUE(AllEqual(now, 0, e, -1.0f));
  EXPECT_TRUE(AllEqual(now, e, e + 20, -2.0f));
  EXPECT_TRUE(AllEqual(now, e + 20, n, -1.0f));
  EXPECT_EQ(PinnedPull(*state, {{0, 0, kBig}}).Values(), now);
}

// A reply pinned while pushes apply holds exactly one version of the partition (every element
// moved by the same number of updates), and keeps it while later updates land; async (applied
// as each push arrives) and sync (applied from the staged pieces).
TEST(PsStateTest, ConcurrentPinnedPullsSeeExactlyOneVersion) {
  constexpr int kWorkers = 2;
  constexpr int kSteps = 60;
  for (bool sync : {false, true}) {
    SCOPED_TRACE(sync ? "sync" : "async");
    auto state = ReadyBigState(sync ? Sync(kWorkers, kWorkers) : Async(kWorkers));
    const std::vector<float> ones(static_cast<size_t>(kBig), 1.0f);
    std::atomic<bool> done{false};
    std::atomic<int> failures{0};
    std::thread reader([&] {
      float last = 0;
      while (!done.load()) {
        PinnedPull pull(*state, {{0, 0, kBig}});
        const std::vector<float> first = pull.Values();
        std::this_thread::yield();
        const std::vector<float> again = pull.Values();
        if (!AllEqual(first, 0, first.size(), first[0]) || again != first || first[0] > last) {
          ++failures;
        }
        last = first[0];
      }
    });
    std::vector<std::thread> workers;
    for (int w = 0; w < kWorkers; ++w) {
      workers.emplace_back([&, w] {
        for (int64_t s = 0; s < kSteps; ++s) {
          if (sync) {
            auto reached = std::make_shared<std::promise<bool>>();
            auto answer = reached->get_future();
            state->coordinator().Park(s, {},
                                      std::chrono::steady_clock::now() + std::chrono::seconds(60),
                                      [reached](bool r) { reached->set_value(r); });
            if (!answer.get()) ++failures;
          }
          if (!Accepted(Push(*state, Gradient({{0, 0, kBig}}, s, w), ones, 1 << 16))) ++failures;
        }
      });
    }
    for (auto& t : workers) t.join();
    done.store(true);
    reader.join();
    EXPECT_EQ(failures.load(), 0);
    const float moved = sync ? kSteps : kWorkers * kSteps;  // sync: the mean of ones per step
    EXPECT_TRUE(AllEqual(PinnedPull(*state, {{0, 0, kBig}}).Values(), 0, ones.size(), -moved));
  }
}

// --- Checkpoints ---------------------------------------------------------------------------------

std::string NewestCheckpoint(const std::string& dir) {
  const std::vector<std::string> files = CheckpointDir(dir, 0, 3).List();
  return files.empty() ? std::string() : files.back();
}

TEST(PsStateTest, NoCheckpointDirMeansNoCheckpoints) {
  auto state = ReadyState(Request(Sgd(1), Async()));
  auto ckpt = state->Checkpoint();
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_FALSE(ckpt->has_value());
  PsState other({}, nullptr);
  auto restored = other.RestoreFromCheckpoint();
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_FALSE(*restored);
  EXPECT_FALSE(other.ReadyResponse().ready());
}

TEST(PsStateTest, RestoreFromAnEmptyDirFindsNothing) {
  const std::string dir = TestDir();
  PsState state(CheckpointOptions(dir), nullptr);
  auto ckpt = state.Checkpoint();  // not ready: nothing written
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_FALSE(ckpt->has_value());
  auto restored = state.RestoreFromCheckpoint();
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_FALSE(*restored);
  EXPECT_FALSE(state.ReadyResponse().ready());
  EXPECT_TRUE(CheckpointDir(dir, 0, 3).List().empty());
}

TEST(PsStateTest, RestoreContinuesWhereTheCheckpointWasTaken) {
  const std::string dir = TestDir();
  const proto::InitializeRequest request = Request(Momentum(0.1f, 0.9f), Async(2));
  Metrics metrics;
  auto state = ReadyState(request, CheckpointOptions(dir), &metrics.ps);
  const std::vector<float> one = Fill(1);
  const std::vector<float> two = Fill(2);
  ASSERT_TRUE(Push(*state, Gradient(All(), 0, 0), one).ok());
  ASSERT_TRUE(Push(*state, Gradient(All(), 1, 1), one).ok());
  auto written = state->Checkpoint();
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_TRUE(written->has_value());
  EXPECT_EQ(**written, 2);
  EXPECT_DOUBLE_EQ(metrics.ps.checkpoints.Value(), 1);
  EXPECT_THAT(NewestCheckpoint(dir), HasSubstr("ckpt-000000000002"));

  PsState restored(CheckpointOptions(dir), nullptr);
  auto found = restored.RestoreFromCheckpoint();
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_TRUE(*found);
  const proto::WaitReadyResponse ready = restored.ReadyResponse();
  EXPECT_TRUE(ready.ready());
  EXPECT_EQ(ready.global_step(), 2);
  EXPECT_EQ(ready.fingerprint(), kFingerprint);
  EXPECT_FALSE(ready.sync().sync_replicas());
  EXPECT_EQ(ready.sync().total_workers(), 2);
  EXPECT_FLOAT_EQ(ready.learning_rate(), 0.1f);
  EXPECT_EQ(restored.global_step(), 2);
  EXPECT_EQ(restored.bytes(), kNumElements * 4);
  EXPECT_EQ(PullAll(restored), PullAll(*state));

  // A chief finds the variables there; another model is refused; assignments are too late.
  for (bool commit : {false, true}) {
    auto r = restored.Initialize(Request(Momentum(0.1f, 0.9f), Async(2), commit));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(r->initialized_now());
    EXPECT_EQ(r->global_step(), 2);
  }
  EXPECT_EQ(restored.Initialize(Request(Momentum(0.1f, 0.9f), Async(2), false, kFingerprint + 1))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  const std::vector<float> junk = Fill(-1);
  EXPECT_EQ(Push(restored, Header(proto::TK_ASSIGN, All()), junk).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // The momentum slot came back: the next update equals the un-restarted task's.
  auto r = Push(restored, Gradient(All(), 2, 0), two);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->global_step(), 3);
  ASSERT_TRUE(Push(*state, Gradient(All(), 2, 0), two).ok());
  const std::vector<float> values = PullAll(restored);
  EXPECT_EQ(values, PullAll(*state));
  // accum 1 -> 1.9 -> 3.71; var -= 0.1 + 0.19 + 0.371 (a lost slot would give 0.49).
  ExpectShifted(values, 0.661f);
}

TEST(PsStateTest, RestoreKeepsTheSyncConfigAndTheLearningRate) {
  const std::string dir = TestDir();
  auto state = ReadyState(Request(Sgd(1), Sync(2, 2)), CheckpointOptions(dir));
  const std::vector<float> g = Fill(2);
  ASSERT_TRUE(Push(*state, Gradient(All(), 0, 0), g).ok());
  ASSERT_TRUE(Push(*state, Gradient(All(), 0, 1), g).ok());
  ASSERT_TRUE(state->SetLearningRate(0.5f).ok());
  auto written = state->Checkpoint();
  ASSERT_TRUE(written.ok() && written->has_value()) << written.status();
  EXPECT_EQ(**written, 1);

  PsState restored(CheckpointOptions(dir), nullptr);
  ASSERT_TRUE(restored.RestoreFromCheckpoint().value_or(false));
  const proto::WaitReadyResponse ready = restored.ReadyResponse();
  EXPECT_EQ(ready.global_step(), 1);
  EXPECT_TRUE(ready.sync().sync_replicas());
  EXPECT_EQ(ready.sync().total_workers(), 2);
  EXPECT_EQ(ready.sync().replicas_to_aggregate(), 2);
  EXPECT_FLOAT_EQ(ready.learning_rate(), 0.5f);
  ExpectValues(PullAll(restored), {-1, 0, 1, 2, 3, 4, 5, 6, 8, 18, 28});

  // Step 1 on the restored task, at the new rate; step 0 is stale.
  EXPECT_TRUE(Dropped(Push(restored, Gradient(All(), 0, 0), g)));
  ASSERT_TRUE(Accepted(Push(restored, Gradient(All(), 1, 0), g)));
  ASSERT_TRUE(Accepted(Push(restored, Gradient(All(), 1, 1), g)));
  EXPECT_EQ(restored.global_step(), 2);
  ExpectValues(PullAll(restored), {-2, -1, 0, 1, 2, 3, 4, 5, 7, 17, 27});
}

// A scaled job's ps task restored from its checkpoint counts the workers it counted then: a
// worker that left stays out, one that joined stays in.
TEST(PsStateTest, ARestoredTaskCountsTheWorkersItsCheckpointCounted) {
  const std::string dir = TestDir();
  auto state = ReadyState(Request(Sgd(1), Sync(2, 0)), CheckpointOptions(dir));
  const std::vector<float> g = Fill(2);
  ASSERT_TRUE(state->Leave(1).ok());
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 0, 2), g)));  // joins between steps
  ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 0, 0), g)));
  ASSERT_EQ(state->global_step(), 1);
  auto written = state->Checkpoint();
  ASSERT_TRUE(written.ok() && written->has_value()) << written.status();

  Metrics metrics;
  PsState restored(CheckpointOptions(dir), &metrics.ps);
  ASSERT_TRUE(restored.RestoreFromCheckpoint().value_or(false));
  EXPECT_DOUBLE_EQ(metrics.ps.workers.Value(), 2);
  ASSERT_TRUE(Accepted(Push(restored, Gradient(All(), 1, 0), g)));
  EXPECT_EQ(restored.global_step(), 1);  // waits for worker 2, not for worker 1
  ASSERT_TRUE(Accepted(Push(restored, Gradient(All(), 1, 2), g)));
  EXPECT_EQ(restored.global_step(), 2);
}

// Checkpoints taken while pushes go on: each file's values must be exactly those of the step it
// records (SGD, lr 1, all-ones gradients: value = init - step), else a restore would lose an
// update (values behind the step) or apply one twice (values ahead of it).
// (PsState::Push advances the step and applies the gradients under one shared hold of the lock
// Checkpoint takes exclusively.)
void CheckpointsWhilePushing(const proto::InitializeRequest& request, int pushers) {
  constexpr int kCheckpoints = 40;
  const std::string dir = TestDir();
  auto state = ReadyState(request, CheckpointOptions(dir));
  const bool sync = request.sync().sync_replicas();
  const std::vector<float> ones = Fill(1);
  std::atomic<bool> done{false};
  std::atomic<int> push_failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < pushers; ++t) {
    threads.emplace_back([&, t] {
      // Sync: one worker, so each push completes the step it was computed at.
      for (int64_t step = 0; !done.load(); ++step) {
        auto r = Push(*state, Gradient(All(), sync ? step : 0, t), ones);
        if (!r.ok() || r->dropped()) ++push_failures;
      }
    });
  }
  const std::vector<float> init = Init();
  int inconsistent = 0;
  // In a lambda, so that a failed assertion still stops and joins the pushers below.
  [&] {
    for (int c = 0; c < kCheckpoints && inconsistent < 3; ++c) {
      auto written = state->Checkpoint();
      ASSERT_TRUE(written.ok() && written->has_value()) << written.status();
      const int64_t step = **written;
      auto ckpt = ReadCheckpointFile(
          absl::StrCat(dir, "/ps-0/ckpt-", absl::Dec(step, absl::kZeroPad12), ".psck"));
      ASSERT_TRUE(ckpt.ok()) << ckpt.status();
      EXPECT_EQ(ckpt->global_step, step);
      ASSERT_EQ(ckpt->tensors.size(), 3u);
      std::vector<float> values;
      for (const CheckpointTensor& t : ckpt->tensors) {
        values.insert(values.end(), t.values.begin(), t.values.end());
      }
      ASSERT_EQ(values.size(), init.size());
      for (size_t i = 0; i < values.size(); ++i) {
        if (values[i] != init[i] - static_cast<float>(step)) {
          ADD_FAILURE() << "checkpoint at step " << step << ": element " << i << " is " << values[i]
                        << ", expected " << init[i] - static_cast<float>(step);
          ++inconsistent;
          break;
        }
      }
    }
  }();
  done.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(push_failures.load(), 0);
  EXPECT_EQ(inconsistent, 0);
}

TEST(PsStateTest, AsyncCheckpointIsConsistentWithItsStep) {
  CheckpointsWhilePushing(Request(Sgd(1), Async(2)), 2);
}

TEST(PsStateTest, SyncCheckpointIsConsistentWithItsStep) {
  CheckpointsWhilePushing(Request(Sgd(1), Sync(1, 1)), 1);
}

// A checkpoint asked for while a step is partly applied waits for the step to finish: it never
// holds half a step.
TEST(PsStateTest, SyncCheckpointWaitsOutAPartlyAppliedStep) {
  const std::string dir = TestDir();
  auto state = ReadyState(Request(Sgd(0.5f), Sync(2, 2)), CheckpointOptions(dir));
  const std::vector<float> g0 = {2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6};
  const std::vector<float> g1 = {4, 4, 4, 4, 0, 0, 0, 0, -2, -4, -6};
  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk0(), 0, 0, 0, 2), Part(g0, 0, 8))));
  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk0(), 0, 1, 0, 2), Part(g1, 0, 8))));
  absl::StatusOr<std::optional<int64_t>> written;
  std::jthread checkpoint([&] { written = state->Checkpoint(); });  // joined on any return
  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk1(), 0, 0, 1, 2), Part(g0, 8, 11))));
  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk1(), 0, 1, 1, 2), Part(g1, 8, 11))));
  checkpoint.join();
  ASSERT_TRUE(written.ok() && written->has_value()) << written.status();
  EXPECT_EQ(**written, 1);
  auto ckpt =
      ReadCheckpointFile(absl::StrCat(dir, "/ps-0/ckpt-", absl::Dec(1, absl::kZeroPad12), ".psck"));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  std::vector<float> values;
  for (const CheckpointTensor& t : ckpt->tensors) {
    values.insert(values.end(), t.values.begin(), t.values.end());
  }
  ExpectValues(values, {-0.5, 0, 0.5, 1, 4.5, 5, 5.5, 6, 10, 20, 30});
}

// The checkpoint file written at `step` in `dir`: its step and every tensor, values bit for bit.
Checkpoint ReadWritten(const std::string& dir, int64_t step) {
  auto ckpt = ReadCheckpointFile(
      absl::StrCat(dir, "/ps-0/ckpt-", absl::Dec(step, absl::kZeroPad12), ".psck"));
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  return ckpt.ok() ? *std::move(ckpt) : Checkpoint{};
}

// Every value and slot, in tensor order.
std::vector<float> Flatten(const Checkpoint& ckpt) {
  std::vector<float> values;
  for (const CheckpointTensor& t : ckpt.tensors) {
    values.insert(values.end(), t.values.begin(), t.values.end());
  }
  return values;
}

// A stopping ps (StopUpdates, before its final checkpoint) lets a partly applied step finish
// while it still serves, then refuses gradients, so the final checkpoint holds the whole step.
TEST(PsStateTest, SyncStopUpdatesLetsAPartlyAppliedStepFinishThenRefusesGradients) {
  const std::string dir = TestDir();
  auto state = ReadyState(Request(Sgd(0.5f), Sync(2, 2)), CheckpointOptions(dir));
  const std::vector<float> g0 = {2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6};
  const std::vector<float> g1 = {4, 4, 4, 4, 0, 0, 0, 0, -2, -4, -6};
  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk0(), 0, 0, 0, 2), Part(g0, 0, 8))));
  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk0(), 0, 1, 0, 2), Part(g1, 0, 8))));
  ASSERT_TRUE(state->coordinator().mid_step());
  bool stopped = false;
  std::jthread stop([&] { stopped = state->StopUpdates(std::chrono::seconds(60)); });
  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk1(), 0, 0, 1, 2), Part(g0, 8, 11))));
  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk1(), 0, 1, 1, 2), Part(g1, 8, 11))));
  stop.join();
  EXPECT_TRUE(stopped);
  const absl::StatusOr<proto::TransferReply> late =
      Push(*state, Gradient(Chunk0(), 1, 0, 0, 2), Part(g0, 0, 8));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnavailable) << late.status();
  EXPECT_FALSE(state->coordinator().mid_step());
  state->coordinator().Stop();  // as the service's Stop does next
  absl::StatusOr<std::optional<int64_t>> written = state->Checkpoint();
  ASSERT_TRUE(written.ok() && written->has_value()) << written.status();
  EXPECT_EQ(**written, 1);
  ExpectValues(Flatten(ReadWritten(dir, 1)), {-0.5, 0, 0.5, 1, 4.5, 5, 5.5, 6, 10, 20, 30});
}

// A step that stays partly applied (a worker's push incomplete) is waited for only so long; the
// final checkpoint then fails saying why, not after a minute.
TEST(PsStateTest, SyncStopUpdatesGivesUpOnAStepThatStaysPartlyApplied) {
  auto state = ReadyState(Request(Sgd(0.5f), Sync(2, 2)), CheckpointOptions(TestDir()));
  const std::vector<float> g0 = {2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6};
  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk0(), 0, 0, 0, 2), Part(g0, 0, 8))));
  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk0(), 0, 1, 0, 2), Part(g0, 0, 8))));
  EXPECT_FALSE(state->StopUpdates(std::chrono::milliseconds(20)));
  EXPECT_EQ(Push(*state, Gradient(Chunk1(), 0, 0, 1, 2), Part(g0, 8, 11)).status().code(),
            absl::StatusCode::kUnavailable);
  state->coordinator().Stop();
  const absl::StatusOr<std::optional<int64_t>> written = state->Checkpoint();
  EXPECT_EQ(written.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(written.status().message()),
              HasSubstr("stopped with step 0 partly applied"));
}

// An async push split into chunks counts as one step, and every chunk is applied with the step
// number of the whole push: Adam's values and both slots come out bit for bit as with the push
// whole, whatever order the chunks arrive in.
TEST(PsStateTest, AsyncChunkedPushEqualsTheWholePushBitForBit) {
  const std::string whole_dir = TestDir() + "/whole";
  const std::string split_dir = TestDir() + "/split";
  auto whole = ReadyState(Request(Adam(0.01f), Async(2)), CheckpointOptions(whole_dir));
  auto split = ReadyState(Request(Adam(0.01f), Async(2)), CheckpointOptions(split_dir));
  const std::vector<float> g1 = {0.3f, -1.7f, 2.9f, 0.01f, -4, 5.5f, 0.25f, -0.125f, 7, -8, 0.9f};
  const std::vector<float> g2 = {1.1f, 0.2f, -0.3f, 4.4f, 0.5f, -6.6f, 7.7f, 0.8f, -9.9f, 1, 2};
  const std::vector<float> g3 = {-2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12};
  // The three chunks of a worker's push: one partition each.
  const std::vector<Seg> chunks[3] = {{{0, 0, 4}}, {{1, 0, 4}}, {{2, 0, 3}}};
  const size_t begin[3] = {0, 4, 8};
  const size_t end[3] = {4, 8, 11};
  auto push_split = [&](const std::vector<float>& g, int64_t step, int worker,
                        std::vector<uint32_t> order) {
    for (uint32_t c : order) {
      auto r = Push(*split, Gradient(chunks[c], step, worker, c, 3), Part(g, begin[c], end[c]));
      ASSERT_TRUE(Accepted(r));
    }
  };
  // Worker 0 at step 0 (chunks in order), worker 1 at step 0 (last chunk first), worker 0 at
  // step 2 (middle chunk first).
  push_split(g1, 0, 0, {0, 1, 2});
  EXPECT_EQ(split->global_step(), 1);
  push_split(g2, 0, 1, {2, 0, 1});
  EXPECT_EQ(split->global_step(), 2);
  push_split(g3, 2, 0, {1, 2, 0});
  EXPECT_EQ(split->global_step(), 3);
  ASSERT_TRUE(Accepted(Push(*whole, Gradient(All(), 0, 0), g1)));
  ASSERT_TRUE(Accepted(Push(*whole, Gradient(All(), 0, 1), g2)));
  ASSERT_TRUE(Accepted(Push(*whole, Gradient(All(), 2, 0), g3)));
  EXPECT_EQ(whole->global_step(), 3);

  EXPECT_EQ(PullAll(*split), PullAll(*whole));
  auto split_written = split->Checkpoint();
  auto whole_written = whole->Checkpoint();
  ASSERT_TRUE(split_written.ok() && split_written->has_value()) << split_written.status();
  ASSERT_TRUE(whole_written.ok() && whole_written->has_value()) << whole_written.status();
  EXPECT_EQ(**split_written, 3);
  EXPECT_EQ(**whole_written, 3);
  const Checkpoint split_ckpt = ReadWritten(split_dir, 3);
  const Checkpoint whole_ckpt = ReadWritten(whole_dir, 3);
  ASSERT_EQ(split_ckpt.tensors.size(), 9u);  // values, m and v of three partitions
  EXPECT_EQ(Flatten(split_ckpt), Flatten(whole_ckpt));
}

// A checkpoint asked for while an async push is half applied is a consistent cut: it holds the
// whole push and the step that counts it, and none of a push that opened after the cut, even
// though that push reached the partitions before the half-applied one finished.
TEST(PsStateTest, AsyncCheckpointHoldsWholePushesOnly) {
  const std::string dir = TestDir();
  const std::vector<float> g0 = {2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6};
  const std::vector<float> g1 = {4, 4, 4, 4, 0, 0, 0, 0, -2, -4, -6};
  int cuts = 0;
  std::unique_ptr<PsState> state;
  PsState::Options options = CheckpointOptions(dir);
  // Runs once the checkpoint has taken its cut: worker 1's push (after the cut), then the rest of
  // worker 0's (before it).
  options.after_checkpoint_cut = [&] {
    ++cuts;
    ASSERT_TRUE(Accepted(Push(*state, Gradient(All(), 0, 1), g1)));
    ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk1(), 0, 0, 1, 2), Part(g0, 8, 11))));
  };
  state = ReadyState(Request(Sgd(0.5f), Async(2)), options);
  ASSERT_TRUE(Accepted(Push(*state, Gradient(Chunk0(), 0, 0, 0, 2), Part(g0, 0, 8))));
  auto written = state->Checkpoint();
  EXPECT_EQ(cuts, 1);
  ASSERT_TRUE(written.ok() && written->has_value()) << written.status();
  EXPECT_EQ(**written, 1);
  const Checkpoint ckpt = ReadWritten(dir, 1);
  EXPECT_EQ(ckpt.global_step, 1);
  // Worker 0's push whole (var -= 0.5 g0), nothing of worker 1's.
  ExpectValues(Flatten(ckpt), {0, 0, 0, 0, 4, 4, 4, 4, 9, 18, 27});
  // The live state has both.
  EXPECT_EQ(state->global_step(), 2);
  ExpectValues(PullAll(*state), {-2, -2, -2, -2, 4, 4, 4, 4, 10, 20, 30});
}

TEST(PsStateTest, CorruptNewestCheckpointFallsBackToThePreviousOne) {
  const std::string dir = TestDir();
  auto state = ReadyState(Request(Sgd(1), Async()), CheckpointOptions(dir));
  const std::vector<float> g = Fill(1);
  ASSERT_TRUE(Push(*state, Gradient(All(), 0), g).ok());
  auto first = state->Checkpoint();
  ASSERT_TRUE(first.ok() && first->has_value()) << first.status();
  EXPECT_EQ(**first, 1);
  const std::vector<float> at_step1 = PullAll(*state);
  ASSERT_TRUE(Push(*state, Gradient(All(), 1), g).ok());
  auto second = state->Checkpoint();
  ASSERT_TRUE(second.ok() && second->has_value()) << second.status();
  EXPECT_EQ(**second, 2);
  ASSERT_EQ(CheckpointDir(dir, 0, 3).List().size(), 2u);

  // Flip one byte in the middle of the newest file.
  const std::string newest = NewestCheckpoint(dir);
  ASSERT_THAT(newest, HasSubstr("ckpt-000000000002"));
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << newest;
    const auto at = static_cast<std::streamoff>(fs::file_size(newest) / 2);
    f.seekg(at);
    char byte = 0;
    f.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x40);
    f.seekp(at);
    f.write(&byte, 1);
    ASSERT_TRUE(f.good());
  }

  PsState restored(CheckpointOptions(dir), nullptr);
  auto found = restored.RestoreFromCheckpoint();
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_TRUE(*found);
  EXPECT_EQ(restored.global_step(), 1);
  EXPECT_EQ(PullAll(restored), at_step1);
  ExpectValues(at_step1, {0, 1, 2, 3, 4, 5, 6, 7, 9, 19, 29});
}

TEST(PsStateTest, OnlyTheNewestCheckpointsAreKept) {
  const std::string dir = TestDir();
  PsState::Options options = CheckpointOptions(dir);
  options.keep_checkpoints = 2;
  auto state = ReadyState(Request(Sgd(1), Async()), options);
  const std::vector<float> g = Fill(1);
  for (int64_t s = 0; s < 4; ++s) {
    ASSERT_TRUE(Push(*state, Gradient(All(), s), g).ok());
    auto written = state->Checkpoint();
    ASSERT_TRUE(written.ok() && written->has_value()) << written.status();
    EXPECT_EQ(**written, s + 1);
  }
  const std::vector<std::string> files = CheckpointDir(dir, 0, 2).List();
  ASSERT_EQ(files.size(), 2u);
  EXPECT_THAT(files[0], HasSubstr("ckpt-000000000003"));
  EXPECT_THAT(files[1], HasSubstr("ckpt-000000000004"));
}

// --- Checkpoint scheduler (ps/checkpoint_scheduler.h) -------------------------------------------

// Waits up to 10 s for the scheduler to have written `n` checkpoints.
bool WaitForWritten(const CheckpointScheduler& scheduler, int64_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (scheduler.written() < n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

TEST(CheckpointSchedulerTest, EveryNStepsOnlyWhenTheStepMovedAndOnceMoreOnStop) {
  const std::string dir = TestDir();
  auto state = ReadyState(Request(Sgd(1), Async()), CheckpointOptions(dir));
  CheckpointScheduler scheduler(*state, {.every_s = 0, .every_steps = 2});
  ASSERT_TRUE(Push(*state, Gradient(All(), 0), Fill(1)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(scheduler.written(), 0);  // one step since the start: not yet
  ASSERT_TRUE(Push(*state, Gradient(All(), 1), Fill(1)).ok());
  ASSERT_EQ(state->global_step(), 2);
  ASSERT_TRUE(WaitForWritten(scheduler, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(scheduler.written(), 1);  // the step has not moved since
  EXPECT_TRUE(scheduler.Stop().ok());
  EXPECT_EQ(scheduler.written(), 2);  // the last one, on the way out
  EXPECT_TRUE(scheduler.Stop().ok());
  EXPECT_EQ(scheduler.written(), 2);
  const std::vector<std::string> files = CheckpointDir(dir, 0, 3).List();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(ReadCheckpointFile(files[0])->global_step, 2);
}

// The thread is woken by the step itself (no polling: with 800 steps a second a 100 ms poll let a
// killed ps lose 160 steps of a 100-step interval), and the checkpoints fall on the multiples of
// the interval, whatever step the previous one caught.
TEST(CheckpointSchedulerTest, CheckpointsAtTheStepsMultiplesAsTheStepReachesThem) {
  const std::string dir = TestDir();
  auto state = ReadyState(Request(Sgd(1), Async()), CheckpointOptions(dir));
  CheckpointScheduler scheduler(*state, {.every_s = 0, .every_steps = 100});
  const std::vector<float> g = Fill(1);
  int64_t step = 0;
  const auto push_to = [&](int64_t to) {
    for (; step < to; ++step) ASSERT_TRUE(Push(*state, Gradient(All(), step), g).ok());
  };
  push_to(100);
  ASSERT_TRUE(WaitForWritten(scheduler, 1));
  EXPECT_EQ(ReadCheckpointFile(CheckpointDir(dir, 0, 3).List().back())->global_step, 100);
  push_to(170);  // not due before 200
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(scheduler.written(), 1);
  push_to(200);
  ASSERT_TRUE(WaitForWritten(scheduler, 2));
  EXPECT_EQ(ReadCheckpointFile(CheckpointDir(dir, 0, 3).List().back())->global_step, 200);
  push_to(250);
  EXPECT_TRUE(scheduler.Stop().ok());
  EXPECT_EQ(ReadCheckpointFile(CheckpointDir(dir, 0, 3).List().back())->global_step, 250);
}

// A checkpoint that fails (the task's folder replaced by a file) is tried again after `retry`, and
// written once the folder is back, at the step it has then.
TEST(CheckpointSchedulerTest, AFailedCheckpointIsTriedAgainAfterRetry) {
  const std::string dir = TestDir();
  auto state = ReadyState(Request(Sgd(1), Async()), CheckpointOptions(dir));
  const std::string task_dir = CheckpointDir(dir, 0, 3).path();
  std::filesystem::create_directories(dir);
  std::ofstream(task_dir) << "not a folder";
  CheckpointScheduler scheduler(
      *state, {.every_s = 0, .every_steps = 1, .retry = std::chrono::milliseconds(20)});
  ASSERT_TRUE(Push(*state, Gradient(All(), 0), Fill(1)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(scheduler.written(), 0);
  std::filesystem::remove(task_dir);
  ASSERT_TRUE(WaitForWritten(scheduler, 1));
  EXPECT_EQ(ReadCheckpointFile(CheckpointDir(dir, 0, 3).List().back())->global_step, 1);
}

TEST(CheckpointSchedulerTest, EverySecondsOnceTheStepMoved) {
  const std::string dir = TestDir();
  auto state = ReadyState(Request(Sgd(1), Async()), CheckpointOptions(dir));
  CheckpointScheduler scheduler(*state, {.every_s = 0.01, .every_steps = 0});
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(scheduler.written(), 0);  // time passed, but no step
  ASSERT_TRUE(Push(*state, Gradient(All(), 0), Fill(1)).ok());
  ASSERT_TRUE(WaitForWritten(scheduler, 1));
}

// A final checkpoint that cannot be written (here: the task's folder is replaced by a file, which
// stops root too) is Stop's error, for the ps to exit non-zero with it, not only a log line.
TEST(CheckpointSchedulerTest, AFailedFinalCheckpointIsStopsError) {
  const std::string dir = TestDir();
  auto state = ReadyState(Request(Sgd(1), Async()), CheckpointOptions(dir));
  CheckpointScheduler scheduler(*state, {.every_s = 0, .every_steps = 0});
  ASSERT_TRUE(Push(*state, Gradient(All(), 0), Fill(1)).ok());
  const std::string task_dir = CheckpointDir(dir, 0, 3).path();
  std::filesystem::remove_all(task_dir);
  std::ofstream(task_dir) << "not a folder";
  const absl::Status stopped = scheduler.Stop();
  EXPECT_FALSE(stopped.ok());
  EXPECT_EQ(scheduler.written(), 0);
  EXPECT_TRUE(scheduler.Stop().ok());  // said once
}

TEST(CheckpointSchedulerTest, NegativeIntervalsAreRefusedWithTheFlagsNamed) {
  const absl::Status s = CheckpointScheduler::Check({.every_s = -1});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--checkpoint_every_s"), std::string::npos) << s;
  EXPECT_FALSE(CheckpointScheduler::Check({.every_steps = -1}).ok());
  EXPECT_FALSE(CheckpointScheduler::Check({.every_s = std::nan("")}).ok());
  EXPECT_TRUE(CheckpointScheduler::Check({.every_s = 0, .every_steps = 0}).ok());
}

}  // namespace
}  // namespace psflow
