#include "core/transfer.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/ps.pb.h"

namespace psflow {

int64_t NumElements(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<int64_t> CheckShape(std::span<const int64_t> shape, absl::string_view what) {
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": negative dimension in shape [", absl::StrJoin(shape, ","), "]"));
    }
    if (d != 0 && n > kMaxElements / d) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": shape [", absl::StrJoin(shape, ","),
                                                     "] has more than 2^40 elements"));
    }
    n *= d;
  }
  return n;
}

ByteSource::ByteSource(std::vector<std::span<const std::byte>> pieces)
    : pieces_(std::move(pieces)) {
  for (const auto& p : pieces_) remaining_ += p.size();
  // Skip leading empty pieces so pieces_[index_] always has bytes left while remaining_ > 0.
  while (index_ < pieces_.size() && pieces_[index_].empty()) ++index_;
}

void ByteSource::Advance(size_t n) {
  offset_ += n;
  remaining_ -= n;
  while (index_ < pieces_.size() && offset_ == pieces_[index_].size()) {
    ++index_;
    offset_ = 0;
  }
}

bool ByteSource::Read(void* out, size_t n) {
  auto* dst = static_cast<std::byte*>(out);
  return ForEachRun(n, [&dst](std::span<const std::byte> run) {
    std::memcpy(dst, run.data(), run.size());
    dst += run.size();
  });
}

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

absl::StatusOr<WireType> WireTypeOf(int proto_dtype) {
  switch (proto_dtype) {
    case proto::DT_FLOAT32:
      return WireType::kFloat32;
    case proto::DT_BFLOAT16:
      return WireType::kBfloat16;
    case proto::DT_FLOAT16:
      return WireType::kFloat16;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("wire dtype ", proto::DType_Name(static_cast<proto::DType>(proto_dtype)),
                       " (tensors travel as DT_FLOAT32, DT_BFLOAT16 or DT_FLOAT16)"));
  }
}

uint16_t ToBfloat16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

float FromBfloat16(uint16_t x) {
  const uint32_t u = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16 by bit manipulation (no _Float16: clang 14 lacks it on x86).
uint16_t ToFloat16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to infinity
  if (abs < 0x38800000u) {                        // below 2^-14: a subnormal
    float magnitude;
    std::memcpy(&magnitude, &abs, 4);
    // Exact scaling by a power of two, then round to nearest even.
    return sign | static_cast<uint16_t>(std::nearbyint(magnitude * 16777216.0f));
  }
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);  // nearest even at bit 13
  return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
}

float FromFloat16(uint16_t x) {
  const uint32_t sign = static_cast<uint32_t>(x & 0x8000u) << 16;
  const uint32_t exponent = (x >> 10) & 0x1fu;
  const uint32_t mantissa = x & 0x3ffu;
  uint32_t u;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) / 16777216.0f;  // mantissa * 2^-24
    std::memcpy(&u, &magnitude, 4);
    u |= sign;
  } else if (exponent == 31) {
    u = sign | 0x7f800000u | (mantissa << 13);
  } else {
    u = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void EncodeWire(std::span<const float> src, WireType type, std::byte* out) {
  if (type == WireType::kFloat32) {
    std::memcpy(out, src.data(), src.size_bytes());
    return;
  }
  for (size_t i = 0; i < src.size(); ++i) {
    const uint16_t v = type == WireType::kBfloat16 ? ToBfloat16(src[i]) : ToFloat16(src[i]);
    std::memcpy(out + 2 * i, &v, 2);
  }
}

bool ReadFloats(ByteSource& source, std::span<float> dst, WireType type) {
  if (type == WireType::kFloat32) return source.Read(dst.data(), dst.size_bytes());
  if (dst.size() * 2 > source.remaining()) return false;
  constexpr size_t kBlock = 2048;
  uint16_t halves[kBlock];
  for (size_t at = 0; at < dst.size(); at += kBlock) {
    const size_t n = std::min(kBlock, dst.size() - at);
    source.Read(halves, n * 2);
    for (size_t i = 0; i < n; ++i) {
      dst[at + i] = type == WireType::kBfloat16 ? FromBfloat16(halves[i]) : FromFloat16(halves[i]);
    }
  }
  return true;
}

std::vector<std::vector<SegmentRange>> PlanChunks(std::span<const int64_t> partition_elements,
                                                  int64_t chunk_bytes) {
  const int64_t per_chunk = std::max<int64_t>(1, chunk_bytes / 4);
  std::vector<std::vector<SegmentRange>> chunks;
  int64_t room = 0;
  for (size_t p = 0; p < partition_elements.size(); ++p) {
    int64_t offset = 0;
    const int64_t n = partition_elements[p];
    do {
      if (room == 0) {
        chunks.emplace_back();
        room = per_chunk;
      }
      const int64_t take = std::min(room, n - offset);
      chunks.back().push_back({static_cast<uint32_t>(p), offset, take});
      offset += take;
      room -= take;
    } while (offset < n);
  }
  return chunks;
}

}  // namespace psflow
