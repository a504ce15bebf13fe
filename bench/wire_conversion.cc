// The 16-bit wire types' conversions (core/wire_type.h), which a 16-bit push or pull makes for
// every element on both ends, against the float32 wire's cost for the same elements (a memcpy of
// their 4 bytes, what EncodeWire does for float32) and against the scalar reference functions
// (ToBfloat16, FromBfloat16, ... called once per element from this file, the rule the loops
// match bit for bit), all in this process, on the same buffers. Prints the CPU, which of
// core/vector_clones.h's clones it runs, milliseconds per call and each one's speed relative to
// the memcpy (above 1: faster than moving the float32 bytes).
//
//   build/bin/bench_wire_conversion [--elements=2730000] [--repeats=50]
//
// The default is a PTB small push with sparse pulls' rows (2.73 M elements, 10.9 MB as float32).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

#include "absl/flags/flag.h"
#include "bench/cpu_model.h"
#include "core/byte_source.h"
#include "core/command_line.h"
#include "core/wire_type.h"

ABSL_FLAG(int64_t, elements, 2730000, "Elements converted per call");
ABSL_FLAG(int, repeats, 50, "Timed calls per case (the median is printed)");

namespace psflow::bench {
namespace {

// The clone GCC's resolver picks on this CPU (its arch levels; clang's builtin lacks them and
// core/vector_clones.h's clones are GCC's).
const char* CloneName() {
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) && !defined(__clang__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return "x86-64-v4 (AVX-512)";
  if (__builtin_cpu_supports("x86-64-v3")) return "x86-64-v3 (AVX2)";
  return "baseline x86-64";
#else
  return "the build's only one";
#endif
}

// The median milliseconds of `repeats` calls of fn (one untimed call first: pages, caches).
template <class Fn>
double MedianMillis(int repeats, Fn fn) {
  fn();
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

int Main() {
  const auto n = static_cast<size_t>(std::max<int64_t>(1, absl::GetFlag(FLAGS_elements)));
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  std::vector<float> values(n), decoded(n);
  for (size_t i = 0; i < n; ++i) values[i] = 1e-3f * static_cast<float>(i % 2001) - 1.0f;
  std::vector<std::byte> wire(n * 4);
  std::printf(
      "wire conversions of %zu elements (%.1f MB as float32), median of %d calls; %s, %d "
      "cores; clone: %s\n",
      n, 4e-6 * static_cast<double>(n), repeats, CpuModelName().c_str(),
      static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)), CloneName());
  const double copy =
      MedianMillis(repeats, [&] { EncodeWire(values, WireType::kFloat32, wire.data()); });
  std::printf("%-9s %-28s %9s %8s\n", "type", "call", "ms", "vs copy");
  std::printf("%-9s %-28s %9.3f %8.2f\n", "float32", "EncodeWire (a memcpy)", copy, 1.0);
  for (WireType type : {WireType::kBfloat16, WireType::kFloat16}) {
    const bool bf16 = type == WireType::kBfloat16;
    const char* name = bf16 ? "bfloat16" : "float16";
    const double encode = MedianMillis(repeats, [&] { EncodeWire(values, type, wire.data()); });
    const double read = MedianMillis(repeats, [&] {
      ByteSource source({std::span<const std::byte>(wire.data(), n * 2)});
      ReadFloats(source, decoded, type);
    });
    const double scalar_encode = MedianMillis(repeats, [&] {
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = bf16 ? ToBfloat16(values[i]) : ToFloat16(values[i]);
        std::memcpy(wire.data() + 2 * i, &h, 2);
      }
    });
    const double scalar_decode = MedianMillis(repeats, [&] {
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, wire.data() + 2 * i, 2);
        decoded[i] = bf16 ? FromBfloat16(h) : FromFloat16(h);
      }
    });
    std::printf("%-9s %-28s %9.3f %8.2f\n", name, "EncodeWire", encode, copy / encode);
    std::printf("%-9s %-28s %9.3f %8.2f\n", name, "ReadFloats (one run)", read, copy / read);
    std::printf("%-9s %-28s %9.3f %8.2f\n", name, "scalar encode, per element", scalar_encode,
                copy / scalar_encode);
    std::printf("%-9s %-28s %9.3f %8.2f\n", name, "scalar decode, per element", scalar_decode,
                copy / scalar_decode);
  }
  // Keeps every conversion's output alive.
  float sum = 0;
  for (size_t i = 0; i < n; i += 4096) sum += decoded[i];
  std::printf("(checksum %g)\n", static_cast<double>(sum));
  return 0;
}

}  // namespace
}  // namespace psflow::bench

int main(int argc, char** argv) {
  psflow::ParseFlags(argc, argv, "16-bit wire conversions against a float32 copy");
  return psflow::bench::Main();
}
