#include "worker/ps_task.h"

#include <algorithm>
#include <utility>

#include "core/frame.h"

namespace psflow {
namespace {

const std::string kPullMethod = "/psflow.proto.ParameterServer/Pull";
const std::string kPushMethod = "/psflow.proto.ParameterServer/Push";

// Rows of a sparse partition per call: at most this many, so the row list fits a frame header.
constexpr int64_t kMaxRowsPerCall = 1 << 16;

}  // namespace

int64_t RowsPerCall(int64_t row_elements) {
  return std::clamp<int64_t>(kChunkBytes / (4 * std::max<int64_t>(row_elements, 1)), 1,
                             kMaxRowsPerCall);
}

std::span<const int64_t> RowsIn(std::span<const int64_t> rows, int64_t row_begin, int64_t row_end) {
  const auto first = std::lower_bound(rows.begin(), rows.end(), row_begin);
  const auto last = std::lower_bound(first, rows.end(), row_end);
  return {first, last};
}

void ChunkCall::AimAtSegments(nn::ParameterSet& into) {
  dest.clear();
  for (const SegmentRange& r : segments) {
    const TaskPartition& ref = (*partitions)[r.partition];
    dest.push_back(into.value(ref.handle)
                       .subspan(static_cast<size_t>(ref.first_element + r.offset),
                                static_cast<size_t>(r.count)));
  }
  SetTargets();
}

void ChunkCall::AimAtRows(nn::ParameterSet& into, uint32_t partition,
                          std::span<const int64_t> rows) {
  const TaskPartition& ref = (*partitions)[partition];
  const std::span<float> values = into.value(ref.handle);
  proto::Segment* s = call.varying.add_segments();
  s->set_partition(partition);
  s->set_count(static_cast<int64_t>(rows.size()) * ref.row_elements);
  dest.clear();
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    dest.push_back(
        values.subspan(static_cast<size_t>(rows[i] * ref.row_elements),
                       static_cast<size_t>((rows[j - 1] + 1 - rows[i]) * ref.row_elements)));
    i = j;
  }
  for (int64_t r : rows) s->add_rows(r - ref.row_begin);
  SetTargets();
}

void ChunkCall::SetTargets() {
  targets_.clear();
  target_bytes_ = 0;
  dest_elements = 0;
  for (const std::span<float> d : dest) dest_elements += static_cast<int64_t>(d.size());
  if (wire_type != WireType::kFloat32) return;
  for (const std::span<float> d : dest) {
    targets_.push_back({d.data(), d.size_bytes()});
    target_bytes_ += d.size_bytes();
  }
}

std::span<iovec> ChunkCall::PayloadTargets(uint64_t bytes) {
  if (bytes != target_bytes_ || targets_.empty()) return {};
  return targets_;
}

void ChunkCall::Completed(BulkCall& completed) {
  decoded = completed.DecodeReply(&reply);
  short_reply = false;
  if (!decoded.ok() || reply.timed_out() || completed.payload_placed) return;
  for (const std::span<float> d : dest) {
    if (!ReadFloats(completed.reply_source, d, wire_type)) {
      short_reply = true;
      return;
    }
  }
}

std::unique_ptr<PsTask> PsTask::Plan(int index, const Placement& placement,
                                     const nn::ParameterSet& params, const Settings& settings,
                                     const grpc::ChannelArguments& args) {
  auto task = std::make_unique<PsTask>();
  const auto t = static_cast<size_t>(index);
  task->index = index;
  task->address = settings.addresses[t];
  task->fingerprint = placement.fingerprint;
  task->worker = settings.training->worker_index;
  task->wire_type = settings.wire_type;
  task->pull_timeout = settings.rpc_timeout;
  task->first_connection = t * static_cast<size_t>(settings.connections);
  for (int k = 0; k < settings.connections; ++k) {
    // A channel argument of its own gives each channel its own subchannel, so its own TCP
    // connection (gRPC would otherwise share one between equal channels).
    grpc::ChannelArguments own = args;
    own.SetInt("grpc.psflow_connection", k);
    own.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel = OpenPsChannel(task->address, *settings.security, own);
    if (k == 0) {
      task->channel = channel;
      task->stub = proto::ParameterServer::NewStub(channel);
    }
    task->bulk.push_back(std::make_unique<grpc::GenericStub>(channel));
  }
  task->bytes = placement.bytes_per_task[t];
  std::vector<int64_t> elements;
  for (int i : placement.task_partitions[t]) {
    const PartitionPlacement& part = placement.partitions[static_cast<size_t>(i)];
    const auto& desc = params.descs()[static_cast<size_t>(part.variable)];
    task->partitions.push_back({part.variable, part.row_begin * part.row_elements, part.row_begin,
                                part.row_end, part.row_elements, params.sparse(part.variable)});
    elements.push_back(part.elements());
    proto::PartitionSpec* spec = task->init.add_partitions();
    spec->set_variable(desc.name);
    spec->mutable_variable_shape()->Assign(desc.shape.begin(), desc.shape.end());
    spec->set_row_begin(part.row_begin);
    spec->set_row_end(part.row_end);
  }
  *task->init.mutable_optimizer() = settings.training->optimizer;
  *task->init.mutable_sync() = settings.training->sync;
  task->init.set_fingerprint(placement.fingerprint);

  task->chunks = PlanChunks(elements);
  for (uint32_t c = 0; c < task->chunks.size(); ++c) {
    task->pull_calls.push_back(task->MakePullCall(c, task->chunks[c]));
  }
  // Gradient pushes plan the dense partitions only; sparse ones send their touched rows.
  std::vector<int64_t> dense = elements;
  for (uint32_t i = 0; i < dense.size(); ++i) {
    if (task->partitions[i].sparse) {
      dense[i] = 0;
      task->sparse_partitions.push_back(i);
    }
  }
  for (auto chunk : PlanChunks(dense)) {
    std::erase_if(chunk,
                  [&](const SegmentRange& r) { return task->partitions[r.partition].sparse; });
    if (chunk.empty()) continue;
    if (!task->sparse_partitions.empty()) {
      const auto c = static_cast<uint32_t>(task->dense_pull_calls.size());
      task->dense_pull_calls.push_back(task->MakePullCall(c, chunk));
    }
    const auto c = static_cast<uint32_t>(task->push_calls.size());
    auto call = task->MakeChunkCall(proto::TK_GRADIENT, c, std::move(chunk));
    for (const SegmentRange& r : call->segments) {
      call->parameters.push_back(task->partitions[r.partition].handle);
    }
    std::sort(call->parameters.begin(), call->parameters.end());
    call->parameters.erase(std::unique(call->parameters.begin(), call->parameters.end()),
                           call->parameters.end());
    task->push_calls.push_back(std::move(call));
  }
  task->sparse_counts.assign(task->sparse_partitions.size(), 0);
  return task;
}

std::unique_ptr<ChunkCall> PsTask::MakeChunkCall(proto::TransferKind kind, uint32_t chunk,
                                                 std::vector<SegmentRange> segments) const {
  auto c = std::make_unique<ChunkCall>();
  proto::TransferHeader fixed;
  fixed.set_kind(kind);
  fixed.set_fingerprint(fingerprint);
  fixed.set_worker(worker);
  fixed.set_chunk(chunk);
  fixed.set_wire_dtype(static_cast<proto::DType>(
      ProtoDtypeOf(kind == proto::TK_ASSIGN ? WireType::kFloat32 : wire_type)));
  if (kind == proto::TK_PULL) fixed.set_timeout_ms(pull_timeout.count());
  if (kind != proto::TK_GRADIENT) fixed.set_num_chunks(static_cast<uint32_t>(chunks.size()));
  for (const SegmentRange& r : segments) {
    proto::Segment* s = fixed.add_segments();
    s->set_partition(r.partition);
    s->set_offset(r.offset);
    s->set_count(r.count);
  }
  c->call.header = FrameHeaderBuffer(fixed);
  c->call.method = kind == proto::TK_PULL ? &kPullMethod : &kPushMethod;
  c->call.kind = kind == proto::TK_PULL ? BulkKind::kPull : BulkKind::kPush;
  const size_t k = chunk % bulk.size();
  c->call.stub = bulk[k].get();
  c->call.connection = first_connection + k;
  c->segments = std::move(segments);
  return c;
}

std::unique_ptr<ChunkCall> PsTask::MakePullCall(uint32_t chunk,
                                                std::vector<SegmentRange> segments) const {
  auto call = MakeChunkCall(proto::TK_PULL, chunk, std::move(segments));
  call->partitions = &partitions;
  call->wire_type = wire_type;
  call->call.observer = call.get();
  return call;
}

void PsTask::AimPull(nn::ParameterSet& params) {
  pulling.clear();
  if (!params.pulls_rows() || sparse_partitions.empty()) {
    for (auto& call : pull_calls) {
      call->AimAtSegments(params);
      pulling.push_back(call.get());
    }
    return;
  }
  for (auto& call : dense_pull_calls) {
    call->AimAtSegments(params);
    pulling.push_back(call.get());
  }
  // Each sparse partition takes at least one call (of no rows, perhaps): in sync mode every pull
  // learns the step of every partition it will push.
  for (const uint32_t p : sparse_partitions) {
    const TaskPartition& ref = partitions[p];
    const std::span<const int64_t> rows =
        RowsIn(params.rows_to_pull(ref.handle), ref.row_begin, ref.row_end);
    const auto n = static_cast<int64_t>(rows.size());
    const int64_t per_call = RowsPerCall(ref.row_elements);
    const int64_t calls = std::max<int64_t>(1, (n + per_call - 1) / per_call);
    for (int64_t k = 0; k < calls; ++k) {
      const size_t row_call = pulling.size() - dense_pull_calls.size();
      if (row_call == row_pull_calls.size()) {
        const auto chunk = static_cast<uint32_t>(dense_pull_calls.size() + row_call);
        row_pull_calls.push_back(MakePullCall(chunk, {}));
      }
      ChunkCall& call = *row_pull_calls[row_call];
      call.call.varying.clear_segments();
      call.AimAtRows(params, p,
                     rows.subspan(static_cast<size_t>(n * k / calls),
                                  static_cast<size_t>(n * (k + 1) / calls - n * k / calls)));
      pulling.push_back(&call);
    }
  }
}

uint32_t PsTask::AimPush(const nn::ParameterSet& params) {
  // The chunk count goes with every chunk, so it is fixed now: a sparse partition's touched rows
  // are final already (ps_client.h), each partition takes at least one call.
  auto n = static_cast<uint32_t>(push_calls.size());
  for (size_t i = 0; i < sparse_partitions.size(); ++i) {
    const TaskPartition& ref = partitions[sparse_partitions[i]];
    const auto rows = static_cast<int64_t>(
        RowsIn(params.touched_rows(ref.handle), ref.row_begin, ref.row_end).size());
    const int64_t per_call = RowsPerCall(ref.row_elements);
    sparse_counts[i] =
        static_cast<uint32_t>(std::max<int64_t>(1, (rows + per_call - 1) / per_call));
    n += sparse_counts[i];
  }
  push_chunks = n;
  while (sparse_calls.size() < n - push_calls.size()) {
    auto call = std::make_unique<BulkCall>();
    proto::TransferHeader fixed;
    fixed.set_kind(proto::TK_GRADIENT);
    fixed.set_fingerprint(fingerprint);
    fixed.set_worker(worker);
    fixed.set_wire_dtype(static_cast<proto::DType>(ProtoDtypeOf(wire_type)));
    call->header = FrameHeaderBuffer(fixed);
    call->method = &kPushMethod;
    const size_t k = (push_calls.size() + sparse_calls.size()) % bulk.size();
    call->stub = bulk[k].get();
    call->connection = first_connection + k;
    sparse_calls.push_back(std::move(call));
  }
  for (auto& call : push_calls) {
    call->missing = static_cast<int>(call->parameters.size());
    call->sent = false;
  }
  return n;
}

BulkCall& PsTask::PushCall(size_t c) {
  return c < push_calls.size() ? push_calls[c]->call : *sparse_calls[c - push_calls.size()];
}

}  // namespace psflow
