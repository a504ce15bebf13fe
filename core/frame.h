// The bulk frames of Pull and Push (see proto/ps.proto), shared by the ps, the worker and the
// frame fuzzer:
//
//   [fixed32 little-endian n][n bytes: serialized TransferHeader or TransferReply][payload]
//
// The payload is raw little-endian elements. Nothing here copies a payload: a sender passes its
// own buffers to gRPC as slices, a receiver reads the payload straight out of the received
// slices through a ByteSource.
#ifndef PSFLOW_CORE_FRAME_H_
#define PSFLOW_CORE_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/byte_source.h"
#include "google/protobuf/message_lite.h"

namespace psflow {

// A frame's header is small; a bigger one is malformed.
inline constexpr uint32_t kMaxFrameHeaderBytes = 1 << 20;
// The frame prefix + serialized header, ready to go before the payload.
std::string EncodeFrameHeader(const google::protobuf::MessageLite& header);

// A frame header planned once and sent many times (a bulk call reused every step): the fields
// that never change are serialized at construction; each send appends a small message of the
// same type holding the ones that do (protobuf parses concatenated messages as one message:
// later scalar fields win, repeated fields are appended), and patches the prefix.
class FrameHeaderBuffer {
 public:
  FrameHeaderBuffer() = default;
  explicit FrameHeaderBuffer(const google::protobuf::MessageLite& fixed);
  // The prefix + the fixed fields + varying's fields, valid until the next call. Allocates only
  // when varying serializes larger than ever before.
  std::span<const std::byte> With(const google::protobuf::MessageLite& varying);

 private:
  std::vector<std::byte> bytes_;  // prefix, fixed fields, then room for the varying ones
  size_t fixed_end_ = 4;
};

// Reads the prefix and parses the header into `header`, leaving `source` at the payload.
// INVALID_ARGUMENT for a short frame, a length over kMaxFrameHeaderBytes or past the end, or
// bytes that do not parse.
absl::Status DecodeFrameHeader(ByteSource& source, google::protobuf::MessageLite* header);

}  // namespace psflow

#endif  // PSFLOW_CORE_FRAME_H_
