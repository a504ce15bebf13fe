#include "core/frame.h"

#include "absl/strings/str_cat.h"

namespace psflow {

std::string EncodeFrameHeader(const google::protobuf::MessageLite& header) {
  const size_t n = header.ByteSizeLong();
  std::string out(4 + n, '\0');
  const uint32_t len = static_cast<uint32_t>(n);
  for (int i = 0; i < 4; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((len >> (8 * i)) & 0xff);
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
