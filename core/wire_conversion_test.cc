// The 16-bit wire conversions' array loops (EncodeWire, DecodeWire) against the scalar functions,
// bit for bit. In core_test they run as the CPU picks their clone (core/vector_clones.h); the
// wire_conversion_<level>_test binaries run the same test on wire_type.cc built without clones for
// one x86-64 level each (PSFLOW_WIRE_LEVEL: baseline, v3 = AVX2 + FMA, v4 = AVX-512), so every
// clone's code is checked on any CPU that can run it, and skipped, saying so, where it cannot.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/wire_type.h"

namespace psflow {
namespace {

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
float FromBits(uint32_t u) { return std::bit_cast<float>(u); }

// EncodeWire's and DecodeWire's loops give the scalar functions' bits for every input they are
// checked on: every 16-bit pattern decoded; every float whose low 16 bits are one of a set that
// covers the rounding cases (ties, one either side, carries), every float around float16's
// subnormal range, each as a whole array written at an odd address.
#ifndef PSFLOW_WIRE_SUITE
#define PSFLOW_WIRE_SUITE WireConversion  // as the clones run: core_test
#endif
TEST(PSFLOW_WIRE_SUITE, ArrayConversionsGiveTheScalarConversionsBits) {
#ifdef PSFLOW_WIRE_LEVEL
  if (!__builtin_cpu_supports(PSFLOW_WIRE_LEVEL)) {
    GTEST_SKIP() << "this CPU cannot run code built for " << PSFLOW_WIRE_LEVEL;
  }
#endif
  std::vector<std::byte> halves(2 * 0x10000 + 1);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto v = static_cast<uint16_t>(h);
    std::memcpy(halves.data() + 1 + 2 * h, &v, 2);
  }
  std::vector<float> decoded(0x10000);
  for (WireType type : {WireType::kBfloat16, WireType::kFloat16}) {
    DecodeWire(halves.data() + 1, decoded.size(), type, decoded.data());
    for (uint32_t h = 0; h < 0x10000; ++h) {
      const float want = type == WireType::kBfloat16 ? FromBfloat16(static_cast<uint16_t>(h))
                                                     : FromFloat16(static_cast<uint16_t>(h));
      ASSERT_EQ(Bits(decoded[h]), Bits(want)) << "type " << static_cast<int>(type) << " " << h;
    }
  }

  std::vector<float> floats;
  for (uint32_t high = 0; high < 0x10000; ++high) {
    for (uint32_t low :
         {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x1fffu, 0x2000u, 0x2001u, 0x3000u, 0x5555u,
          0x7fffu, 0x8000u, 0x8001u, 0x9000u, 0xafffu, 0xe000u, 0xf000u, 0xffffu}) {
      floats.push_back(FromBits(high << 16 | low));
    }
  }
  for (uint32_t sign : {0u, 0x80000000u}) {  // float16's subnormals and the edges around them
    for (uint32_t u = 0x32f00000u; u < 0x38900000u; u += 7) floats.push_back(FromBits(sign | u));
  }
  std::vector<std::byte> encoded(2 * floats.size() + 1);
  for (WireType type : {WireType::kBfloat16, WireType::kFloat16}) {
    EncodeWire(floats, type, encoded.data() + 1);
    for (size_t i = 0; i < floats.size(); ++i) {
      uint16_t got;
      std::memcpy(&got, encoded.data() + 1 + 2 * i, 2);
      const uint16_t want =
          type == WireType::kBfloat16 ? ToBfloat16(floats[i]) : ToFloat16(floats[i]);
      ASSERT_EQ(got, want) << "type " << static_cast<int>(type) << " float bits " << std::hex
                           << Bits(floats[i]);
    }
  }
}

}  // namespace
}  // namespace psflow
