#include "worker/ps_client.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/backoff.h"
#include "core/byte_source.h"
#include "core/chunk_plan.h"
#include "core/frame.h"
#include "core/grpc_tuning.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "core/wire_type.h"
#include "proto/ps.grpc.pb.h"

namespace psflow {
namespace {

// Backoff and timeouts use the steady clock; gRPC deadlines take the system clock.
using Clock = std::chrono::steady_clock;

const std::string kPullMethod = "/psflow.proto.ParameterServer/Pull";
const std::string kPushMethod = "/psflow.proto.ParameterServer/Push";

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

// Bulk calls in flight per ps task: enough to cover a round trip, few enough that the ps does
// not buffer a whole big model at once. (Measured on 2 cores: 4 and 16 are alike; more TCP
// connections per task did not help there either.)
constexpr size_t kInFlightPerTask = 4;

proto::DType WireDtype(WireType type) {
  switch (type) {
    case WireType::kFloat32:
      return proto::DT_FLOAT32;
    case WireType::kBfloat16:
      return proto::DT_BFLOAT16;
    case WireType::kFloat16:
      return proto::DT_FLOAT16;
  }
  return proto::DT_FLOAT32;
}

bool Retryable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

// One partition of a task, as the worker sees it: a run of one parameter's elements.
struct PartitionRef {
  nn::ParameterSet::Handle handle = 0;
  int64_t first_element = 0;  // within the parameter
  int64_t row_begin = 0;      // rows of the parameter's first dimension
  int64_t row_end = 0;
  int64_t row_elements = 0;
};

struct PsClient::Task {
  int index = 0;
  std::string address;
  std::unique_ptr<proto::ParameterServer::Stub> stub;
  std::unique_ptr<grpc::GenericStub> bulk;
  std::vector<PartitionRef> partitions;                // in the task's order
  std::vector<std::vector<SegmentRange>> chunks;       // PlanChunks of the partitions
  std::vector<std::vector<SegmentRange>> push_chunks;  // the same without sparse partitions
  proto::InitializeRequest init;                       // the chief's request (partitions filled)
  int64_t bytes = 0;
  int64_t pulled_step = 0;    // the task's step at the last pull
  int64_t next_min_step = 0;  // sync: the step the next pull waits for
};

struct PsClient::Call {
  Task* task = nullptr;
  size_t chunk = 0;
  std::optional<grpc::ClientContext> context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  std::vector<std::byte> wire;  // a push's elements converted to a 16-bit wire type
  grpc::Status status;
};

PsClient::PsClient(Options options) : options_(std::move(options)) {}
PsClient::~PsClient() = default;

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(Options options,
                                                           const nn::ParameterSet& params) {
  if (options.ps_addresses.empty()) return absl::InvalidArgumentError("no ps task to talk to");
  std::vector<VariableInfo> infos;
  for (const auto& d : params.descs()) infos.push_back({d.name, d.shape});
  const int num_tasks = static_cast<int>(options.ps_addresses.size());
  ASSIGN_OR_RETURN(Placement placement, PlaceVariables(infos, num_tasks));

  std::unique_ptr<PsClient> c(new PsClient(std::move(options)));
  c->placement_ = std::move(placement);
  grpc::ChannelArguments args;
  ApplyBulkTuning(args);
  // Reconnect quickly to a ps that restarts (gRPC's default backoff grows to two minutes).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  const Placement& p = c->placement_;
  for (int t = 0; t < num_tasks; ++t) {
    auto task = std::make_unique<Task>();
    task->index = t;
    task->address = c->options_.ps_addresses[static_cast<size_t>(t)];
    auto channel =
        grpc::CreateCustomChannel(task->address, grpc::InsecureChannelCredentials(), args);
    task->stub = proto::ParameterServer::NewStub(channel);
    task->bulk = std::make_unique<grpc::GenericStub>(channel);
    task->bytes = p.bytes_per_task[static_cast<size_t>(t)];
    std::vector<int64_t> elements;
    for (int i : p.task_partitions[static_cast<size_t>(t)]) {
      const PartitionPlacement& part = p.partitions[static_cast<size_t>(i)];
      const auto& desc = params.descs()[static_cast<size_t>(part.variable)];
      task->partitions.push_back({part.variable, part.row_begin * part.row_elements, part.row_begin,
                                  part.row_end, part.row_elements});
      elements.push_back(part.elements());
      proto::PartitionSpec* spec = task->init.add_partitions();
      spec->set_variable(desc.name);
      spec->mutable_variable_shape()->Assign(desc.shape.begin(), desc.shape.end());
      spec->set_row_begin(part.row_begin);
      spec->set_row_end(part.row_end);
    }
    task->chunks = PlanChunks(elements);
    // Gradient pushes plan the dense partitions only; sparse ones send their touched rows.
    std::vector<int64_t> dense = elements;
    for (size_t i = 0; i < dense.size(); ++i) {
      if (params.sparse(task->partitions[i].handle)) dense[i] = 0;
    }
    for (auto chunk : PlanChunks(dense)) {
      std::erase_if(chunk, [&](const SegmentRange& r) {
        return params.sparse(task->partitions[r.partition].handle);
      });
      if (!chunk.empty()) task->push_chunks.push_back(std::move(chunk));
    }
    *task->init.mutable_optimizer() = c->options_.training.optimizer;
    *task->init.mutable_sync() = c->options_.training.sync;
    task->init.set_fingerprint(p.fingerprint);
    c->tasks_.push_back(std::move(task));
  }
  PSFLOW_LOG(INFO) << "placement: " << p.Describe();
  return c;
}

absl::Status PsClient::Prepare(const nn::ParameterSet& params, bool is_chief) {
  is_chief_ = is_chief;
  for (auto& task : tasks_) {
    if (task->partitions.empty()) continue;
    RETURN_IF_ERROR(is_chief ? InitializeTask(*task, params) : WaitReadyTask(*task));
  }
  return absl::OkStatus();
}

absl::Status PsClient::InitializeTask(Task& task, const nn::ParameterSet& params) {
  Backoff backoff(std::chrono::milliseconds(100), std::chrono::seconds(2),
                  Clock::now() + options_.connect_timeout);
  auto call = [&](bool commit, proto::InitializeResponse* response) {
    task.init.set_commit(commit);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.rpc_timeout);
    return task.stub->Initialize(&ctx, task.init, response);
  };
  for (;;) {
    proto::InitializeResponse response;
    grpc::Status s = call(false, &response);
    if (s.ok() && response.initialized_now()) {
      // Send the initial values as TK_ASSIGN chunks, then commit.
      SyncResult ignored;
      const absl::Status assigned = Transfer(params, proto::TK_ASSIGN, 0, &ignored, &task, nullptr);
      if (assigned.ok())
        s = call(true, &response);
      else
        s = grpc::Status(static_cast<grpc::StatusCode>(assigned.code()),
                         std::string(assigned.message()));
    }
    if (s.ok()) {
      PSFLOW_LOG(INFO) << (response.initialized_now() ? "initialised " : "found existing ")
                       << task.partitions.size() << " partition(s) (" << task.bytes
                       << " bytes) on ps task " << task.index << " at " << task.address
                       << ", global step " << response.global_step();
      return absl::OkStatus();
    }
    if (!Retryable(s) || !backoff.Wait()) {
      return absl::Status(
          Retryable(s) ? absl::StatusCode::kUnavailable : FromGrpc(s).code(),
          absl::StrCat("ps task ", task.index, " at ", task.address,
                       Retryable(s) ? absl::StrCat(" unreachable for ",
                                                   options_.connect_timeout.count() / 1000, "s")
                                    : " refused to initialise",
                       ": ", s.error_message()));
    }
  }
}

absl::Status PsClient::WaitReadyTask(Task& task) {
  const auto deadline = Clock::now() + options_.connect_timeout;
  Backoff backoff(std::chrono::milliseconds(100), std::chrono::seconds(2), deadline);
  grpc::Status last;
  bool reached = false;
  while (Clock::now() < deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + left + std::chrono::seconds(1));
    proto::WaitReadyRequest request;
    request.set_timeout_ms(std::min<int64_t>(left.count(), 5000));
    proto::WaitReadyResponse response;
    last = task.stub->WaitReady(&ctx, request, &response);
    if (last.ok()) {
      reached = true;
      if (!response.ready()) continue;  // held for timeout_ms: ask again, no backoff needed
      if (response.fingerprint() != placement_.fingerprint) {
        return absl::FailedPreconditionError(
            absl::StrCat("ps task ", task.index, " at ", task.address,
                         " holds a different model or placement than this worker's (fingerprint ",
                         response.fingerprint(), " vs ", placement_.fingerprint,
                         "): do all workers run the same --model and ps list?"));
      }
      task.pulled_step = task.next_min_step = 0;
      return absl::OkStatus();
    }
    if (!Retryable(last)) {
      return absl::Status(FromGrpc(last).code(),
                          absl::StrCat("ps task ", task.index, " at ", task.address,
                                       " refused WaitReady: ", last.error_message(), " (",
                                       absl::StatusCodeToString(FromGrpc(last).code()), ")"));
    }
    if (!backoff.Wait()) break;
  }
  const int64_t secs = options_.connect_timeout.count() / 1000;
  if (!reached) {
    return absl::UnavailableError(absl::StrCat("ps task ", task.index, " at ", task.address,
                                               " unreachable for ", secs,
                                               "s: ", last.error_message()));
  }
  return absl::DeadlineExceededError(absl::StrCat("variables not initialised on ps task ",
                                                  task.index, " at ", task.address, " after ", secs,
                                                  "s: is the chief (worker 0) running?"));
}

absl::Status PsClient::Recover(nn::ParameterSet& params) {
  PSFLOW_LOG(WARNING) << "lost a ps task; waiting up to " << options_.connect_timeout.count() / 1000
                      << "s for every task to be ready again";
  for (auto& task : tasks_) {
    if (task->partitions.empty()) continue;
    // The chief re-creates a task that came back empty (no checkpoint) from its own latest
    // parameters; a task restored from its checkpoint is found ready and left as it is.
    RETURN_IF_ERROR(is_chief_ ? InitializeTask(*task, params) : WaitReadyTask(*task));
    task->pulled_step = task->next_min_step = 0;
  }
  need_recovery_ = false;
  PSFLOW_LOG(INFO) << "every ps task is ready again; continuing";
  return absl::OkStatus();
}

absl::Status PsClient::Transfer(const nn::ParameterSet& params, proto::TransferKind kind,
                                int64_t examples, SyncResult* result, Task* only,
                                nn::ParameterSet* pull_into) {
  const bool pull = kind == proto::TK_PULL;
  const bool sync = options_.training.sync.sync_replicas();
  std::vector<std::unique_ptr<Call>> calls;
  std::mutex mu;
  std::condition_variable cv;
  size_t pending = 0;
  const bool gradients = kind == proto::TK_GRADIENT;
  for (auto& task : tasks_) {
    if (only != nullptr && task.get() != only) continue;
    // What each call of this task carries: chunks of the dense plan; for gradients also the
    // touched rows of sparse partitions.
    struct Piece {
      proto::Segment segment;
      const float* data;  // segment.count() elements (dense), or null: rows from `rows_base`
      const float* rows_base = nullptr;
      int64_t row_elements = 0;
    };
    std::vector<std::vector<Piece>> plan;
    const auto& chunks = gradients ? task->push_chunks : task->chunks;
    for (const auto& chunk : chunks) {
      auto& pieces = plan.emplace_back();
      for (const SegmentRange& r : chunk) {
        const PartitionRef& ref = task->partitions[r.partition];
        Piece piece;
        piece.segment.set_partition(r.partition);
        piece.segment.set_offset(r.offset);
        piece.segment.set_count(r.count);
        piece.data = (kind == proto::TK_GRADIENT ? params.grad(ref.handle).data()
                                                 : params.value(ref.handle).data()) +
                     ref.first_element + r.offset;
        pieces.push_back(std::move(piece));
      }
    }
    if (gradients) {
      for (uint32_t p = 0; p < task->partitions.size(); ++p) {
        const PartitionRef& ref = task->partitions[p];
        if (!params.sparse(ref.handle)) continue;
        // This partition's share of the touched rows, as rows of the partition.
        const auto rows = params.touched_rows(ref.handle);
        const auto first = std::lower_bound(rows.begin(), rows.end(), ref.row_begin);
        const auto last = std::lower_bound(first, rows.end(), ref.row_end);
        const int64_t per_call = std::max<int64_t>(1, kChunkBytes / (4 * ref.row_elements));
        for (auto it = first; it < last; it += std::min<int64_t>(per_call, last - it)) {
          const auto end = it + std::min<int64_t>(per_call, last - it);
          Piece piece;
          for (auto r = it; r < end; ++r) piece.segment.add_rows(*r - ref.row_begin);
          piece.segment.set_partition(p);
          piece.segment.set_count(piece.segment.rows_size() * ref.row_elements);
          piece.data = nullptr;
          piece.rows_base = params.grad(ref.handle).data() + ref.first_element;
          piece.row_elements = ref.row_elements;
          plan.emplace_back().push_back(std::move(piece));
        }
      }
      if (plan.empty() && !task->partitions.empty()) {
        // Nothing to send this step (no rows touched here): one empty call still counts it.
        Piece piece;
        piece.segment.set_partition(0);
        piece.data = nullptr;
        plan.emplace_back().push_back(std::move(piece));
      }
    }
    for (size_t c = 0; c < plan.size(); ++c) {
      auto call = std::make_unique<Call>();
      call->task = task.get();
      call->chunk = c;
      proto::TransferHeader h;
      h.set_kind(kind);
      h.set_fingerprint(placement_.fingerprint);
      h.set_worker(options_.training.worker_index);
      h.set_chunk(static_cast<uint32_t>(c));
      h.set_num_chunks(static_cast<uint32_t>(plan.size()));
      // Initial values always travel as float32: they are the ps's master copy.
      const WireType type = kind == proto::TK_ASSIGN ? WireType::kFloat32 : options_.wire_type;
      h.set_wire_dtype(WireDtype(type));
      if (pull) {
        h.set_step(sync ? task->next_min_step : 0);
        h.set_timeout_ms(options_.rpc_timeout.count());
      } else {
        h.set_step(task->pulled_step);
        if (c == 0) h.set_examples(examples);
      }
      for (const Piece& piece : plan[c]) *h.add_segments() = piece.segment;
      std::vector<grpc::Slice> slices;
      slices.emplace_back(EncodeFrameHeader(h));
      if (!pull) {
        // The buffers themselves go to gRPC: they outlive the call (we wait for every reply).
        // A 16-bit wire type converts them into the call's own buffer first.
        std::vector<std::span<const float>> runs;
        for (const Piece& piece : plan[c]) {
          if (piece.data != nullptr && piece.segment.count() > 0) {
            runs.emplace_back(piece.data, static_cast<size_t>(piece.segment.count()));
          }
          for (int64_t row : piece.segment.rows()) {
            runs.emplace_back(piece.rows_base + row * piece.row_elements,
                              static_cast<size_t>(piece.row_elements));
          }
        }
        if (type == WireType::kFloat32) {
          for (const auto& run : runs) {
            slices.emplace_back(run.data(), run.size_bytes(), grpc::Slice::STATIC_SLICE);
          }
        } else {
          size_t total = 0;
          for (const auto& run : runs) total += run.size();
          call->wire.resize(total * WireBytes(type));
          std::byte* out = call->wire.data();
          for (const auto& run : runs) {
            EncodeWire(run, type, out);
            out += run.size() * WireBytes(type);
          }
          if (total > 0) {
            slices.emplace_back(call->wire.data(), call->wire.size(), grpc::Slice::STATIC_SLICE);
          }
        }
        for (const Piece& piece : plan[c]) {
          result->bytes += piece.segment.count() * static_cast<int64_t>(WireBytes(type));
        }
      }
      call->request = grpc::ByteBuffer(slices.data(), slices.size());
      call->context.emplace();
      call->context->set_deadline(
          std::chrono::system_clock::now() + options_.rpc_timeout +
          (pull && sync ? options_.rpc_timeout : std::chrono::milliseconds(0)));
      calls.push_back(std::move(call));
    }
  }
  const size_t window = kInFlightPerTask;
  std::vector<std::vector<Call*>> queued(tasks_.size());
  for (auto it = calls.rbegin(); it != calls.rend(); ++it) {
    queued[static_cast<size_t>((*it)->task->index)].push_back(it->get());
  }
  pending = calls.size();
  std::function<void(Call*)> start = [&](Call* raw) {
    raw->task->bulk->UnaryCall(&*raw->context, pull ? kPullMethod : kPushMethod,
                               grpc::StubOptions(), &raw->request, &raw->response,
                               [&, raw](grpc::Status st) {
                                 raw->status = std::move(st);
                                 Call* next = nullptr;
                                 {
                                   std::lock_guard lock(mu);
                                   auto& q = queued[static_cast<size_t>(raw->task->index)];
                                   if (!q.empty()) {
                                     next = q.back();
                                     q.pop_back();
                                   }
                                   if (--pending == 0) cv.notify_one();
                                 }
                                 if (next != nullptr) start(next);
                               });
  };
  std::vector<Call*> first;
  {
    std::lock_guard lock(mu);
    for (auto& q : queued) {
      for (size_t k = 0; k < window && !q.empty(); ++k) {
        first.push_back(q.back());
        q.pop_back();
      }
    }
  }
  for (Call* raw : first) start(raw);
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return pending == 0; });
  }

  const char* what = pull ? "pull" : (kind == proto::TK_ASSIGN ? "initial values" : "push");
  for (auto& call : calls) {
    Task& task = *call->task;
    if (!call->status.ok()) {
      return absl::Status(FromGrpc(call->status).code(),
                          absl::StrCat(what, " to ps task ", task.index, " at ", task.address,
                                       " failed: ", call->status.error_message()));
    }
    std::vector<grpc::Slice> slices;
    if (!call->response.Dump(&slices).ok()) {
      return absl::InternalError(absl::StrCat("unreadable reply from ps task ", task.index));
    }
    std::vector<std::span<const std::byte>> pieces;
    for (const grpc::Slice& s : slices) {
      pieces.emplace_back(reinterpret_cast<const std::byte*>(s.begin()), s.size());
    }
    ByteSource source(std::move(pieces));
    proto::TransferReply reply;
    RETURN_IF_ERROR(DecodeFrameHeader(source, &reply));
    if (reply.timed_out()) {
      return absl::DeadlineExceededError(
          absl::StrCat("ps task ", task.index, " at ", task.address, " did not reach step ",
                       task.next_min_step, " within ", options_.rpc_timeout.count() / 1000,
                       "s (it is at ", reply.global_step(), "): are enough workers pushing?"));
    }
    if (reply.dropped()) result->dropped = true;
    if (call->chunk == 0 && task.index == 0) result->global_step = reply.global_step();
    if (!pull) {
      if (call->chunk == 0 && sync && kind == proto::TK_GRADIENT) {
        task.next_min_step = task.pulled_step + 1;
      }
      continue;
    }
    if (call->chunk == 0) task.pulled_step = reply.global_step();
    for (const SegmentRange& r : task.chunks[call->chunk]) {
      const PartitionRef& ref = task.partitions[r.partition];
      const auto dst = pull_into->value(ref.handle)
                           .subspan(static_cast<size_t>(ref.first_element + r.offset),
                                    static_cast<size_t>(r.count));
      if (!ReadFloats(source, dst, options_.wire_type)) {
        return absl::InternalError(
            absl::StrCat("short pull reply from ps task ", task.index, " at ", task.address));
      }
      result->bytes += r.count * static_cast<int64_t>(WireBytes(options_.wire_type));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SyncResult> PsClient::Pull(nn::ParameterSet& params) {
  const auto deadline = Clock::now() + options_.connect_timeout;
  for (;;) {
    if (need_recovery_) RETURN_IF_ERROR(Recover(params));
    SyncResult result;
    absl::Status s = Transfer(params, proto::TK_PULL, 0, &result, nullptr, &params);
    if (s.ok()) {
      params.ValuesChanged();
      return result;
    }
    if (!absl::IsUnavailable(s) || Clock::now() >= deadline) return s;
    need_recovery_ = true;
  }
}

absl::StatusOr<SyncResult> PsClient::Push(nn::ParameterSet& params, int64_t examples) {
  SyncResult result;
  absl::Status s = Transfer(params, proto::TK_GRADIENT, examples, &result, nullptr, nullptr);
  if (absl::IsUnavailable(s)) {
    // A ps task went away mid-push (killed; it restarts from its checkpoint): these gradients
    // are lost, the next Pull waits for the task and starts from its state.
    PSFLOW_LOG(WARNING) << s.message();
    need_recovery_ = true;
    result.dropped = true;
    return result;
  }
  RETURN_IF_ERROR(s);
  return result;
}

absl::Status PsClient::SetLearningRate(float learning_rate) {
  for (auto& task : tasks_) {
    if (task->partitions.empty()) continue;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.rpc_timeout);
    proto::SetLearningRateRequest request;
    request.set_learning_rate(learning_rate);
    proto::SetLearningRateResponse response;
    const grpc::Status s = task->stub->SetLearningRate(&ctx, request, &response);
    if (!s.ok()) {
      return absl::Status(FromGrpc(s).code(),
                          absl::StrCat("set learning rate on ps task ", task->index, " at ",
                                       task->address, ": ", s.error_message()));
    }
  }
  return absl::OkStatus();
}

absl::Status PsClient::Leave() {
  for (auto& task : tasks_) {
    if (task->partitions.empty()) continue;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.rpc_timeout);
    proto::LeaveRequest request;
    request.set_worker(options_.training.worker_index);
    proto::LeaveResponse response;
    const grpc::Status s = task->stub->Leave(&ctx, request, &response);
    if (!s.ok()) {
      return absl::Status(FromGrpc(s).code(), absl::StrCat("leave on ps task ", task->index, " at ",
                                                           task->address, ": ", s.error_message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace psflow
