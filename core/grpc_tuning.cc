#include "core/grpc_tuning.h"

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "core/chunk_plan.h"
#include "core/tsan_grpc.h"

namespace psflow {
namespace {

std::vector<std::pair<std::string, int>> BulkArgs() {
  std::vector<std::pair<std::string, int>> args = {
      {GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, kMaxBulkMessageBytes},
      {GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, kMaxBulkMessageBytes},
      {GRPC_ARG_HTTP2_MAX_FRAME_SIZE, (1 << 24) - 1},
      {GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 4 * static_cast<int>(kChunkBytes)},
      // Keepalive: each end pings the other every 10 s and drops the connection when no answer
      // comes within 10 s. A peer that vanished without closing it (its node lost, a partition)
      // is then found within 20 s and the worker connects again (1 s reconnect backoff), where
      // TCP alone would retransmit into the dead connection for up to ~15 minutes, every call on
      // it timing out. Pings that often are accepted with or without calls in flight.
      {GRPC_ARG_KEEPALIVE_TIME_MS, 10'000},
      {GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000},
      {GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1},
      {GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0},
      {GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5'000},
  };
  return args;
}

}  // namespace

void ApplyBulkTuning(grpc::ChannelArguments& args) {
  for (const auto& [key, value] : BulkArgs()) args.SetInt(key, value);
}

void ApplyBulkTuning(grpc::ServerBuilder& builder) {
  for (const auto& [key, value] : BulkArgs()) builder.AddChannelArgument(key, value);
  AddTsanHandOff(builder);
}

}  // namespace psflow
