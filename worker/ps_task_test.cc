#include "worker/ps_task.h"

#include <gtest/gtest.h>

#include <numeric>

#include "core/byte_source.h"
#include "core/frame.h"

namespace psflow {
namespace {

// An embedding of 3000 x 600 (7.2 MB: two chunks), a 1500 x 1000 matrix (6 MB) and a bias.
class PsTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    emb_ = params_.Declare("emb", {3000, 600}, nn::Initializer::Zeros());
    w_ = params_.Declare("w", {1500, 1000}, nn::Initializer::Zeros());
    b_ = params_.Declare("b", {1000}, nn::Initializer::Zeros());
    params_.MarkSparse(emb_);
    params_.Finalize();
    training_.worker_index = 3;
  }

  // Task `index` of `tasks` tasks, `connections` each.
  std::unique_ptr<PsTask> Plan(int tasks, int index, int connections,
                               WireType wire = WireType::kFloat32) {
    std::vector<VariableInfo> infos;
    for (const auto& d : params_.descs()) infos.push_back({d.name, d.shape});
    absl::StatusOr<Placement> placement = PlaceVariables(infos, tasks);
    EXPECT_TRUE(placement.ok()) << placement.status();
    placement_ = *std::move(placement);
    PsTask::Settings settings;
    // Channels connect lazily: nothing listens here and nothing is sent.
    for (int t = 0; t < tasks; ++t) settings.addresses.push_back(absl::StrCat("127.0.0.1:", 9 + t));
    settings.connections = connections;
    settings.security = &security_;
    settings.training = &training_;
    settings.wire_type = wire;
    settings.rpc_timeout = std::chrono::seconds(7);
    return PsTask::Plan(index, placement_, params_, settings, grpc::ChannelArguments());
  }

  static proto::TransferHeader HeaderOf(BulkCall& call) {
    const std::span<const std::byte> bytes = call.header.With(call.varying);
    ByteSource source({bytes});
    proto::TransferHeader header;
    EXPECT_TRUE(DecodeFrameHeader(source, &header).ok());
    return header;
  }

  static int64_t Elements(const std::vector<SegmentRange>& segments) {
    int64_t n = 0;
    for (const SegmentRange& r : segments) n += r.count;
    return n;
  }

  nn::ParameterSet params_;
  nn::ParameterSet::Handle emb_ = 0, w_ = 0, b_ = 0;
  TransportSecurity security_;
  TrainingConfig training_;
  Placement placement_;
};

TEST_F(PsTaskTest, PullsEveryChunkAndPushesOnlyTheDensePartitions) {
  const std::unique_ptr<PsTask> task = Plan(1, 0, 1);
  ASSERT_EQ(task->partitions.size(), 3u);
  EXPECT_EQ(task->sparse_partitions, std::vector<uint32_t>({0}));
  EXPECT_EQ(task->init.partitions_size(), 3);
  EXPECT_EQ(task->init.fingerprint(), placement_.fingerprint);

  ASSERT_EQ(task->pull_calls.size(), task->chunks.size());
  int64_t pulled = 0;
  for (const auto& call : task->pull_calls) pulled += Elements(call->segments);
  EXPECT_EQ(pulled, 3000 * 600 + 1500 * 1000 + 1000);  // total_size() has padding

  // The gradient calls cover w and b, each element once, and list the parameters they cover.
  int64_t pushed = 0;
  for (const auto& call : task->push_calls) {
    pushed += Elements(call->segments);
    std::vector<nn::ParameterSet::Handle> covered;
    for (const SegmentRange& r : call->segments) {
      EXPECT_FALSE(task->partitions[r.partition].sparse);
      if (covered.empty() || covered.back() != task->partitions[r.partition].handle) {
        covered.push_back(task->partitions[r.partition].handle);
      }
    }
    EXPECT_EQ(call->parameters, covered);
  }
  EXPECT_EQ(pushed, 1500 * 1000 + 1000);
  // With a sparse partition, a pull of rows has the dense chunks of its own.
  int64_t dense_pulled = 0;
  for (const auto& call : task->dense_pull_calls) dense_pulled += Elements(call->segments);
  EXPECT_EQ(dense_pulled, pushed);
}

TEST_F(PsTaskTest, SpreadsItsChunksOverItsConnectionsAndSaysWhatEachCarries) {
  const std::unique_ptr<PsTask> task = Plan(2, 1, 3, WireType::kBfloat16);
  EXPECT_EQ(task->first_connection, 3u);
  ASSERT_EQ(task->bulk.size(), 3u);
  for (uint32_t c = 0; c < task->pull_calls.size(); ++c) {
    BulkCall& call = task->pull_calls[c]->call;
    EXPECT_EQ(call.connection, 3 + c % 3);
    EXPECT_EQ(call.stub, task->bulk[c % 3].get());
    EXPECT_EQ(call.kind, BulkKind::kPull);
    const proto::TransferHeader h = HeaderOf(call);
    EXPECT_EQ(h.kind(), proto::TK_PULL);
    EXPECT_EQ(h.chunk(), c);
    EXPECT_EQ(h.num_chunks(), task->chunks.size());
    EXPECT_EQ(h.worker(), 3);
    EXPECT_EQ(h.fingerprint(), placement_.fingerprint);
    EXPECT_EQ(h.wire_dtype(), proto::DT_BFLOAT16);
    EXPECT_EQ(h.timeout_ms(), 7000);
  }
  // Initial values travel as float32 whatever the wire type; a gradient call's chunk count is
  // the step's (set per send), not fixed.
  std::unique_ptr<ChunkCall> assign =
      task->MakeChunkCall(proto::TK_ASSIGN, 1, task->chunks[task->chunks.size() - 1]);
  EXPECT_EQ(HeaderOf(assign->call).wire_dtype(), proto::DT_FLOAT32);
  EXPECT_EQ(assign->call.kind, BulkKind::kPush);
  for (const auto& call : task->push_calls) {
    const proto::TransferHeader h = HeaderOf(call->call);
    EXPECT_EQ(h.kind(), proto::TK_GRADIENT);
    EXPECT_EQ(h.num_chunks(), 0u);
    EXPECT_EQ(h.wire_dtype(), proto::DT_BFLOAT16);
  }
}

TEST_F(PsTaskTest, PushCountsTheCallsOfTheTouchedRows) {
  const std::unique_ptr<PsTask> task = Plan(1, 0, 2);
  const size_t dense = task->push_calls.size();
  const int64_t per_call = RowsPerCall(600);
  ASSERT_EQ(per_call, (4 << 20) / (4 * 600));

  // No row touched: still one call of the sparse partition.
  EXPECT_EQ(task->AimPush(params_), dense + 1);
  EXPECT_EQ(task->sparse_counts, std::vector<uint32_t>({1}));
  EXPECT_EQ(task->sparse_calls.size(), 1u);

  std::vector<int64_t> rows(static_cast<size_t>(per_call + 1));
  std::iota(rows.begin(), rows.end(), 0);
  params_.SetTouchedRows(emb_, rows);
  task->push_calls[0]->sent = true;
  task->push_calls[0]->missing = 0;
  EXPECT_EQ(task->AimPush(params_), dense + 2);
  EXPECT_EQ(task->push_chunks, dense + 2);
  EXPECT_EQ(task->sparse_counts, std::vector<uint32_t>({2}));
  ASSERT_EQ(task->sparse_calls.size(), 2u);
  for (const auto& call : task->push_calls) {
    EXPECT_FALSE(call->sent);
    EXPECT_EQ(call->missing, static_cast<int>(call->parameters.size()));
  }
  // The calls follow the dense chunks, numbered on, on the connections that numbering gives.
  EXPECT_EQ(&task->PushCall(0), &task->push_calls[0]->call);
  EXPECT_EQ(&task->PushCall(dense + 1), task->sparse_calls[1].get());
  EXPECT_EQ(task->sparse_calls[1]->connection, (dense + 1) % 2);

  // Fewer rows again: the calls made stay for later steps.
  params_.SetTouchedRows(emb_, {4});
  EXPECT_EQ(task->AimPush(params_), dense + 1);
  EXPECT_EQ(task->sparse_calls.size(), 2u);
}

TEST_F(PsTaskTest, PullOfRowsBringsTheDenseChunksAndEachRunOfRows) {
  const std::unique_ptr<PsTask> task = Plan(1, 0, 1);
  task->AimPull(params_);  // every row: the plain chunks
  ASSERT_EQ(task->pulling.size(), task->pull_calls.size());
  for (size_t c = 0; c < task->pulling.size(); ++c) {
    EXPECT_EQ(task->pulling[c], task->pull_calls[c].get());
  }

  params_.set_pulls_rows(true);
  params_.mutable_rows_to_pull(emb_) = {5, 6, 7, 100};
  task->AimPull(params_);
  const size_t dense = task->dense_pull_calls.size();
  ASSERT_EQ(task->pulling.size(), dense + 1);
  ChunkCall& rows = *task->pulling[dense];
  const std::span<float> emb = params_.value(emb_);
  ASSERT_EQ(rows.dest.size(), 2u);
  EXPECT_EQ(rows.dest[0].data(), emb.data() + 5 * 600);
  EXPECT_EQ(rows.dest[0].size(), 3u * 600);
  EXPECT_EQ(rows.dest[1].data(), emb.data() + 100 * 600);
  EXPECT_EQ(rows.dest[1].size(), 600u);
  EXPECT_EQ(rows.dest_elements, 4 * 600);
  // A float32 reply of exactly those bytes is read straight there; any other size is not.
  ASSERT_EQ(rows.PayloadTargets(4 * 600 * 4).size(), 2u);
  EXPECT_TRUE(rows.PayloadTargets(4 * 600 * 4 - 4).empty());
  const proto::TransferHeader h = HeaderOf(rows.call);
  ASSERT_EQ(h.segments_size(), 1);
  EXPECT_EQ(h.segments(0).partition(), 0u);
  EXPECT_EQ(h.segments(0).count(), 4 * 600);
  EXPECT_EQ(std::vector<int64_t>(h.segments(0).rows().begin(), h.segments(0).rows().end()),
            std::vector<int64_t>({5, 6, 7, 100}));
  EXPECT_EQ(h.chunk(), dense);

  // No row to pull: the partition still takes one call (a sync pull learns its step).
  params_.mutable_rows_to_pull(emb_).clear();
  task->AimPull(params_);
  ASSERT_EQ(task->pulling.size(), dense + 1);
  EXPECT_EQ(task->pulling[dense]->dest_elements, 0);
}

TEST(RowsIn, TheRowsOfAPartition) {
  const std::vector<int64_t> rows = {1, 4, 5, 9, 12};
  const auto in = [&](int64_t b, int64_t e) {
    const std::span<const int64_t> r = RowsIn(rows, b, e);
    return std::vector<int64_t>(r.begin(), r.end());
  };
  EXPECT_EQ(in(0, 100), rows);
  EXPECT_EQ(in(4, 9), std::vector<int64_t>({4, 5}));
  EXPECT_EQ(in(5, 13), std::vector<int64_t>({5, 9, 12}));
  EXPECT_EQ(in(6, 9), std::vector<int64_t>());
  EXPECT_EQ(in(13, 20), std::vector<int64_t>());
}

TEST(RowsPerCall, AChunksBytesAndAHeadersRowsAtMost) {
  EXPECT_EQ(RowsPerCall(600), (4 << 20) / 2400);
  EXPECT_EQ(RowsPerCall(1), 1 << 16);  // the header's limit
  EXPECT_EQ(RowsPerCall(0), 1 << 16);
  EXPECT_EQ(RowsPerCall(int64_t{1} << 21), 1);  // a row over a chunk still goes, one per call
}

}  // namespace
}  // namespace psflow
