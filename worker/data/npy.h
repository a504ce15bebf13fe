// NumPy's .npy array file (numpy.lib.format; npz.h reads the .npz archives of them): the magic
// "\x93NUMPY", a major and minor version byte, the header's length (version 1.0: a little-endian
// u16; 2.0 and 3.0: a u32), the header -- a Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and a newline
// -- then the elements, C order unless fortran_order.
//
// Errors name the file (or "archive.npz:member.npy"), and for malformed bytes the byte offset:
//   NOT_FOUND         the file does not exist or cannot be opened;
//   DATA_LOSS         malformed bytes: no magic, an unknown version, a header that is not the dict
//                     above, a file shorter or longer than its shape and dtype need;
//   INVALID_ARGUMENT  well-formed but not read: a dtype other than those of NpyType (object
//                     arrays, structured dtypes, complex, strings, datetimes).
// Sizes are checked against the bytes actually present before anything is allocated: a small
// malformed file never causes a large allocation.
#ifndef PSFLOW_WORKER_DATA_NPY_H_
#define PSFLOW_WORKER_DATA_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow::data {

// The element types read; descr codes with any byte order ('<', '>', '=', '|'; big-endian data is
// byte-swapped on reading): b1, i1, i2, i4, i8, u1, u2, u4, u8, f4, f8.
enum class NpyType {
  kBool,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kFloat16,  // IEEE half precision, read exactly as float
  kFloat32,
  kFloat64
};

// The six bytes every .npy file begins with.
inline constexpr absl::string_view kNpyMagic("\x93NUMPY", 6);

// Bytes per element: 1, 2, 4 or 8.
int NpyTypeSize(NpyType type);
// NumPy's name of the type: "bool", "int8", ..., "float64".
absl::string_view NpyTypeName(NpyType type);
// True for the signed and unsigned integer types (not bool, not the floats).
bool NpyTypeIsInteger(NpyType type);

struct NpyArray {
  std::vector<int64_t> shape;  // outermost first; empty for a 0-d array (one element)
  NpyType type = NpyType::kFloat32;
  // size() * NpyTypeSize(type) bytes: the elements in C (row-major) order, little-endian (a
  // Fortran-order or big-endian file is converted on reading).
  std::string data;

  // The number of elements: the product of shape (1 for a 0-d array).
  int64_t size() const;
  // Every element as a float, in order: bool as 0 or 1; integers and doubles rounded to the
  // nearest float (integers above 2^24 lose precision; doubles beyond float's range become
  // infinite).
  std::vector<float> ToFloats() const;
  // Every element as an integer, in order. Floats must hold integral values within int64's
  // range: otherwise INVALID_ARGUMENT naming `what`, the element's index and its value (a label
  // of 1.5 is a mistake, not something to round). A uint64 above int64's maximum is the same
  // error.
  absl::StatusOr<std::vector<int64_t>> ToIntegers(absl::string_view what) const;
};

// Parses the bytes of a .npy file. `what` names it in errors (a path, or "data.npz:x.npy").
absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, absl::string_view what);

// ParseNpy over bytes it takes: the data moves into the array instead of being copied.
absl::StatusOr<NpyArray> ParseOwnedNpy(std::string bytes, absl::string_view what);

// Reads a .npy file: its header, then its data straight into the array (no second copy).
absl::StatusOr<NpyArray> ReadNpy(const std::string& path);

}  // namespace psflow::data

#endif  // PSFLOW_WORKER_DATA_NPY_H_
