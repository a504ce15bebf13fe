// Kubernetes resource quantities ("500m", "2", "1.5Gi", "1e3"), summed exactly: what a gang
// scheduler's PodGroup asks for is the sum of its pods' requests (controller/pod_group.h).
#ifndef PSFLOW_OPERATOR_API_QUANTITY_H_
#define PSFLOW_OPERATOR_API_QUANTITY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow::api {

// A quantity in thousandths of its unit ("500m" -> 500, "2" -> 2000, "1Ki" -> 1024000). Accepts
// what the API server accepts: an optional sign, digits with an optional fraction, and one of the
// binary suffixes Ki Mi Gi Ti Pi Ei, the decimal ones n u m k M G T P E, or an exponent e<N>/E<N>.
// A value finer than a thousandth is rounded up (as the API server rounds requests). Errors:
// INVALID_ARGUMENT for text that is no quantity or a value beyond +-9.2e15 units.
absl::StatusOr<int64_t> ParseMilliQuantity(absl::string_view text);

// The canonical text of a quantity of `milli` thousandths: "2" for 2000, "1500m" for 1500,
// "1073741824" for 1Gi.
std::string FormatMilliQuantity(int64_t milli);

}  // namespace psflow::api

#endif  // PSFLOW_OPERATOR_API_QUANTITY_H_
