// The gRPC ParameterServer service of one ps task (callback API) over a PsState.
//
// Pull and Push are raw methods: the request and reply are frames (core/frame.h) handled as
// grpc::ByteBuffer. A push is applied straight from the received slices. A float32 pull's reply
// sends the partitions' own memory, not a copy: its slices pin the blocks' current versions,
// under each partition's lock, and gRPC unpins them once written (an update meanwhile writes a
// fresh version: ps/versioned_values.h). A 16-bit pull's elements are converted once, under each
// partition's lock, into a pooled buffer that gRPC sends as a slice and hands back to the pool
// when it is done with it.
//
// WaitReady and sync-mode pulls are parked on the StepCoordinator, not answered by polling.
// Thread-safe.
#ifndef PSFLOW_PS_PS_SERVICE_H_
#define PSFLOW_PS_PS_SERVICE_H_

#include <memory>

#include "proto/ps.grpc.pb.h"
#include "ps/bulk_server.h"
#include "ps/ps_metrics.h"
#include "ps/ps_state.h"

namespace psflow {

using PsServiceBase = proto::ParameterServer::WithRawCallbackMethod_Pull<
    proto::ParameterServer::WithRawCallbackMethod_Push<proto::ParameterServer::CallbackService>>;

class PsService final : public PsServiceBase {
 public:
  // state and metrics (may be null) outlive the service.
  PsService(PsState& state, PsMetrics* metrics);
  ~PsService() override;

  // Initialize and WaitReady answers advertise `bulk`'s channel: its port, and its shared-memory
  // socket and token when it has one. Call before serving.
  void AdvertiseBulkChannel(const BulkServer& bulk) {
    bulk_port_ = bulk.port();
    local_bulk_.set_socket(bulk.local_socket());
    local_bulk_.set_token(bulk.local_token());
  }

  // Answers every parked call (WaitReady: ready = false; pulls: timed out) and every later one at
  // once. Call before grpc::Server::Shutdown so shutdown does not wait out their timeouts.
  void Stop();

  using PsServiceBase::Pull;
  using PsServiceBase::Push;

  grpc::ServerUnaryReactor* Initialize(grpc::CallbackServerContext* context,
                                       const proto::InitializeRequest* request,
                                       proto::InitializeResponse* response) override;
  grpc::ServerUnaryReactor* WaitReady(grpc::CallbackServerContext* context,
                                      const proto::WaitReadyRequest* request,
                                      proto::WaitReadyResponse* response) override;
  grpc::ServerUnaryReactor* SetLearningRate(grpc::CallbackServerContext* context,
                                            const proto::SetLearningRateRequest* request,
                                            proto::SetLearningRateResponse* response) override;
  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext* context,
                                  const proto::LeaveRequest* request,
                                  proto::LeaveResponse* response) override;
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;

 private:
  class BufferPool;
  // A parked pull's reply, once its partitions reached its step: the frame header, then the
  // payload (payload bytes).
  grpc::ByteBuffer PullReply(const proto::TransferHeader& header, int64_t payload);
  PsState& state_;
  PsMetrics* metrics_;
  std::shared_ptr<BufferPool> pool_;
  int bulk_port_ = 0;
  proto::LocalBulkChannel local_bulk_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_PS_SERVICE_H_
