// The bulk channel's wire format: how tensor frames (core/frame.h) travel on a plain TCP
// connection between a worker and a ps task, beside gRPC (which keeps the control calls).
//
// A connection starts with the client writing kBulkHello and the server answering it. Then the
// client sends requests and the server sends replies, each a message:
//
//   [BulkPrefix: 16 bytes, little-endian: u32 kind, u32 call id, u64 body length][body]
//
// A request's body (kind kPush or kPull) is a frame exactly as the gRPC Push/Pull methods carry
// it. A reply carries the request's call id; its body is the reply frame (kReply) or an error
// (kError: u32 absl status code, then the message). Replies may come in any order (a sync pull
// is answered when its step is reached), so the id says which request each answers.
#ifndef PSFLOW_CORE_BULK_WIRE_H_
#define PSFLOW_CORE_BULK_WIRE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace psflow {

inline constexpr std::array<char, 8> kBulkHello = {'P', 'S', 'F', 'B', 'U', 'L', 'K', '1'};
inline constexpr size_t kBulkPrefixBytes = 16;
// The longest error message a reply carries (longer ones are cut).
inline constexpr size_t kMaxBulkErrorBytes = 4096;

enum class BulkKind : uint32_t { kPush = 1, kPull = 2, kReply = 3, kError = 4 };

struct BulkPrefix {
  BulkKind kind = BulkKind::kReply;
  uint32_t call_id = 0;
  uint64_t length = 0;
  bool operator==(const BulkPrefix&) const = default;
};

std::array<std::byte, kBulkPrefixBytes> EncodeBulkPrefix(const BulkPrefix& prefix);

// Which side reads: a ps reads requests, a worker replies.
enum class BulkReader { kPs, kWorker };

// Parses a prefix read from the peer. INVALID_ARGUMENT naming what is wrong: a kind the reader
// does not expect, a body longer than max_body (a frame: kMaxBulkMessageBytes), an error body
// outside [4, 4 + kMaxBulkErrorBytes].
absl::StatusOr<BulkPrefix> DecodeBulkPrefix(std::span<const std::byte, kBulkPrefixBytes> bytes,
                                            BulkReader reader, uint64_t max_body);

// A frame body (a push request's or a reply's) starts with its header's length (core/frame.h);
// read from the body's first 4 bytes, checked against kMaxFrameHeaderBytes and the body's
// `length`. The payload is then length - 4 - that. INVALID_ARGUMENT for a length that does not
// fit. A reader takes it first to place the payload (the worker: in the parameters; the ps:
// aligned, for its update to read in place).
absl::StatusOr<uint32_t> FrameHeaderBytes(std::span<const std::byte, 4> first, uint64_t length);

// An error reply's body (s is not OK; the message cut at kMaxBulkErrorBytes), and back. Decoding
// a body that is not an error's (or with code 0 or unknown) gives INVALID_ARGUMENT: never OK.
std::string EncodeBulkError(const absl::Status& s);
absl::Status DecodeBulkError(std::span<const std::byte> body);

}  // namespace psflow

#endif  // PSFLOW_CORE_BULK_WIRE_H_
