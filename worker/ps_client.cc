#include "worker/ps_client.h"

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <mutex>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/backoff.h"
#include "core/log.h"
#include "core/placement.h"
#include "core/status_macros.h"
#include "core/wire.h"

namespace psflow {
namespace {

// Backoff and timeouts use the steady clock; gRPC deadlines take the system clock.
using Clock = std::chrono::steady_clock;

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

bool Retryable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

struct PsClient::Task {
  int index = 0;
  std::string address;
  std::unique_ptr<proto::ParameterServer::Stub> stub;
  std::vector<nn::ParameterSet::Handle> handles;  // the variables this task holds
  int64_t bytes = 0;
  // Reused across steps: names are filled once; tensor buffers keep their capacity.
  proto::PullRequest pull_request;
  proto::PullResponse pull_response;
  proto::PushRequest push_request;
  proto::PushResponse push_response;
  std::optional<grpc::ClientContext> context;
  grpc::Status status;
};

PsClient::PsClient(Options options) : options_(std::move(options)) {}
PsClient::~PsClient() = default;

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(Options options,
                                                           const nn::ParameterSet& params) {
  if (options.ps_addresses.empty()) return absl::InvalidArgumentError("no ps task to talk to");
  std::vector<VariableInfo> infos;
  for (const auto& d : params.descs()) {
    infos.push_back({d.name, d.size * static_cast<int64_t>(sizeof(float))});
  }
  const int num_tasks = static_cast<int>(options.ps_addresses.size());
  ASSIGN_OR_RETURN(Placement placement, PlaceVariables(infos, num_tasks));

  std::unique_ptr<PsClient> c(new PsClient(std::move(options)));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  for (int t = 0; t < num_tasks; ++t) {
    auto task = std::make_unique<Task>();
    task->index = t;
    task->address = c->options_.ps_addresses[static_cast<size_t>(t)];
    task->stub = proto::ParameterServer::NewStub(
        grpc::CreateCustomChannel(task->address, grpc::InsecureChannelCredentials(), args));
    task->bytes = placement.bytes_per_task[static_cast<size_t>(t)];
    c->tasks_.push_back(std::move(task));
  }
  for (size_t i = 0; i < params.descs().size(); ++i) {
    const auto& d = params.descs()[i];
    Task& task = *c->tasks_[static_cast<size_t>(placement.task_of[i])];
    task.handles.push_back(static_cast<nn::ParameterSet::Handle>(i));
    task.pull_request.add_names(d.name);
    auto* g = task.push_request.add_gradients();
    g->set_name(d.name);
  }
  return c;
}

std::vector<int64_t> PsClient::bytes_per_task() const {
  std::vector<int64_t> out;
  for (const auto& t : tasks_) out.push_back(t->bytes);
  return out;
}

absl::Status PsClient::Prepare(const nn::ParameterSet& params, bool is_chief, float learning_rate) {
  for (auto& task : tasks_) {
    if (task->handles.empty()) continue;
    RETURN_IF_ERROR(is_chief ? InitializeTask(*task, params, learning_rate) : WaitReadyTask(*task));
  }
  return absl::OkStatus();
}

absl::Status PsClient::InitializeTask(Task& task, const nn::ParameterSet& params,
                                      float learning_rate) {
  proto::InitializeRequest request;
  request.mutable_optimizer()->set_name("sgd");
  request.mutable_optimizer()->set_learning_rate(learning_rate);
  for (auto h : task.handles) {
    const auto& d = params.descs()[static_cast<size_t>(h)];
    auto* v = request.add_variables();
    v->set_name(d.name);
    EncodeFloat32(params.value(h), d.shape, v->mutable_tensor());
  }
  Backoff backoff(std::chrono::milliseconds(100), std::chrono::seconds(2),
                  Clock::now() + options_.connect_timeout);
  for (;;) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.rpc_timeout);
    proto::InitializeResponse response;
    const grpc::Status s = task.stub->Initialize(&ctx, request, &response);
    if (s.ok()) {
      PSFLOW_LOG(INFO) << (response.initialized_now() ? "initialised " : "found existing ")
                       << task.handles.size() << " variables (" << task.bytes
                       << " bytes) on ps task " << task.index << " at " << task.address;
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
      if (response.ready()) return absl::OkStatus();
      continue;  // the ps held the call for timeout_ms: ask again, no backoff needed
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

template <class Start>
absl::Status PsClient::OnAllTasks(const char* what, Start start) {
  std::mutex mu;
  std::condition_variable cv;
  size_t pending = 0;
  for (auto& task : tasks_) {
    if (task->handles.empty()) continue;
    ++pending;
    task->context.emplace();
    task->context->set_deadline(std::chrono::system_clock::now() + options_.rpc_timeout);
    start(*task, [&, t = task.get()](grpc::Status s) {
      t->status = std::move(s);
      std::lock_guard lock(mu);
      if (--pending == 0) cv.notify_one();
    });
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return pending == 0; });
  for (auto& task : tasks_) {
    if (task->handles.empty() || task->status.ok()) continue;
    return absl::Status(FromGrpc(task->status).code(),
                        absl::StrCat(what, " to ps task ", task->index, " at ", task->address,
                                     " failed: ", task->status.error_message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<SyncResult> PsClient::Pull(nn::ParameterSet& params) {
  RETURN_IF_ERROR(OnAllTasks("pull", [](Task& t, auto done) {
    t.stub->async()->Pull(&*t.context, &t.pull_request, &t.pull_response, std::move(done));
  }));
  SyncResult result;
  for (auto& task : tasks_) {
    if (task->handles.empty()) continue;
    const auto& vars = task->pull_response.variables();
    if (static_cast<size_t>(vars.size()) != task->handles.size()) {
      return absl::InternalError(absl::StrCat("ps task ", task->index, " returned ", vars.size(),
                                              " variables, asked for ", task->handles.size()));
    }
    for (size_t i = 0; i < task->handles.size(); ++i) {
      const auto h = task->handles[i];
      const auto& d = params.descs()[static_cast<size_t>(h)];
      if (vars[static_cast<int>(i)].name() != d.name) {
        return absl::InternalError(absl::StrCat("ps task ", task->index, " returned \"",
                                                vars[static_cast<int>(i)].name(),
                                                "\" in place of \"", d.name, "\""));
      }
      RETURN_IF_ERROR(
          DecodeFloat32(vars[static_cast<int>(i)].tensor(), d.shape, params.value(h), d.name));
      result.bytes += d.size * static_cast<int64_t>(sizeof(float));
    }
    result.global_step = std::max(result.global_step, task->pull_response.global_step());
  }
  return result;
}

absl::StatusOr<SyncResult> PsClient::Push(nn::ParameterSet& params, int64_t step,
                                          int64_t examples) {
  SyncResult result;
  for (auto& task : tasks_) {
    task->push_request.set_step(step);
    task->push_request.set_examples(examples);
    for (size_t i = 0; i < task->handles.size(); ++i) {
      const auto h = task->handles[i];
      const auto g = params.grad(h);
      EncodeFloat32(g, params.descs()[static_cast<size_t>(h)].shape,
                    task->push_request.mutable_gradients(static_cast<int>(i))->mutable_tensor());
      result.bytes += static_cast<int64_t>(g.size_bytes());
    }
  }
  RETURN_IF_ERROR(OnAllTasks("push", [](Task& t, auto done) {
    t.stub->async()->Push(&*t.context, &t.push_request, &t.push_response, std::move(done));
  }));
  for (auto& task : tasks_) {
    if (!task->handles.empty()) {
      result.global_step = std::max(result.global_step, task->push_response.global_step());
    }
  }
  return result;
}

}  // namespace psflow
