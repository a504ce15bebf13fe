// libFuzzer target: an .npz archive, read as the worker reads a split from one
// (data::LoadNpzSplit of the members "x" and "y" for a model of input [4] and 10 classes, over
// data::ReadNpzMember), and listed (data::ListNpzMembers). Byte 0 says what the rest is: even,
// the archive's bytes; odd, the two members' bytes (x.npy, `\n--8<--\n`, y.npy), which the
// target zips with correct sizes and CRC-32s (bits 1-4: deflated, ZIP64 extra fields in the
// local headers, in the central directory, ZIP64 end records), so that mutations reach the
// members too. Any input must end in a dataset, NOT_FOUND, DATA_LOSS or INVALID_ARGUMENT, never
// a crash or an allocation the input's size does not justify; a dataset it accepts has 4 finite
// values and a label in 0..9 per example, and at least one example.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_support.h"
#include "worker/data/array_dataset.h"
#include "worker/data/npy_test_files.h"
#include "worker/data/npz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psflow;
  if (size == 0) return 0;
  const absl::string_view rest = fuzz::AsText(data + 1, size - 1);
  std::string archive;
  if (data[0] & 1) {
    const std::vector<absl::string_view> parts = fuzz::SplitParts(rest, 2);
    const bool deflate = data[0] & 2;
    archive = data::testing::ZipBytes(
        {{"x.npy", std::string(parts[0]), deflate}, {"y.npy", std::string(parts[1]), deflate}},
        data::testing::ZipLayout{(data[0] & 4) != 0, (data[0] & 8) != 0, (data[0] & 16) != 0, ""});
  } else {
    archive = std::string(rest);
  }
  const std::string path = fuzz::WriteScratchFile("data.npz", archive);

  const absl::StatusOr<std::vector<std::string>> names = data::ListNpzMembers(path);
  if (names.ok()) {
    // Each member the directory lists can be looked up by that name (the first few: a small
    // archive can list thousands of empty names).
    for (size_t i = 0; i < names->size() && i < 4; ++i) {
      const absl::StatusOr<data::NpyArray> member = data::ReadNpzMember(path, (*names)[i]);
      PSFLOW_FUZZ_CHECK(member.ok() || (fuzz::IsDataFileError(member.status()) &&
                                        member.status().code() != absl::StatusCode::kNotFound));
    }
  } else {
    PSFLOW_FUZZ_CHECK(fuzz::IsDataFileError(names.status()));
  }

  const data::ArrayDataOptions model{{4}, 10, 1.f};
  const absl::StatusOr<data::Dataset> set = data::LoadNpzSplit(path, "x", "y", model);
  fuzz::RecordOutcome(set.ok());
  if (!set.ok()) {
    PSFLOW_FUZZ_CHECK(fuzz::IsDataFileError(set.status()));
    return 0;
  }
  PSFLOW_FUZZ_CHECK(names.ok());
  PSFLOW_FUZZ_CHECK(set->size() >= 1);
  PSFLOW_FUZZ_CHECK(set->example_elements() == 4);
  PSFLOW_FUZZ_CHECK(set->inputs.size() == set->labels.size() * 4);
  for (float v : set->inputs) PSFLOW_FUZZ_CHECK(std::isfinite(v));
  for (int32_t label : set->labels) PSFLOW_FUZZ_CHECK(label >= 0 && label < 10);
  return 0;
}
