// Tensors in the safetensors format, the one PyTorch (safetensors.torch.load_file) and Hugging
// Face load: trained weights a user can take away from psflow.
//
// Format (github.com/huggingface/safetensors): an 8-byte little-endian u64 N, then N bytes of
// UTF-8 JSON, then the data buffer. The JSON is an object mapping each tensor's name to
// {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, byte offsets into the
// data buffer (end exclusive), plus an optional "__metadata__" object of string -> string. The
// data is little-endian, row-major (C order), without strides.
//
// Writing: float32 ("F32") only. Tensors are laid out sorted by name (byte order), so one set of
// tensors always gives the same file; the header's keys are "__metadata__" (omitted when empty),
// then the tensors in that order; the header is padded with spaces to a multiple of 8 bytes, so
// the data starts 8-byte aligned (all as the reference writer does for float32 tensors).
//
// Reading checks every rule of the format before it allocates or copies any tensor data, so a
// malformed file is an error, never a crash, a read past its end or an allocation beyond a small
// multiple of its size: the header length against the file (and at most 100 MB, the reference's
// limit); the header starts with '{' and is one JSON object (trailing spaces allowed) with no
// duplicate key at any level; each tensor entry has exactly the fields dtype (a known safetensors
// dtype), shape (non-negative integers below 2^63) and data_offsets (two integers), no others;
// end - begin is the dtype's size x the elements of the shape (without overflow); the tensors'
// byte ranges are contiguous from 0, non-overlapping and cover the whole data buffer; the
// metadata's values are strings. Any violation is DATA_LOSS naming the file and the defect (the
// tensor, byte offsets where it helps).
//
// Values are returned as float32: F32 exactly; F16 and BF16 exactly (every value widens);
// F64 rounded to the nearest float32 (beyond float32's range: +-infinity). A well-formed file with
// another dtype (integers, bool, 8-bit floats) is UNIMPLEMENTED naming the tensor and dtype.
// Names may be any JSON string, also empty.
//
// Little-endian hosts only (a static_assert says so). Thread-compatible: no shared state.
#ifndef PSFLOW_CORE_SAFETENSORS_H_
#define PSFLOW_CORE_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow {

struct SafetensorsTensor {
  std::string name;
  std::vector<int64_t> shape;  // rank 0: a scalar (one value)
  std::vector<float> values;   // product(shape) values, row-major
};

struct SafetensorsFile {
  // In the order of their data in the file (for files this module wrote: sorted by name).
  std::vector<SafetensorsTensor> tensors;
  // "__metadata__"; empty when the file has none.
  std::map<std::string, std::string> metadata;
};

// The largest header accepted (and written), as the reference implementation's.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// The file's bytes, exactly what WriteSafetensors writes. INVALID_ARGUMENT, naming the tensor,
// for an empty, duplicate or "__metadata__" name, a name or metadata string that is not valid
// UTF-8, a negative dimension, or values.size() != product(shape); RESOURCE_EXHAUSTED for a
// header beyond kSafetensorsMaxHeaderBytes.
absl::StatusOr<std::string> SerializeSafetensors(
    const std::vector<SafetensorsTensor>& tensors,
    const std::map<std::string, std::string>& metadata);

// Writes the file atomically (core/file_util.h WriteFileAtomically: a temporary file in the same
// folder, fsync'ed and renamed into place, the folder fsync'ed), streaming the values without a
// copy of the whole file. The arguments' errors as SerializeSafetensors', checked before anything
// is created; then the file system's (a missing or read-only folder, a full disk), naming the
// path. On any error no file or temporary file is left behind and a previous file at `path` is
// untouched.
absl::Status WriteSafetensors(const std::string& path,
                              const std::vector<SafetensorsTensor>& tensors,
                              const std::map<std::string, std::string>& metadata);

// Parses a whole file held in memory; `what` names it in errors ("<what>: <defect>"). Errors as
// described at the top: DATA_LOSS for a malformed file, UNIMPLEMENTED for a dtype not converted.
absl::StatusOr<SafetensorsFile> ParseSafetensors(absl::string_view bytes, absl::string_view what);

// Reads and parses the file at `path` with the same checks as ParseSafetensors (errors name the
// path), reading the header and then each tensor's bytes straight into its values: memory is the
// tensors' values plus the header, not a copy of the file. NOT_FOUND when it does not exist,
// PERMISSION_DENIED when it may not be read, DATA_LOSS for something other than a regular file or
// a file that shrinks while being read.
absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path);

}  // namespace psflow

#endif  // PSFLOW_CORE_SAFETENSORS_H_
