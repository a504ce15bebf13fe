// Shapes of the tensors the ps and the workers exchange: element counts, checked against
// overflow.
#ifndef PSFLOW_CORE_TENSOR_SHAPE_H_
#define PSFLOW_CORE_TENSOR_SHAPE_H_

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow {

// Number of elements of a shape (1 for a scalar). The shape must be valid (see CheckShape).
int64_t NumElements(std::span<const int64_t> shape);

// INVALID_ARGUMENT (naming `what`) for a negative dimension or more than 2^40 elements (which
// would overflow byte counts); else the number of elements.
absl::StatusOr<int64_t> CheckShape(std::span<const int64_t> shape, absl::string_view what);

}  // namespace psflow

#endif  // PSFLOW_CORE_TENSOR_SHAPE_H_
