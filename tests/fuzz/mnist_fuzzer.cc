// libFuzzer target: arbitrary bytes as the two idx files of an MNIST-format test set (images, then
// labels after a kPartSeparator line; either may be gzip-compressed), read as the worker reads
// them (data::LoadMnist, over data::ReadIdx). Any input must end in a dataset, NOT_FOUND or
// DATA_LOSS, never a crash or an allocation a small file does not justify; a dataset it accepts
// holds 784 values in [0, 1] per image and a label in 0..9 per image.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "tests/fuzz/fuzz_support.h"
#include "worker/data/mnist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psflow;
  const std::vector<absl::string_view> parts = fuzz::SplitParts(fuzz::AsText(data, size), 2);
  fuzz::WriteScratchFile("t10k-images-idx3-ubyte", parts[0]);
  fuzz::WriteScratchFile("t10k-labels-idx1-ubyte", parts[1]);
  const absl::StatusOr<data::Dataset> set = data::LoadMnist(fuzz::ScratchDir(), data::Split::kTest);
  fuzz::RecordOutcome(set.ok());
  if (!set.ok()) {
    PSFLOW_FUZZ_CHECK(set.status().code() == absl::StatusCode::kDataLoss ||
                      set.status().code() == absl::StatusCode::kNotFound);
    return 0;
  }
  PSFLOW_FUZZ_CHECK(set->example_elements() == 784);
  PSFLOW_FUZZ_CHECK(set->inputs.size() == set->labels.size() * 784);
  for (float v : set->inputs) PSFLOW_FUZZ_CHECK(v >= 0.f && v <= 1.f);
  for (int32_t label : set->labels) PSFLOW_FUZZ_CHECK(label >= 0 && label < 10);
  return 0;
}
