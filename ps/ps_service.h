// The gRPC ParameterServer service of one ps task (callback API), over a VariableStore.
//
// WaitReady calls are parked, not answered by polling: they finish when Initialize succeeds, when
// their timeout passes, or when the service shuts down. Thread-safe.
#ifndef PSFLOW_PS_PS_SERVICE_H_
#define PSFLOW_PS_PS_SERVICE_H_

#include <chrono>
#include <condition_variable>
#include <list>
#include <mutex>
#include <thread>

#include "proto/ps.grpc.pb.h"
#include "ps/ps_metrics.h"
#include "ps/variable_store.h"

namespace psflow {

class PsService final : public proto::ParameterServer::CallbackService {
 public:
  // metrics may be null.
  explicit PsService(PsMetrics* metrics);
  ~PsService() override;

  // Answers every parked WaitReady (ready = false) and stops parking new ones. Call before
  // grpc::Server::Shutdown so shutdown does not wait out their timeouts.
  void Stop();

  const VariableStore& store() const { return store_; }

  grpc::ServerUnaryReactor* Initialize(grpc::CallbackServerContext* context,
                                       const proto::InitializeRequest* request,
                                       proto::InitializeResponse* response) override;
  grpc::ServerUnaryReactor* WaitReady(grpc::CallbackServerContext* context,
                                      const proto::WaitReadyRequest* request,
                                      proto::WaitReadyResponse* response) override;
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* context,
                                 const proto::PullRequest* request,
                                 proto::PullResponse* response) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context,
                                 const proto::PushRequest* request,
                                 proto::PushResponse* response) override;

 private:
  struct Waiter {
    grpc::ServerUnaryReactor* reactor;
    proto::WaitReadyResponse* response;
    std::chrono::steady_clock::time_point deadline;
  };
  void WaiterLoop();
  // Finishes waiters that are due (all of them when `all`); caller holds mu_.
  void FinishWaiters(bool all);

  VariableStore store_;
  PsMetrics* metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::list<Waiter> waiters_;  // guarded by mu_
  bool stopping_ = false;      // guarded by mu_
  std::thread waiter_thread_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_PS_SERVICE_H_
