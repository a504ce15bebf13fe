#include "worker/ps_client.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/backoff.h"
#include "core/chunk_plan.h"
#include "core/grpc_tuning.h"
#include "core/log.h"
#include "core/same_training.h"
#include "core/status_macros.h"
#include "core/wire_type.h"
#include "proto/ps.grpc.pb.h"
#include "worker/bulk_link.h"

namespace psflow {
namespace {

// Backoff and timeouts use the steady clock; gRPC deadlines take the system clock.
using Clock = std::chrono::steady_clock;

// Bulk calls in flight per connection: enough to cover a round trip, few enough that the ps does
// not buffer a whole big model at once. (Measured on 2 cores with one connection per task: 4 and
// 16 are alike.)
constexpr size_t kInFlightPerConnection = 4;

// What a plaintext client's "Socket closed" most likely means: a ps serving mutual TLS ends such
// connections at their first bytes.
std::string TlsHint(const TransportSecurity& security, const grpc::Status& s) {
  if (security.tls() || !absl::StrContains(s.error_message(), "Socket closed")) return "";
  return " (a ps serving mutual TLS closes plaintext connections so: give this task --tls_ca, "
         "--tls_cert and --tls_key too)";
}

// A ps that is not there (yet), too slow, or stopping (CANCELLED: see PsCallStatus).
bool Retryable(const grpc::Status& s) {
  return absl::IsUnavailable(PsCallStatus(s)) ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

absl::StatusOr<Transport> ParseTransport(absl::string_view name) {
  if (name == "bulk") return Transport::kBulk;
  if (name == "grpc") return Transport::kGrpc;
  return absl::InvalidArgumentError(
      absl::StrCat("--transport must be bulk or grpc, got \"", name, "\""));
}

PsClient::PsClient(Options options) : options_(std::move(options)) {}
PsClient::~PsClient() { Quiesce(); }

absl::Status PsClient::CheckConnectionsPerTask(int n, absl::string_view what) {
  if (n >= 1 && n <= kMaxConnectionsPerTask) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " must be in [1, ", kMaxConnectionsPerTask, "], got ", n));
}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(Options options,
                                                           const nn::ParameterSet& params) {
  if (options.ps_addresses.empty()) return absl::InvalidArgumentError("no ps task to talk to");
  RETURN_IF_ERROR(CheckConnectionsPerTask(options.connections_per_task, "connections per ps task"));
  std::vector<VariableInfo> infos;
  for (const auto& d : params.descs()) infos.push_back({d.name, d.shape});
  const int num_tasks = static_cast<int>(options.ps_addresses.size());
  ASSIGN_OR_RETURN(Placement placement,
                   PlaceVariables(infos, num_tasks, {.strategy = options.placement}));

  std::unique_ptr<PsClient> c(new PsClient(std::move(options)));
  c->placement_ = std::move(placement);
  if (c->options_.security.tls() && c->options_.transport == Transport::kBulk) {
    ASSIGN_OR_RETURN(c->bulk_tls_,
                     BulkTlsContext::Make(c->options_.security, BulkTlsContext::Role::kClient));
  }
  grpc::ChannelArguments args;
  ApplyBulkTuning(args);
  // Reconnect quickly to a ps that restarts (gRPC's default backoff grows to two minutes).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  // gRPC takes the minimum backoff as each connection attempt's timeout as well: a TLS handshake on
  // a loaded machine takes longer than 100 ms.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  c->chunks_of_parameter_.resize(params.descs().size());
  c->ready_.assign(params.descs().size(), false);
  const PsTask::Settings settings{.addresses = c->options_.ps_addresses,
                                  .connections = c->options_.connections_per_task,
                                  .security = &c->options_.security,
                                  .training = &c->options_.training,
                                  .wire_type = c->options_.wire_type,
                                  .rpc_timeout = c->options_.rpc_timeout};
  size_t max_calls = 0;
  for (int t = 0; t < num_tasks; ++t) {
    std::unique_ptr<PsTask> task = PsTask::Plan(t, c->placement_, params, settings, args);
    for (size_t i = 0; i < task->push_calls.size(); ++i) {
      for (const nn::ParameterSet::Handle h : task->push_calls[i]->parameters) {
        c->chunks_of_parameter_[static_cast<size_t>(h)].emplace_back(task.get(), i);
      }
    }
    max_calls += task->calls_planned();
    c->tasks_.push_back(std::move(task));
  }
  c->window_ = std::make_unique<CallWindow>(
      static_cast<size_t>(num_tasks * c->options_.connections_per_task), kInFlightPerConnection,
      max_calls);
  PSFLOW_LOG(INFO) << "placement: " << c->placement_.Describe();
  return c;
}

std::chrono::system_clock::time_point PsClient::Deadline(bool parked_pull) const {
  return std::chrono::system_clock::now() + options_.rpc_timeout +
         (parked_pull ? options_.rpc_timeout : std::chrono::milliseconds(0));
}

void PsClient::Quiesce() {
  if (window_ != nullptr) window_->Wait();
  if (push_open_) {
    push_open_ = false;
    std::fill(ready_.begin(), ready_.end(), false);
  }
}

namespace {

// The backoff's wait between two connection attempts, spent waiting on the channel's state rather
// than asleep: a synchronous call fails fast and its thread is what drives a connection being
// made (a TLS handshake's round trips), so sleeping left the handshake unread until its attempt
// timed out, again and again (seen as workers unable to reach a ps for a minute under load).
// False once the backoff's deadline has passed.
bool WaitPolling(Backoff& backoff, grpc::Channel& channel) {
  const std::optional<std::chrono::milliseconds> delay = backoff.NextDelay();
  if (!delay) return false;
  const auto until = std::chrono::system_clock::now() + *delay;
  while (std::chrono::system_clock::now() < until) {
    const grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
    if (state == GRPC_CHANNEL_READY) {  // nothing to drive: the call failed for another reason
      std::this_thread::sleep_until(until);
      break;
    }
    channel.WaitForStateChange(state, until);
  }
  return true;
}

}  // namespace

absl::Status PsClient::Prepare(const nn::ParameterSet& params, bool is_chief) {
  is_chief_ = is_chief;
  const Clock::time_point start = Clock::now();
  const Clock::time_point end = options_.startup_timeout.count() > 0
                                    ? Clock::now() + options_.startup_timeout
                                    : Clock::time_point::max();
  for (auto& task : tasks_) {
    if (task->partitions.empty()) continue;
    for (;;) {
      const auto attempt_end = std::min(end, Clock::now() + options_.connect_timeout);
      const absl::Status s =
          is_chief ? InitializeTask(*task, params, attempt_end) : WaitReadyTask(*task, attempt_end);
      // Not there yet (unreachable, or not initialised by the chief): wait on, unless the
      // startup's own limit has passed.
      const bool not_yet = absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
      if (s.ok() || !not_yet) {
        RETURN_IF_ERROR(s);
        break;
      }
      if (Clock::now() >= end) {  // the last attempt's message, and the whole wait
        return absl::Status(
            s.code(),
            absl::StrCat(
                s.message(), "; gave up after ",
                std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start).count(),
                "s in all (--startup_timeout_s=", options_.startup_timeout.count() / 1000, ")"));
      }
      PSFLOW_LOG(WARNING) << s.message() << "; still waiting ("
                          << (options_.startup_timeout.count() > 0
                                  ? absl::StrCat("up to ", options_.startup_timeout.count() / 1000,
                                                 "s in all: --startup_timeout_s")
                                  : std::string("no limit: --startup_timeout_s=0"))
                          << ")";
    }
  }
  return absl::OkStatus();
}

absl::Status PsClient::InitializeTask(PsTask& task, const nn::ParameterSet& params,
                                      Clock::time_point deadline) {
  const auto waited = [start = Clock::now()] {
    return std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start).count();
  };
  Backoff backoff(std::chrono::milliseconds(100), std::chrono::seconds(2), deadline);
  auto call = [&](bool commit, proto::InitializeResponse* response) {
    task.init.set_commit(commit);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.rpc_timeout);
    return task.stub->Initialize(&ctx, task.init, response);
  };
  for (;;) {
    proto::InitializeResponse response;
    grpc::Status s = call(false, &response);
    if (s.ok()) RouteTask(task, response.bulk_port(), response.local_bulk());
    if (s.ok() && response.initialized_now()) {
      // Send the initial values as TK_ASSIGN chunks, then commit (at the last step seen: 0 at
      // the job's start, more when the task restarted without a checkpoint).
      task.init.set_start_step(task.last_seen_step);
      const absl::Status assigned = Assign(task, params);
      if (assigned.ok())
        s = call(true, &response);
      else
        s = grpc::Status(static_cast<grpc::StatusCode>(assigned.code()),
                         std::string(assigned.message()));
    }
    if (s.ok()) {
      if (response.initialized_now() && task.last_seen_step > 0) {
        PSFLOW_LOG(WARNING) << "ps task " << task.index << " at " << task.address
                            << " lost its training progress (restarted without a checkpoint): "
                               "re-created its variables from this worker's parameters at global "
                               "step "
                            << task.last_seen_step
                            << "; the updates this worker had not pulled and the optimizer's "
                               "slots are lost; the global step resumes at "
                            << response.global_step();
      } else {
        PSFLOW_LOG(INFO) << (response.initialized_now() ? "initialised " : "found existing ")
                         << task.partitions.size() << " partition(s) (" << task.bytes
                         << " bytes) on ps task " << task.index << " at " << task.address
                         << ", global step " << response.global_step();
      }
      task.last_seen_step = std::max(task.last_seen_step, response.global_step());
      return absl::OkStatus();
    }
    if (!Retryable(s) || Stopping() || !WaitPolling(backoff, *task.channel)) {
      return absl::Status(
          Retryable(s) ? absl::StatusCode::kUnavailable : PsCallStatus(s).code(),
          absl::StrCat("ps task ", task.index, " at ", task.address,
                       Retryable(s) ? absl::StrCat(" unreachable for ", waited(), "s")
                                    : " refused to initialise",
                       ": ", s.error_message(), TlsHint(options_.security, s)));
    }
  }
}

absl::Status PsClient::WaitReadyTask(PsTask& task, Clock::time_point deadline) {
  const Clock::time_point start = Clock::now();
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
      proto::OptimizerConfig held_optimizer;
      held_optimizer.set_name(response.optimizer());
      if (absl::Status same = options_.pushes ? CheckSameTraining(held_optimizer, response.sync(),
                                                                  options_.training.optimizer,
                                                                  options_.training.sync)
                                              : absl::OkStatus();
          !same.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("ps task ", task.index, " at ", task.address, ": ", same.message()));
      }
      if (response.global_step() < task.last_seen_step) {
        PSFLOW_LOG(WARNING) << "ps task " << task.index << " at " << task.address
                            << " came back at global step " << response.global_step()
                            << ", behind the step " << task.last_seen_step
                            << " this worker saw: the progress in between was lost";
      }
      task.last_seen_step = std::max(task.last_seen_step, response.global_step());
      task.pulled_step = task.next_min_step = 0;
      RouteTask(task, response.bulk_port(), response.local_bulk());
      return absl::OkStatus();
    }
    if (!Retryable(last)) {
      return absl::Status(PsCallStatus(last).code(),
                          absl::StrCat("ps task ", task.index, " at ", task.address,
                                       " refused WaitReady: ", last.error_message(), " (",
                                       absl::StatusCodeToString(PsCallStatus(last).code()), ")"));
    }
    if (Stopping() || !WaitPolling(backoff, *task.channel)) break;
  }
  const int64_t secs =
      std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start).count();
  if (!reached) {
    return absl::UnavailableError(
        absl::StrCat("ps task ", task.index, " at ", task.address, " unreachable for ", secs,
                     "s: ", last.error_message(), TlsHint(options_.security, last)));
  }
  return absl::DeadlineExceededError(absl::StrCat("variables not initialised on ps task ",
                                                  task.index, " at ", task.address, " after ", secs,
                                                  "s: is the chief running?"));
}

void PsClient::RouteTask(PsTask& task, int bulk_port, const proto::LocalBulkChannel& local) {
  const bool bulk = options_.transport == Transport::kBulk && bulk_port > 0;
  const std::string offer =
      local.socket().empty() ? "" : absl::StrCat(local.socket(), " ", local.token());
  const bool working =
      bulk && task.bulk_port == bulk_port && task.local_offer == offer && !task.links.empty() &&
      std::none_of(task.links.begin(), task.links.end(), [](const auto& l) { return l->broken(); });
  if (working) return;
  for (size_t k = 0; k < task.bulk.size(); ++k) window_->Route(task.first_connection + k, nullptr);
  task.links.clear();
  task.bulk_port = 0;
  task.local_offer.clear();
  if (!bulk) return;
  const auto route = [&] {
    for (size_t k = 0; k < task.links.size(); ++k) {
      window_->Route(task.first_connection + k, task.links[k].get());
    }
    task.bulk_port = bulk_port;
    task.local_offer = offer;
  };
  const auto link_deadline = [&] {
    return Clock::now() +
           std::min<std::chrono::milliseconds>(options_.connect_timeout, std::chrono::seconds(10));
  };
  // The task's gRPC host (a name, an IPv4 address or a bracketed IPv6 one) with the bulk port.
  std::string host = task.address.substr(0, task.address.rfind(':'));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  // Shared memory where the task offers it and its socket is on this host (a socket of another
  // host's task at that path refuses the token), else TCP, each with its own deadline.
  if (!local.socket().empty()) {
    const auto deadline = link_deadline();
    for (size_t k = 0; k < task.bulk.size(); ++k) {
      absl::StatusOr<std::unique_ptr<BulkLink>> link =
          BulkLink::ConnectLocal(local.socket(), local.token(), deadline);
      if (!link.ok()) {
        PSFLOW_LOG(INFO) << "ps task " << task.index << ": no shared-memory channel ("
                         << link.status().message() << "); using TCP";
        task.links.clear();
        break;
      }
      task.links.push_back(*std::move(link));
    }
    if (!task.links.empty()) {
      route();
      PSFLOW_LOG(INFO) << "ps task " << task.index
                       << ": tensor bytes on the bulk channel through shared memory, "
                       << task.links.size() << " connection(s) to " << local.socket();
      return;
    }
  }
  const auto deadline = link_deadline();
  for (size_t k = 0; k < task.bulk.size(); ++k) {
    absl::StatusOr<std::unique_ptr<BulkLink>> link =
        BulkLink::Connect(host, bulk_port, deadline, bulk_tls_);
    if (!link.ok()) {
      PSFLOW_LOG(WARNING) << "ps task " << task.index << " at " << task.address
                          << ": no bulk channel (" << link.status().message()
                          << "); its tensor bytes go over gRPC";
      task.links.clear();
      return;
    }
    task.links.push_back(*std::move(link));
  }
  route();
  PSFLOW_LOG(INFO) << "ps task " << task.index << ": tensor bytes on the bulk channel ("
                   << options_.security.Describe() << "), " << task.links.size()
                   << " connection(s) to " << host << ":" << bulk_port;
}

bool PsClient::Stopping() const { return options_.stop != nullptr && options_.stop->requested(); }

absl::Status PsClient::Recover(nn::ParameterSet& params) {
  if (Stopping()) {
    return absl::UnavailableError("lost a ps task while stopping: not waiting for it");
  }
  PSFLOW_LOG(WARNING) << "lost a ps task; waiting up to " << options_.connect_timeout.count() / 1000
                      << "s for every task to be ready again";
  for (auto& task : tasks_) {
    if (task->partitions.empty()) continue;
    // The chief re-creates a task that came back empty (no checkpoint) from its own latest
    // parameters; a task restored from its checkpoint is found ready and left as it is.
    const Clock::time_point deadline = Clock::now() + options_.connect_timeout;
    RETURN_IF_ERROR(is_chief_ ? InitializeTask(*task, params, deadline)
                              : WaitReadyTask(*task, deadline));
    task->pulled_step = task->next_min_step = 0;
  }
  need_recovery_ = false;
  PSFLOW_LOG(INFO) << "every ps task is ready again; continuing";
  // What a task that was gone missed (each sets need_recovery_ again if a task is gone again).
  if (const std::optional<float> rate = std::exchange(resend_learning_rate_, std::nullopt)) {
    RETURN_IF_ERROR(SetLearningRate(*rate));
  }
  if (std::exchange(leave_again_, false)) RETURN_IF_ERROR(Leave());
  return absl::OkStatus();
}

namespace {

// A failed call's status, naming the task.
absl::Status CallFailed(const absl::Status& s, const char* what, int task,
                        const std::string& address) {
  return absl::Status(s.code(), absl::StrCat(what, " to ps task ", task, " at ", address,
                                             " failed: ", s.message()));
}

}  // namespace

absl::Status PsClient::Assign(PsTask& task, const nn::ParameterSet& params) {
  // Only at start-up and recovery: planned here, not kept.
  std::vector<std::unique_ptr<ChunkCall>> calls;
  for (uint32_t c = 0; c < task.chunks.size(); ++c) {
    auto call = task.MakeChunkCall(proto::TK_ASSIGN, c, task.chunks[c]);
    call->call.varying.set_step(task.pulled_step);
    runs_.clear();
    for (const SegmentRange& r : call->segments) {
      const TaskPartition& ref = task.partitions[r.partition];
      runs_.push_back(params.value(ref.handle)
                          .subspan(static_cast<size_t>(ref.first_element + r.offset),
                                   static_cast<size_t>(r.count)));
    }
    call->call.SetRequest(runs_, WireType::kFloat32);
    calls.push_back(std::move(call));
  }
  window_->Reserve(calls.size());
  for (auto& call : calls) window_->Add(&call->call, Deadline(false));
  window_->Wait();
  for (auto& call : calls) {
    proto::TransferReply reply;
    if (absl::Status s = call->call.DecodeReply(&reply); !s.ok()) {
      return CallFailed(s, "initial values", task.index, task.address);
    }
  }
  return absl::OkStatus();
}

absl::Status PsClient::PullOnce(nn::ParameterSet& params, SyncResult* result) {
  const bool sync = options_.training.sync.sync_replicas();
  size_t calls = 0;
  for (auto& task : tasks_) {
    task->AimPull(params);
    calls += task->pulling.size();
  }
  window_->Reserve(calls);
  for (auto& task : tasks_) {
    for (ChunkCall* call : task->pulling) {
      call->call.varying.set_step(sync ? task->next_min_step : 0);
      call->call.SetRequest({}, options_.wire_type);
      window_->Add(&call->call, Deadline(sync));
    }
  }
  window_->Wait();  // every reply decoded into params as it arrived (ChunkCall::Completed)
  absl::Status status;
  for (auto& task : tasks_) {
    for (size_t c = 0; c < task->pulling.size(); ++c) {
      ChunkCall& call = *task->pulling[c];
      const proto::TransferReply& reply = call.reply;
      if (!call.decoded.ok()) {
        // Every reply is read (the others still update the steps) before the first failure.
        if (status.ok()) status = CallFailed(call.decoded, "pull", task->index, task->address);
        continue;
      }
      if (reply.timed_out()) {
        return absl::DeadlineExceededError(
            absl::StrCat("ps task ", task->index, " at ", task->address, " did not reach step ",
                         task->next_min_step, " within ", options_.rpc_timeout.count() / 1000,
                         "s (it is at ", reply.global_step(), "): are enough workers pushing?"));
      }
      if (c == 0) {
        task->pulled_step = reply.global_step();
        task->last_seen_step = std::max(task->last_seen_step, reply.global_step());
        if (task->index == 0) result->global_step = reply.global_step();
      }
      if (call.short_reply) {
        return absl::InternalError(
            absl::StrCat("short pull reply from ps task ", task->index, " at ", task->address));
      }
      result->bytes += call.dest_elements * static_cast<int64_t>(WireBytes(options_.wire_type));
    }
  }
  return status;
}

void PsClient::BeginPush(const nn::ParameterSet& params, int64_t examples) {
  push_open_ = true;
  push_examples_ = examples;
  push_bytes_ = 0;
  std::fill(ready_.begin(), ready_.end(), false);
  size_t calls = 0;
  for (auto& task : tasks_) {
    const uint32_t n = task->AimPush(params);
    calls += task->pull_calls.size() + n;
  }
  window_->Reserve(calls);
}

void PsClient::SendGradientChunk(PsTask& task, ChunkCall& call, const nn::ParameterSet& params) {
  proto::TransferHeader& v = call.call.varying;
  v.set_step(task.pulled_step);
  v.set_num_chunks(task.push_chunks);
  if (&call == task.push_calls[0].get()) v.set_examples(push_examples_);
  runs_.clear();
  for (const SegmentRange& r : call.segments) {
    const TaskPartition& ref = task.partitions[r.partition];
    runs_.push_back(params.grad(ref.handle)
                        .subspan(static_cast<size_t>(ref.first_element + r.offset),
                                 static_cast<size_t>(r.count)));
  }
  push_bytes_ += call.call.SetRequest(runs_, options_.wire_type);
  window_->Add(&call.call, Deadline(false));
  call.sent = true;
}

absl::Status PsClient::SendSparseRows(PsTask& task, const nn::ParameterSet& params) {
  // The calls were counted at BeginPush: rows that grew since might not fit them. Checked before
  // anything goes.
  for (size_t i = 0; i < task.sparse_partitions.size(); ++i) {
    const TaskPartition& ref = task.partitions[task.sparse_partitions[i]];
    const auto n = static_cast<int64_t>(
        RowsIn(params.touched_rows(ref.handle), ref.row_begin, ref.row_end).size());
    const int64_t calls = task.sparse_counts[i];
    if ((n + calls - 1) / calls * ref.row_elements * 4 > 2 * kChunkBytes) {
      return absl::FailedPreconditionError(
          absl::StrCat(params.descs()[static_cast<size_t>(ref.handle)].name,
                       ": touched rows changed after the step's first GradientsReady"));
    }
  }
  auto chunk = static_cast<uint32_t>(task.push_calls.size());
  for (size_t i = 0; i < task.sparse_partitions.size(); ++i) {
    const uint32_t p = task.sparse_partitions[i];
    const TaskPartition& ref = task.partitions[p];
    const auto rows = RowsIn(params.touched_rows(ref.handle), ref.row_begin, ref.row_end);
    const auto first = rows.begin();
    const auto n = static_cast<int64_t>(rows.size());
    const int64_t calls = task.sparse_counts[i];
    const float* base = params.grad(ref.handle).data() + ref.first_element;
    for (int64_t k = 0; k < calls; ++k, ++chunk) {
      // Rows spread evenly over the calls fixed at BeginPush.
      const auto begin = first + n * k / calls;
      const auto end = first + n * (k + 1) / calls;
      BulkCall& call = *task.sparse_calls[chunk - task.push_calls.size()];
      proto::TransferHeader& v = call.varying;
      v.clear_segments();
      v.set_step(task.pulled_step);
      v.set_chunk(chunk);
      v.set_num_chunks(task.push_chunks);
      v.set_examples(chunk == 0 ? push_examples_ : 0);
      proto::Segment* s = v.add_segments();
      s->set_partition(p);
      s->set_count((end - begin) * ref.row_elements);
      runs_.clear();
      for (auto r = begin; r < end; ++r) {
        s->add_rows(*r - ref.row_begin);
        runs_.emplace_back(base + (*r - ref.row_begin) * ref.row_elements,
                           static_cast<size_t>(ref.row_elements));
      }
      push_bytes_ += call.SetRequest(runs_, options_.wire_type);
      window_->Add(&call, Deadline(false));
    }
  }
  return absl::OkStatus();
}

absl::Status PsClient::FinishPush(SyncResult* result) {
  const bool sync = options_.training.sync.sync_replicas();
  absl::Status status;
  for (auto& task : tasks_) {
    for (size_t c = 0; c < task->push_chunks; ++c) {
      BulkCall& call = task->PushCall(c);
      proto::TransferReply reply;
      if (absl::Status s = call.DecodeReply(&reply); !s.ok()) {
        if (status.ok()) status = CallFailed(s, "push", task->index, task->address);
        continue;
      }
      if (reply.dropped()) result->dropped = true;
      task->last_seen_step = std::max(task->last_seen_step, reply.global_step());
      if (c == 0) {
        if (task->index == 0) result->global_step = reply.global_step();
        if (sync) task->next_min_step = task->pulled_step + 1;
      }
    }
  }
  result->bytes = push_bytes_;
  return status;
}

void PsClient::GradientsReady(const nn::ParameterSet& params, nn::ParameterSet::Handle first,
                              nn::ParameterSet::Handle last, int64_t examples) {
  if (!push_open_) BeginPush(params, examples);
  const int n = static_cast<int>(ready_.size());
  for (int h = std::max(first, 0); h < std::min(last, n); ++h) {
    if (ready_[static_cast<size_t>(h)]) continue;
    ready_[static_cast<size_t>(h)] = true;
    for (auto [task, index] : chunks_of_parameter_[static_cast<size_t>(h)]) {
      ChunkCall& call = *task->push_calls[index];
      if (--call.missing == 0 && !call.sent) SendGradientChunk(*task, call, params);
    }
  }
}

absl::StatusOr<SyncResult> PsClient::Pull(nn::ParameterSet& params) {
  Quiesce();
  const auto deadline = Clock::now() + options_.connect_timeout;
  for (;;) {
    if (need_recovery_) RETURN_IF_ERROR(Recover(params));
    SyncResult result;
    absl::Status s = PullOnce(params, &result);
    if (s.ok()) {
      params.ValuesChanged();
      return result;
    }
    if (!absl::IsUnavailable(s) || Clock::now() >= deadline) return s;
    need_recovery_ = true;
  }
}

absl::StatusOr<SyncResult> PsClient::Push(nn::ParameterSet& params, int64_t examples) {
  if (!push_open_) BeginPush(params, examples);
  for (auto& task : tasks_) {
    for (auto& call : task->push_calls) {
      if (!call->sent) SendGradientChunk(*task, *call, params);
    }
    if (absl::Status sparse = SendSparseRows(*task, params); !sparse.ok()) {
      Quiesce();
      return sparse;
    }
  }
  window_->Wait();
  SyncResult result;
  absl::Status s = FinishPush(&result);
  push_open_ = false;
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
    // What the chief re-creates a task with after it came back without a checkpoint.
    task->init.mutable_optimizer()->set_learning_rate(learning_rate);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.rpc_timeout);
    proto::SetLearningRateRequest request;
    request.set_learning_rate(learning_rate);
    proto::SetLearningRateResponse response;
    const grpc::Status s = task->stub->SetLearningRate(&ctx, request, &response);
    if (s.ok()) continue;
    const std::string what = absl::StrCat("set learning rate on ps task ", task->index, " at ",
                                          task->address, ": ", s.error_message());
    if (!Retryable(s)) return absl::Status(PsCallStatus(s).code(), what);
    // The task is gone (restarting): the next exchange waits for it (Recover), then sends the
    // rate again, which a task restored from an older checkpoint would not have.
    PSFLOW_LOG(WARNING) << what << "; sent again once the task is back";
    need_recovery_ = true;
    resend_learning_rate_ = learning_rate;
  }
  return absl::OkStatus();
}

grpc::Status PsClient::LeaveTask(PsTask& task, proto::LeaveResponse* response) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + options_.rpc_timeout);
  proto::LeaveRequest request;
  request.set_worker(options_.training.worker_index);
  return task.stub->Leave(&ctx, request, response);
}

absl::StatusOr<ParameterSync::Others> PsClient::OthersTraining() {
  Others most;
  for (auto& task : tasks_) {
    if (task->partitions.empty()) continue;
    proto::LeaveResponse response;
    const grpc::Status s = LeaveTask(*task, &response);
    if (!s.ok()) {
      // A task gone or restarting (not ready: NotInitialised answers UNAVAILABLE) is waited for
      // by the next Pull, as after a failed Leave; that Pull leaves again.
      if (Retryable(s)) {
        need_recovery_ = true;
        leave_again_ = true;
      }
      return absl::Status(PsCallStatus(s).code(),
                          absl::StrCat("asking ps task ", task->index, " at ", task->address,
                                       " which workers still train: ", s.error_message()));
    }
    most.training = std::max(most.training, response.workers());
    most.global_step = std::max(most.global_step, response.global_step());
  }
  return most;
}

absl::Status PsClient::Leave() {
  for (auto& task : tasks_) {
    if (task->partitions.empty()) continue;
    proto::LeaveResponse response;
    const grpc::Status s = LeaveTask(*task, &response);
    if (s.ok()) continue;
    const std::string what = absl::StrCat("leave on ps task ", task->index, " at ", task->address,
                                          ": ", s.error_message());
    if (!Retryable(s)) return absl::Status(PsCallStatus(s).code(), what);
    // As for the learning rate: the Pull that follows a Leave waits for the task and leaves
    // again (a task that missed it would count on this worker in sync mode). A stopping worker
    // makes no such Pull and does not wait: the task is most likely stopping with it.
    PSFLOW_LOG(WARNING) << what
                        << (Stopping() ? "; not left (stopping)"
                                       : "; left again once the task is back");
    need_recovery_ = true;
    leave_again_ = true;
  }
  return absl::OkStatus();
}

}  // namespace psflow
