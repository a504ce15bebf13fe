// Reader for the idx format of MNIST and Fashion-MNIST (http://yann.lecun.com/exdb/mnist/):
// a big-endian header (two zero bytes, a type byte, a dimension count, then each dimension as
// a 32-bit big-endian integer) followed by the data. Files may be gzip-compressed or plain.
#ifndef PSFLOW_WORKER_DATA_IDX_H_
#define PSFLOW_WORKER_DATA_IDX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace psflow::data {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> values;  // product(dims) unsigned bytes (type 0x08)
};

// NOT_FOUND when the file is missing; DATA_LOSS (naming the file) when it is truncated, not idx,
// not unsigned-byte data, or has bytes after the data.
absl::StatusOr<IdxArray> ReadIdx(const std::string& path);

}  // namespace psflow::data

#endif  // PSFLOW_WORKER_DATA_IDX_H_
