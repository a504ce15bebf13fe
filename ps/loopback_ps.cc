#include "ps/loopback_ps.h"

#include "absl/strings/str_cat.h"
#include "core/grpc_tuning.h"

namespace psflow {

LoopbackPs::LoopbackPs(const TransportSecurity& security, int port)
    : state_({}, nullptr), service_(state_, nullptr) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), security.ServerCredentials(), &port_);
  ApplyBulkTuning(builder);
  builder.RegisterService(&service_);
  server_ = builder.BuildAndStart();
}

LoopbackPs::~LoopbackPs() {
  service_.Stop();
  if (server_ != nullptr) server_->Shutdown();
}

std::string LoopbackPs::address() const { return absl::StrCat("127.0.0.1:", port_); }

}  // namespace psflow
