#include "core/wire_type.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "proto/ps.pb.h"

namespace psflow {

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

}  // namespace psflow
