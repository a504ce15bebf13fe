// Tensors <-> TensorProto: raw little-endian bytes, one memcpy each way, no per-element work.
#ifndef PSFLOW_CORE_WIRE_H_
#define PSFLOW_CORE_WIRE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/ps.pb.h"

namespace psflow {

// Fills `out` with a float32 tensor of `shape` whose elements are `values`
// (values.size() must equal the product of shape). Reuses out's existing byte capacity.
void EncodeFloat32(std::span<const float> values, std::span<const int64_t> shape,
                   proto::TensorProto* out);

// Copies a float32 tensor's bytes into `out`. INVALID_ARGUMENT (naming `what`) when the dtype is
// not float32, the shape does not match `expected_shape`, or the byte count is wrong.
absl::Status DecodeFloat32(const proto::TensorProto& tensor,
                           std::span<const int64_t> expected_shape, std::span<float> out,
                           absl::string_view what);

// Number of elements of a shape (1 for a scalar). The shape must be valid (see CheckShape).
int64_t NumElements(std::span<const int64_t> shape);

// INVALID_ARGUMENT (naming `what`) for a negative dimension or more than 2^40 elements (which
// would overflow byte counts); else the number of elements.
absl::StatusOr<int64_t> CheckShape(std::span<const int64_t> shape, absl::string_view what);

}  // namespace psflow

#endif  // PSFLOW_CORE_WIRE_H_
