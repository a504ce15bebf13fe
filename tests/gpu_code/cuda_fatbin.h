// Reads the GPU code that nvcc embeds in a host executable, without cuobjdump: which machine code
// (SASS, for one GPU architecture) and which PTX (compiled by the driver for that architecture or
// any newer one) each fatbin holds. tests/gpu_code checks psflow-worker with it.
//
// The layout, which NVIDIA does not document (read from nvcc 13's output and cross-checked with
// the CUDA ELF images inside; all fields little-endian):
//  - The host ELF section .nv_fatbin holds one fatbin per CUDA translation unit, one after another
//    (zero padding between them, if any).
//  - Fatbin header, 16 bytes: u32 magic 0xBA55ED50, u16 version (1), u16 header size,
//    u64 size of the entries that follow the header.
//  - Entry header, at least 64 bytes, then its payload: u16 kind (1 PTX, 2 CUDA ELF, i.e. SASS) at
//    0, u32 header size at 4, u64 payload size (padded) at 8, u32 architecture at 28 (80: sm_80 or
//    compute_80), u64 flags at 40 (0x2000 or 0x8000: the payload is compressed, LZ4 or zstd).
//  - An uncompressed ELF payload is a CUDA ELF image (e_machine 190, EM_CUDA); in those of ELF ABI
//    version 8 (nvcc 13) bits 8-15 of e_flags name the same architecture.
#ifndef PSFLOW_TESTS_GPU_CODE_CUDA_FATBIN_H_
#define PSFLOW_TESTS_GPU_CODE_CUDA_FATBIN_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow::testing {

struct GpuCode {
  enum class Kind { kPtx, kSass };
  Kind kind = Kind::kSass;
  int arch = 0;  // compute capability x 10: 90 is sm_90 (SASS) or compute_90 (PTX)
  bool compressed = false;
};

struct Fatbin {
  size_t offset = 0;  // in the .nv_fatbin section
  std::vector<GpuCode> code;
};

// The fatbins in `section` (the bytes of a .nv_fatbin section), in order. Entries of kinds other
// than PTX and ELF are skipped. INVALID_ARGUMENT naming the offset when a header is malformed or
// runs past the end of the section, or when an uncompressed ELF payload is not a CUDA ELF image
// (of the architecture its header names, where its ABI version says where to look).
absl::StatusOr<std::vector<Fatbin>> ParseFatbins(absl::string_view section);

// The bytes of the section `name` of the 64-bit little-endian ELF file at `path`. NOT_FOUND when
// the file has no such section; INVALID_ARGUMENT when it is not such an ELF file (or is cut
// short); NOT_FOUND or PERMISSION_DENIED when it cannot be opened.
absl::StatusOr<std::string> ReadElfSection(const std::string& path, absl::string_view name);

// The fatbins of the executable at `path`: ReadElfSection(path, ".nv_fatbin") parsed. An
// executable built without CUDA has no such section: NOT_FOUND.
absl::StatusOr<std::vector<Fatbin>> ReadFatbins(const std::string& path);

// "sm_90" or "compute_90", as nvcc names them.
std::string Describe(const GpuCode& code);

}  // namespace psflow::testing

#endif  // PSFLOW_TESTS_GPU_CODE_CUDA_FATBIN_H_
