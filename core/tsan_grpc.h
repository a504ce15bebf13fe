// ThreadSanitizer builds only: makes "the server was set up before it handles a call" visible.
//
// A ps's service object and its state are built on the main thread, then read by gRPC's callback
// threads, which gRPC may have started long before (they are shared by every server and channel
// of the process). libgrpc orders the two (the service is registered before the server starts
// taking calls) with locks TSan cannot see, Debian's gRPC being built without it. In a TSan build
// AddTsanHandOff releases a sync point when the server is set up and installs an interceptor
// factory that acquires it when each call arrives (as gRPC makes the call's interceptors, before
// the request is deserialized and the handler runs). Elsewhere it does nothing.
#ifndef PSFLOW_CORE_TSAN_GRPC_H_
#define PSFLOW_CORE_TSAN_GRPC_H_

#include <grpcpp/grpcpp.h>

namespace psflow {

// Call after the services are built and before BuildAndStart.
void AddTsanHandOff(grpc::ServerBuilder& builder);

}  // namespace psflow

#endif  // PSFLOW_CORE_TSAN_GRPC_H_
