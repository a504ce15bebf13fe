#include "core/bulk_wire.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/frame.h"

namespace psflow {
namespace {

void Put(uint64_t v, int bytes, std::byte* out) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}

uint64_t Get(const std::byte* in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(in[i]) << (8 * i);
  return v;
}

}  // namespace

std::array<std::byte, kBulkPrefixBytes> EncodeBulkPrefix(const BulkPrefix& prefix) {
  std::array<std::byte, kBulkPrefixBytes> out{};
  Put(static_cast<uint32_t>(prefix.kind), 4, out.data());
  Put(prefix.call_id, 4, out.data() + 4);
  Put(prefix.length, 8, out.data() + 8);
  return out;
}

absl::StatusOr<BulkPrefix> DecodeBulkPrefix(std::span<const std::byte, kBulkPrefixBytes> bytes,
                                            BulkReader reader, uint64_t max_body) {
  BulkPrefix p;
  const auto kind = static_cast<uint32_t>(Get(bytes.data(), 4));
  p.call_id = static_cast<uint32_t>(Get(bytes.data() + 4, 4));
  p.length = Get(bytes.data() + 8, 8);
  const bool request = kind == static_cast<uint32_t>(BulkKind::kPush) ||
                       kind == static_cast<uint32_t>(BulkKind::kPull);
  const bool reply = kind == static_cast<uint32_t>(BulkKind::kReply) ||
                     kind == static_cast<uint32_t>(BulkKind::kError);
  if (reader == BulkReader::kPs ? !request : !reply) {
    return absl::InvalidArgumentError(absl::StrCat("bulk message of kind ", kind, " where a ",
                                                   reader == BulkReader::kPs ? "request" : "reply",
                                                   " was expected"));
  }
  p.kind = static_cast<BulkKind>(kind);
  if (p.kind == BulkKind::kError) {
    if (p.length < 4 || p.length > 4 + kMaxBulkErrorBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bulk error reply of ", p.length, " bytes (4 to ", 4 + kMaxBulkErrorBytes, " expected)"));
    }
  } else if (p.length > max_body) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bulk message of ", p.length, " bytes, more than the ", max_body, " a frame may have"));
  }
  return p;
}

absl::StatusOr<uint32_t> FrameHeaderBytes(std::span<const std::byte, 4> first, uint64_t length) {
  const auto n = static_cast<uint32_t>(Get(first.data(), 4));
  if (length < 4 || n > kMaxFrameHeaderBytes || n > length - 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("a frame header of ", n, " bytes in a message of ", length));
  }
  return n;
}

std::string EncodeBulkError(const absl::Status& s) {
  const absl::string_view message = s.message().substr(0, kMaxBulkErrorBytes);
  std::string out(4 + message.size(), '\0');
  Put(static_cast<uint32_t>(s.ok() ? absl::StatusCode::kUnknown : s.code()), 4,
      reinterpret_cast<std::byte*>(out.data()));
  std::memcpy(out.data() + 4, message.data(), message.size());
  return out;
}

absl::Status DecodeBulkError(std::span<const std::byte> body) {
  if (body.size() < 4) return absl::InvalidArgumentError("bulk error reply shorter than its code");
  const auto code = static_cast<uint32_t>(Get(body.data(), 4));
  const std::string message(reinterpret_cast<const char*>(body.data() + 4), body.size() - 4);
  if (code == 0 || code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bulk error reply with code ", code, ": ", message));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

}  // namespace psflow
