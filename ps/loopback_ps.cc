#include "ps/loopback_ps.h"

#include "absl/strings/str_cat.h"
#include "core/bulk_stream.h"
#include "core/grpc_tuning.h"

namespace psflow {

LoopbackPs::LoopbackPs(const TransportSecurity& security, int port, bool bulk,
                       const std::string& local_socket)
    : state_({}, nullptr), service_(state_, nullptr) {
  if (bulk) {
    BulkServer::Options options;
    options.bind_address = "127.0.0.1";
    options.local_socket = local_socket;
    if (security.tls()) {
      options.tls = BulkTlsContext::Make(security, BulkTlsContext::Role::kServer).value_or(nullptr);
    }
    if (!security.tls() || options.tls != nullptr) {
      if (auto server = BulkServer::Start(state_, nullptr, options); server.ok()) {
        bulk_ = *std::move(server);
        service_.AdvertiseBulkChannel(*bulk_);
      }
    }
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), security.ServerCredentials(), &port_);
  ApplyBulkTuning(builder);
  builder.RegisterService(&service_);
  server_ = builder.BuildAndStart();
}

LoopbackPs::~LoopbackPs() {
  service_.Stop();
  if (bulk_ != nullptr) bulk_->Stop();
  if (server_ != nullptr) {
    server_->Shutdown();
    server_->Wait();  // every call has ended before the service and state go
  }
}

std::string LoopbackPs::address() const { return absl::StrCat("127.0.0.1:", port_); }

}  // namespace psflow
