#include "ps/ps_service.h"

#include "core/log.h"

namespace psflow {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

int64_t TensorBytes(const google::protobuf::RepeatedPtrField<proto::NamedTensor>& tensors) {
  int64_t n = 0;
  for (const auto& t : tensors) n += static_cast<int64_t>(t.tensor().data().size());
  return n;
}

}  // namespace

PsService::PsService(PsMetrics* metrics)
    : metrics_(metrics), waiter_thread_([this] { WaiterLoop(); }) {}

PsService::~PsService() {
  Stop();
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  waiter_thread_.join();
}

void PsService::Stop() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  FinishWaiters(/*all=*/true);
  cv_.notify_all();
}

void PsService::FinishWaiters(bool all) {
  const auto now = std::chrono::steady_clock::now();
  const bool ready = store_.ready();
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (all || ready || it->deadline <= now) {
      it->response->set_ready(ready);
      it->response->set_global_step(store_.global_step());
      it->reactor->Finish(grpc::Status::OK);
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

void PsService::WaiterLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (waiters_.empty()) {
      cv_.wait(lock);
    } else {
      auto next = waiters_.front().deadline;
      for (const auto& w : waiters_) next = std::min(next, w.deadline);
      cv_.wait_until(lock, next);
    }
    FinishWaiters(/*all=*/false);
  }
}

grpc::ServerUnaryReactor* PsService::Initialize(grpc::CallbackServerContext* context,
                                                const proto::InitializeRequest* request,
                                                proto::InitializeResponse* response) {
  auto* reactor = context->DefaultReactor();
  auto created = store_.Initialize(*request);
  if (!created.ok()) {
    PSFLOW_LOG(WARNING) << "initialize refused: " << created.status().message();
    reactor->Finish(ToGrpc(created.status()));
    return reactor;
  }
  if (*created) {
    PSFLOW_LOG(INFO) << "initialised " << store_.num_variables() << " variables, " << store_.bytes()
                     << " bytes";
    if (metrics_ != nullptr) metrics_->variable_bytes.Set(static_cast<double>(store_.bytes()));
    std::lock_guard lock(mu_);
    FinishWaiters(/*all=*/false);
  }
  response->set_initialized_now(*created);
  response->set_global_step(store_.global_step());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* PsService::WaitReady(grpc::CallbackServerContext* context,
                                               const proto::WaitReadyRequest* request,
                                               proto::WaitReadyResponse* response) {
  auto* reactor = context->DefaultReactor();
  std::lock_guard lock(mu_);
  if (store_.ready() || stopping_ || request->timeout_ms() <= 0) {
    response->set_ready(store_.ready());
    response->set_global_step(store_.global_step());
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  waiters_.push_back(
      {reactor, response,
       std::chrono::steady_clock::now() +
           std::chrono::milliseconds(std::min<int64_t>(request->timeout_ms(), 60'000))});
  cv_.notify_all();
  return reactor;
}

grpc::ServerUnaryReactor* PsService::Pull(grpc::CallbackServerContext* context,
                                          const proto::PullRequest* request,
                                          proto::PullResponse* response) {
  auto* reactor = context->DefaultReactor();
  const absl::Status s = store_.Pull(*request, response);
  if (s.ok() && metrics_ != nullptr) {
    metrics_->pulls.Increment();
    metrics_->sent_bytes.Increment(static_cast<double>(TensorBytes(response->variables())));
  }
  reactor->Finish(ToGrpc(s));
  return reactor;
}

grpc::ServerUnaryReactor* PsService::Push(grpc::CallbackServerContext* context,
                                          const proto::PushRequest* request,
                                          proto::PushResponse* response) {
  auto* reactor = context->DefaultReactor();
  auto step = store_.Push(*request);
  if (!step.ok()) {
    reactor->Finish(ToGrpc(step.status()));
    return reactor;
  }
  response->set_global_step(*step);
  if (metrics_ != nullptr) {
    metrics_->updates.Increment();
    metrics_->examples.Increment(static_cast<double>(request->examples()));
    metrics_->received_bytes.Increment(static_cast<double>(TensorBytes(request->gradients())));
    metrics_->global_step.Set(static_cast<double>(store_.global_step()));
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace psflow
