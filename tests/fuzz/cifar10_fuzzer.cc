// libFuzzer target: arbitrary bytes as CIFAR-10's binary test batch (test_batch.bin), read as the
// worker reads it (data::LoadCifar10) and, when accepted, turned into the evaluation set
// (data::MakeCifar10EvalSet). Any input must end in images, NOT_FOUND or DATA_LOSS, never a
// crash; images it accepts have labels in 0..9 and standardize to finite values.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_support.h"
#include "worker/data/cifar10.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psflow;
  fuzz::WriteScratchFile("test_batch.bin", fuzz::AsText(data, size));
  const absl::StatusOr<data::Cifar10Images> images =
      data::LoadCifar10(fuzz::ScratchDir(), data::Split::kTest);
  fuzz::RecordOutcome(images.ok());
  if (!images.ok()) {
    PSFLOW_FUZZ_CHECK(images.status().code() == absl::StatusCode::kDataLoss ||
                      images.status().code() == absl::StatusCode::kNotFound);
    return 0;
  }
  PSFLOW_FUZZ_CHECK(images->pixels.size() ==
                    static_cast<size_t>(images->size() * data::kCifar10ImageBytes));
  PSFLOW_FUZZ_CHECK(static_cast<size_t>(images->size()) * (1 + data::kCifar10ImageBytes) == size);
  for (int32_t label : images->labels) PSFLOW_FUZZ_CHECK(label >= 0 && label < 10);
  const data::Dataset eval = data::MakeCifar10EvalSet(*images);
  PSFLOW_FUZZ_CHECK(eval.labels == images->labels);
  for (float v : eval.inputs) PSFLOW_FUZZ_CHECK(std::isfinite(v));
  return 0;
}
