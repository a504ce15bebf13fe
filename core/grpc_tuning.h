// gRPC settings for the bulk Pull/Push calls, applied alike by ps servers and worker channels
// (one way, so the two ends agree): message limits that admit one chunk (kMaxBulkMessageBytes),
// HTTP/2 frames as large as the protocol allows (16 MiB - 1 rather than 16 KiB: a 4 MiB chunk in
// one frame instead of 256), large stream windows so a chunk never waits for a window update, and
// keepalive pings that find a connection to a vanished peer within 20 s.
#ifndef PSFLOW_CORE_GRPC_TUNING_H_
#define PSFLOW_CORE_GRPC_TUNING_H_

#include <grpcpp/grpcpp.h>

namespace psflow {

void ApplyBulkTuning(grpc::ChannelArguments& args);
// The server's, after its services are built and before BuildAndStart (it also adds
// AddTsanHandOff, core/tsan_grpc.h).
void ApplyBulkTuning(grpc::ServerBuilder& builder);

}  // namespace psflow

#endif  // PSFLOW_CORE_GRPC_TUNING_H_
