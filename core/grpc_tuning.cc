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
