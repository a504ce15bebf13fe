// libFuzzer target: arbitrary bytes as a NumPy .npy file, parsed from memory (data::ParseNpy,
// ParseOwnedNpy) and read from a file (data::ReadNpy). Any input must end in an array,
// DATA_LOSS or INVALID_ARGUMENT (an unsupported dtype), never a crash or an allocation the input's
// size does not justify; the three readers must agree exactly. An array it accepts holds
// size() elements of its type, and converts to as many floats and, unless a value is not a
// whole number in int64's range, integers.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_support.h"
#include "worker/data/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psflow;
  const absl::string_view bytes = fuzz::AsText(data, size);
  const std::string path = fuzz::WriteScratchFile("array.npy", bytes);
  const absl::StatusOr<data::NpyArray> parsed = data::ParseNpy(bytes, path);
  fuzz::RecordOutcome(parsed.ok());
  const absl::StatusOr<data::NpyArray> owned = data::ParseOwnedNpy(std::string(bytes), path);
  const absl::StatusOr<data::NpyArray> read = data::ReadNpy(path);
  for (const auto* other : {&owned, &read}) {
    PSFLOW_FUZZ_CHECK(other->status() == parsed.status());
    if (other->ok() && parsed.ok()) {
      PSFLOW_FUZZ_CHECK((*other)->shape == parsed->shape);
      PSFLOW_FUZZ_CHECK((*other)->type == parsed->type);
      PSFLOW_FUZZ_CHECK((*other)->data == parsed->data);
    }
  }
  if (!parsed.ok()) {
    PSFLOW_FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kDataLoss ||
                      parsed.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  const int64_t n = parsed->size();
  PSFLOW_FUZZ_CHECK(n >= 0);
  for (int64_t d : parsed->shape) PSFLOW_FUZZ_CHECK(d >= 0);
  PSFLOW_FUZZ_CHECK(parsed->data.size() ==
                    static_cast<uint64_t>(n) * data::NpyTypeSize(parsed->type));
  PSFLOW_FUZZ_CHECK(parsed->ToFloats().size() == static_cast<size_t>(n));
  const absl::StatusOr<std::vector<int64_t>> integers = parsed->ToIntegers("array");
  if (integers.ok()) {
    PSFLOW_FUZZ_CHECK(integers->size() == static_cast<size_t>(n));
  } else {
    PSFLOW_FUZZ_CHECK(integers.status().code() == absl::StatusCode::kInvalidArgument);
  }
  return 0;
}
