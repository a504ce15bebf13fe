#include "core/frame.h"

#include "absl/strings/str_cat.h"

namespace psflow {

namespace {

void PutPrefix(uint32_t len, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((len >> (8 * i)) & 0xff);
}

}  // namespace

FrameHeaderBuffer::FrameHeaderBuffer(const google::protobuf::MessageLite& fixed) {
  const size_t n = fixed.ByteSizeLong();
  bytes_.resize(4 + n + 64);
  fixed.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(bytes_.data() + 4));
  fixed_end_ = 4 + n;
}

std::span<const std::byte> FrameHeaderBuffer::With(const google::protobuf::MessageLite& varying) {
  const size_t n = varying.ByteSizeLong();
  if (bytes_.size() < fixed_end_ + n) bytes_.resize(fixed_end_ + n);
  varying.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(bytes_.data() + fixed_end_));
  PutPrefix(static_cast<uint32_t>(fixed_end_ - 4 + n), reinterpret_cast<char*>(bytes_.data()));
  return {bytes_.data(), fixed_end_ + n};
}

std::string EncodeFrameHeader(const google::protobuf::MessageLite& header) {
  const size_t n = header.ByteSizeLong();
  std::string out(4 + n, '\0');
  PutPrefix(static_cast<uint32_t>(n), out.data());
  header.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out.data() + 4));
  return out;
}

absl::Status DecodeFrameHeader(ByteSource& source, google::protobuf::MessageLite* header) {
  unsigned char prefix[4];
  if (!source.Read(prefix, 4)) {
    return absl::InvalidArgumentError("frame shorter than its 4-byte length prefix");
  }
  const uint32_t len = prefix[0] | (uint32_t{prefix[1]} << 8) | (uint32_t{prefix[2]} << 16) |
                       (uint32_t{prefix[3]} << 24);
  if (len > kMaxFrameHeaderBytes || len > source.remaining()) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame header of ", len, " bytes; the frame has ", source.remaining(),
                     " after the prefix (limit ", kMaxFrameHeaderBytes, ")"));
  }
  std::string bytes(len, '\0');
  source.Read(bytes.data(), len);
  if (!header->ParseFromString(bytes)) {
    return absl::InvalidArgumentError("frame header does not parse");
  }
  return absl::OkStatus();
}

}  // namespace psflow
