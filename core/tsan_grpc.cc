#include "core/tsan_grpc.h"

#if defined(__SANITIZE_THREAD__)
#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <utility>
#include <vector>

#include "core/tsan_annotations.h"
#endif

namespace psflow {

#if defined(__SANITIZE_THREAD__)
namespace {

// The sync point every server set-up releases and every arriving call acquires.
const char kServerSetUp = 0;

class AcquireSetUp final : public grpc::experimental::Interceptor {
 public:
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      TsanAcquire(&kServerSetUp);
    }
    methods->Proceed();
  }
};

class AcquireSetUpFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* /*info*/) override {
    // gRPC makes a call's interceptors as the call arrives, before it deserializes the request
    // with the service's handler (a callback unary call runs no interception hook before that).
    TsanAcquire(&kServerSetUp);
    return new AcquireSetUp();  // gRPC owns and deletes it
  }
};

}  // namespace

void AddTsanHandOff(grpc::ServerBuilder& builder) {
  TsanRelease(&kServerSetUp);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<AcquireSetUpFactory>());
  builder.experimental().SetInterceptorCreators(std::move(creators));
}
#else
void AddTsanHandOff(grpc::ServerBuilder& /*builder*/) {}
#endif

}  // namespace psflow
