// The element types of a frame's payload and their conversions to and from float32.
#ifndef PSFLOW_CORE_WIRE_TYPE_H_
#define PSFLOW_CORE_WIRE_TYPE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/byte_source.h"

namespace psflow {

// Elements on the wire: float32 (the default), or bfloat16 / float16 (--wire_dtype: half the
// bytes, rounded to nearest even). Values are float32 everywhere else.
enum class WireType { kFloat32, kBfloat16, kFloat16 };
// The wire type of a frame's dtype; INVALID_ARGUMENT for any other dtype.
absl::StatusOr<WireType> WireTypeOf(int proto_dtype);
// The inverse: the protocol's DType (proto::DType's value) of `type`.
int ProtoDtypeOf(WireType type);
// The wire type the flag --wire_dtype names: "float32", "bfloat16" or "float16"; otherwise
// INVALID_ARGUMENT "--wire_dtype must be float32, bfloat16 or float16, got \"...\"".
absl::StatusOr<WireType> ParseWireType(absl::string_view name);
inline size_t WireBytes(WireType t) { return t == WireType::kFloat32 ? 4 : 2; }

// float32 <-> 16-bit wire elements, one at a time: the rule the array forms below follow bit for
// bit (NaNs stay NaNs of the same sign; float16 overflows to infinity, rounds into subnormals).
uint16_t ToBfloat16(float x);
float FromBfloat16(uint16_t x);
uint16_t ToFloat16(float x);
float FromFloat16(uint16_t x);

// Writes src as `type` elements to out (src.size() * WireBytes(type) bytes, any alignment; not
// overlapping src). The 16-bit conversions are branch-free loops compiled for the CPU's vector
// width (core/vector_clones.h): a push or pull of 16-bit elements converts every element on
// both ends, at memory speed rather than an element per call.
void EncodeWire(std::span<const float> src, WireType type, std::byte* out);
// Reads n elements of `type` at `in` (n * WireBytes(type) bytes, any alignment; not overlapping
// out) into out.
void DecodeWire(const std::byte* in, size_t n, WireType type, float* out);

// Reads the next dst.size() elements of `type` out of `source` into dst, converting each run of
// the source where it lies (an element split between two runs is joined first). False (and
// nothing consumed) when fewer remain.
bool ReadFloats(ByteSource& source, std::span<float> dst, WireType type = WireType::kFloat32);

// Calls fn(std::span<const float>) on successive blocks making up the next n elements of `type`
// in `source`, each at most 4096 elements. float32 elements lying whole and aligned in one of the
// source's runs are passed in place (a message received into an aligned buffer: no copy); the
// others (16-bit types, runs that are not aligned or end inside an element, as gRPC's slices may)
// are read through an aligned buffer on the stack, converted to float32, and stay in L1. False
// when fewer than n elements remain.
template <class Fn>
bool ForEachFloatBlock(ByteSource& source, int64_t n, Fn fn, WireType type = WireType::kFloat32) {
  constexpr int64_t kBlock = 4096;
  alignas(64) float block[kBlock];
  if (static_cast<uint64_t>(n) * WireBytes(type) > source.remaining()) return false;
  while (n > 0) {
    if (type == WireType::kFloat32) {
      const std::span<const std::byte> run = source.Peek();
      const auto whole = std::min<int64_t>(n, std::min<int64_t>(kBlock, run.size() / 4));
      if (whole > 0 && reinterpret_cast<uintptr_t>(run.data()) % alignof(float) == 0) {
        fn(std::span<const float>(reinterpret_cast<const float*>(run.data()),
                                  static_cast<size_t>(whole)));
        source.Skip(static_cast<size_t>(whole) * 4);
        n -= whole;
        continue;
      }
    }
    const int64_t take = std::min(n, kBlock);
    ReadFloats(source, std::span<float>(block, static_cast<size_t>(take)), type);
    fn(std::span<const float>(block, static_cast<size_t>(take)));
    n -= take;
  }
  return true;
}

}  // namespace psflow

#endif  // PSFLOW_CORE_WIRE_TYPE_H_
