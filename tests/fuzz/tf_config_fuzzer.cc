// libFuzzer target: arbitrary bytes as the TF_CONFIG environment variable every ps and worker
// reads (ParseTfConfig). Any input must end in a cluster spec or an INVALID_ARGUMENT; a spec it
// accepts must name this task's own address and survive ToTfConfig -> ParseTfConfig unchanged.
#include <cstddef>
#include <cstdint>

#include "core/cluster_spec.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psflow;
  const absl::StatusOr<ClusterSpec> spec = ParseTfConfig(fuzz::AsText(data, size));
  fuzz::RecordOutcome(spec.ok());
  if (!spec.ok()) {
    PSFLOW_FUZZ_CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  PSFLOW_FUZZ_CHECK(ValidateClusterSpec(*spec).ok());
  PSFLOW_FUZZ_CHECK(!spec->SelfAddress().empty());
  const absl::StatusOr<ClusterSpec> again = ParseTfConfig(ToTfConfig(*spec));
  PSFLOW_FUZZ_CHECK(again.ok() && *again == *spec);
  return 0;
}
