// The bulk frames of Pull and Push (see proto/ps.proto), shared by the ps, the worker and the
// frame fuzzer:
//
//   [fixed32 little-endian n][n bytes: serialized TransferHeader or TransferReply][payload]
//
// The payload is raw little-endian elements. Nothing here copies a payload: a sender passes its
// own buffers to gRPC as slices, a receiver reads the payload straight out of the received
// slices through a ByteSource.
#ifndef PSFLOW_CORE_TRANSFER_H_
#define PSFLOW_CORE_TRANSFER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message_lite.h"

namespace psflow {

// Payload bytes per bulk call: every model is moved as chunks of at most this many bytes, each
// its own call, several in flight. One constant (not a flag) so every worker splits a push the
// same way.
inline constexpr int64_t kChunkBytes = 4 << 20;
// A frame's header is small; a bigger one is malformed.
inline constexpr uint32_t kMaxFrameHeaderBytes = 1 << 20;
// gRPC's receive limit for bulk calls: a chunk plus its header, with room to spare.
inline constexpr int kMaxBulkMessageBytes =
    2 * kChunkBytes + static_cast<int>(kMaxFrameHeaderBytes);

// Number of elements of a shape (1 for a scalar). The shape must be valid (see CheckShape).
int64_t NumElements(std::span<const int64_t> shape);

// INVALID_ARGUMENT (naming `what`) for a negative dimension or more than 2^40 elements (which
// would overflow byte counts); else the number of elements.
absl::StatusOr<int64_t> CheckShape(std::span<const int64_t> shape, absl::string_view what);

// A read cursor over a sequence of byte pieces (the slices of a received message).
class ByteSource {
 public:
  ByteSource() = default;
  explicit ByteSource(std::vector<std::span<const std::byte>> pieces);

  size_t remaining() const { return remaining_; }
  // Copies the next n bytes into out. False (and nothing consumed) when fewer remain.
  bool Read(void* out, size_t n);
  // Calls fn(span) on successive runs making up the next n bytes, without copying: runs end
  // where pieces end, so they have any length and alignment. False when fewer than n remain.
  template <class Fn>
  bool ForEachRun(size_t n, Fn fn) {
    if (n > remaining_) return false;
    while (n > 0) {
      const auto& piece = pieces_[index_];
      const size_t take = std::min(n, piece.size() - offset_);
      fn(piece.subspan(offset_, take));
      Advance(take);
      n -= take;
    }
    return true;
  }

 private:
  void Advance(size_t n);
  std::vector<std::span<const std::byte>> pieces_;
  size_t index_ = 0;   // current piece
  size_t offset_ = 0;  // into the current piece
  size_t remaining_ = 0;
};

// The frame prefix + serialized header, ready to go before the payload.
std::string EncodeFrameHeader(const google::protobuf::MessageLite& header);

// Reads the prefix and parses the header into `header`, leaving `source` at the payload.
// INVALID_ARGUMENT for a short frame, a length over kMaxFrameHeaderBytes or past the end, or
// bytes that do not parse.
absl::Status DecodeFrameHeader(ByteSource& source, google::protobuf::MessageLite* header);

// Elements on the wire: float32 (the default), or bfloat16 / float16 (--wire_dtype: half the
// bytes, rounded to nearest even). Values are float32 everywhere else.
enum class WireType { kFloat32, kBfloat16, kFloat16 };
// The wire type of a frame's dtype; INVALID_ARGUMENT for any other dtype.
absl::StatusOr<WireType> WireTypeOf(int proto_dtype);
inline size_t WireBytes(WireType t) { return t == WireType::kFloat32 ? 4 : 2; }

// float32 <-> 16-bit wire elements.
uint16_t ToBfloat16(float x);
float FromBfloat16(uint16_t x);
uint16_t ToFloat16(float x);
float FromFloat16(uint16_t x);

// Writes src as `type` elements to out (src.size() * WireBytes(type) bytes).
void EncodeWire(std::span<const float> src, WireType type, std::byte* out);

// Reads the next dst.size() elements of `type` out of `source` into dst (float32: a memcpy per
// run). False (and nothing consumed) when fewer remain.
bool ReadFloats(ByteSource& source, std::span<float> dst, WireType type = WireType::kFloat32);

// Calls fn(std::span<const float>) on successive blocks making up the next n elements of `type`
// in `source`, each at most 4096 elements, read through an aligned buffer on the stack (the runs
// of a received message need not be aligned or end on an element) and converted to float32.
// The buffer stays in L1; the elements are read once. False when fewer than n elements remain.
template <class Fn>
bool ForEachFloatBlock(ByteSource& source, int64_t n, Fn fn, WireType type = WireType::kFloat32) {
  constexpr int64_t kBlock = 4096;
  alignas(64) float block[kBlock];
  if (static_cast<uint64_t>(n) * WireBytes(type) > source.remaining()) return false;
  while (n > 0) {
    const int64_t take = std::min(n, kBlock);
    ReadFloats(source, std::span<float>(block, static_cast<size_t>(take)), type);
    fn(std::span<const float>(block, static_cast<size_t>(take)));
    n -= take;
  }
  return true;
}

// A run of one partition's elements inside a chunk.
struct SegmentRange {
  uint32_t partition = 0;
  int64_t offset = 0;
  int64_t count = 0;
  bool operator==(const SegmentRange&) const = default;
};

// Splits a task's partitions (given by element counts, in task order) into chunks of at most
// chunk_bytes / 4 elements: partitions packed in order, a partition larger than the room left
// split across chunks. Deterministic: every worker and the ps compute the same chunks.
std::vector<std::vector<SegmentRange>> PlanChunks(std::span<const int64_t> partition_elements,
                                                  int64_t chunk_bytes = kChunkBytes);

}  // namespace psflow

#endif  // PSFLOW_CORE_TRANSFER_H_
