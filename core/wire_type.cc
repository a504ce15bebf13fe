#include "core/wire_type.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/vector_clones.h"
#include "proto/ps.pb.h"

namespace psflow {

int ProtoDtypeOf(WireType type) {
  switch (type) {
    case WireType::kFloat32:
      return proto::DT_FLOAT32;
    case WireType::kBfloat16:
      return proto::DT_BFLOAT16;
    case WireType::kFloat16:
      return proto::DT_FLOAT16;
  }
  return proto::DT_FLOAT32;
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

absl::StatusOr<WireType> ParseWireType(absl::string_view name) {
  if (name == "float32") return WireType::kFloat32;
  if (name == "bfloat16") return WireType::kBfloat16;
  if (name == "float16") return WireType::kFloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("--wire_dtype must be float32, bfloat16 or float16, got \"", name, "\""));
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

namespace {

// The array forms of the conversions above: the same arithmetic with every branch made a select
// (each lane computes every case), unsigned 32-bit lanes, loads and stores through memcpy (any
// alignment), so that GCC vectorises each loop (wire_type.cc compiles with -O3). Bit-equal to
// the scalar functions for every input (wire_protocol_test).

PSFLOW_VECTOR_CLONES void EncodeBfloat16(const float* __restrict src, size_t n,
                                         std::byte* __restrict out) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, src + i, 4);
    const uint32_t nan = (u >> 16) | 0x40u;
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const auto h = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

// In blocks: the arithmetic in 32-bit lanes, then the narrowing to 16 bits (GCC 12 vectorises
// neither half with both in one loop).
PSFLOW_VECTOR_CLONES void EncodeFloat16(const float* __restrict src, size_t n,
                                        std::byte* __restrict out) {
  constexpr size_t kBlock = 512;
  alignas(64) uint32_t block[kBlock];
  for (size_t at = 0; at < n; at += kBlock) {
    const size_t m = std::min(kBlock, n - at);
    for (size_t i = 0; i < m; ++i) {
      uint32_t u;
      std::memcpy(&u, src + at + i, 4);
      const uint32_t abs = u & 0x7fffffffu;
      const uint32_t sign = (u ^ abs) >> 16;
      const uint32_t normal = (abs + 0xfffu + ((abs >> 13) & 1u) - (112u << 23)) >> 13;
      // Below 2^-14: abs * 2^24 rounded to nearest even, by shifts of the significand (its
      // implicit bit set; a float subnormal, exponent 0, shifts to 0 as its value must).
      const int32_t wanted = 126 - static_cast<int32_t>(abs >> 23);
      const auto shift = static_cast<uint32_t>(wanted < 1 ? 1 : wanted > 31 ? 31 : wanted);
      const uint32_t significand = (abs & 0x7fffffu) | 0x800000u;
      const uint32_t subnormal =
          (significand + (1u << (shift - 1)) - 1u + ((significand >> shift) & 1u)) >> shift;
      uint32_t h = abs >= 0x477ff000u ? 0x7c00u : normal;
      h = abs < 0x38800000u ? subnormal : h;
      h = abs > 0x7f800000u ? 0x7e00u : h;
      block[i] = sign | h;
    }
    for (size_t i = 0; i < m; ++i) {
      const auto h = static_cast<uint16_t>(block[i]);
      std::memcpy(out + 2 * (at + i), &h, 2);
    }
  }
}

PSFLOW_VECTOR_CLONES void DecodeBfloat16(const std::byte* __restrict in, size_t n,
                                         float* __restrict out) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    std::memcpy(out + i, &u, 4);
  }
}

PSFLOW_VECTOR_CLONES void DecodeFloat16(const std::byte* __restrict in, size_t n,
                                        float* __restrict out) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t x;
    std::memcpy(&x, in + 2 * i, 2);
    const uint32_t sign = static_cast<uint32_t>(x & 0x8000u) << 16;
    const uint32_t exponent = (x >> 10) & 0x1fu;
    const uint32_t mantissa = x & 0x3ffu;
    // A subnormal: mantissa * 2^-24, exact in float32 (an integer below 2^10 times a power of 2).
    uint32_t subnormal;
    const float magnitude =
        static_cast<float>(static_cast<int32_t>(mantissa)) * (1.0f / 16777216.0f);
    std::memcpy(&subnormal, &magnitude, 4);
    const uint32_t normal = ((exponent + 112u) << 23) | (mantissa << 13);
    const uint32_t special = 0x7f800000u | (mantissa << 13);  // infinity or NaN
    uint32_t u = exponent == 0 ? subnormal : normal;
    u = exponent == 31 ? special : u;
    u |= sign;
    std::memcpy(out + i, &u, 4);
  }
}

}  // namespace

void EncodeWire(std::span<const float> src, WireType type, std::byte* out) {
  switch (type) {
    case WireType::kFloat32:
      std::memcpy(out, src.data(), src.size_bytes());
      return;
    case WireType::kBfloat16:
      EncodeBfloat16(src.data(), src.size(), out);
      return;
    case WireType::kFloat16:
      EncodeFloat16(src.data(), src.size(), out);
      return;
  }
}

void DecodeWire(const std::byte* in, size_t n, WireType type, float* out) {
  switch (type) {
    case WireType::kFloat32:
      std::memcpy(out, in, n * 4);
      return;
    case WireType::kBfloat16:
      DecodeBfloat16(in, n, out);
      return;
    case WireType::kFloat16:
      DecodeFloat16(in, n, out);
      return;
  }
}

bool ReadFloats(ByteSource& source, std::span<float> dst, WireType type) {
  if (type == WireType::kFloat32) return source.Read(dst.data(), dst.size_bytes());
  if (dst.size() * 2 > source.remaining()) return false;
  size_t at = 0;
  while (at < dst.size()) {
    const std::span<const std::byte> run = source.Peek();
    const size_t whole = std::min(dst.size() - at, run.size() / 2);
    if (whole > 0) {
      DecodeWire(run.data(), whole, type, dst.data() + at);
      source.Skip(whole * 2);
      at += whole;
    } else {  // an element split between two runs (or an empty piece)
      std::byte element[2];
      source.Read(element, 2);
      DecodeWire(element, 1, type, dst.data() + at);
      ++at;
    }
  }
  return true;
}

}  // namespace psflow
