// libFuzzer target: arbitrary bytes as a safetensors file (weights a user brings or takes away),
// parsed from memory (ParseSafetensors) and read from a file (ReadSafetensors), which must agree.
// Any input must end in tensors, DATA_LOSS or (a well-formed file of a dtype not converted)
// UNIMPLEMENTED, never a crash, a read past the end or an allocation beyond a small multiple of
// the input's size. A file it accepts has as many values per tensor as its shape says, and
// written back (SerializeSafetensors; names must be non-empty there) parses to the same tensors.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

bool SameTensors(const std::vector<psflow::SafetensorsTensor>& a,
                 const std::vector<psflow::SafetensorsTensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].shape != b[i].shape ||
        a[i].values.size() != b[i].values.size()) {
      return false;
    }
    for (size_t k = 0; k < a[i].values.size(); ++k) {  // by bits: NaNs compare too
      if (std::bit_cast<uint32_t>(a[i].values[k]) != std::bit_cast<uint32_t>(b[i].values[k])) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psflow;
  const absl::string_view bytes = fuzz::AsText(data, size);
  const absl::StatusOr<SafetensorsFile> parsed = ParseSafetensors(bytes, "input");
  const std::string path = fuzz::WriteScratchFile("model.safetensors", bytes);
  const absl::StatusOr<SafetensorsFile> read = ReadSafetensors(path);
  fuzz::RecordOutcome(parsed.ok());
  PSFLOW_FUZZ_CHECK(read.status().code() == parsed.status().code());
  if (!parsed.ok()) {
    PSFLOW_FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kDataLoss ||
                      parsed.status().code() == absl::StatusCode::kUnimplemented);
    return 0;
  }
  PSFLOW_FUZZ_CHECK(SameTensors(read->tensors, parsed->tensors));
  PSFLOW_FUZZ_CHECK(read->metadata == parsed->metadata);
  size_t values = 0;
  bool named = true;
  for (const SafetensorsTensor& t : parsed->tensors) {
    uint64_t elements = 1;
    for (int64_t d : t.shape) {
      PSFLOW_FUZZ_CHECK(d >= 0);
      elements *= static_cast<uint64_t>(d);  // may wrap only when another dimension is 0
    }
    if (std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end()) elements = 0;
    PSFLOW_FUZZ_CHECK(t.values.size() == elements);
    values += t.values.size();
    named = named && !t.name.empty();
  }
  // Every value came from at least 2 bytes of the input (F16, BF16; F32 4, F64 8).
  PSFLOW_FUZZ_CHECK(values <= size / 2);
  if (!named) return 0;
  const absl::StatusOr<std::string> written =
      SerializeSafetensors(parsed->tensors, parsed->metadata);
  PSFLOW_FUZZ_CHECK(written.ok());
  const absl::StatusOr<SafetensorsFile> again = ParseSafetensors(*written, "written back");
  PSFLOW_FUZZ_CHECK(again.ok());
  PSFLOW_FUZZ_CHECK(again->metadata == parsed->metadata);
  // The writer orders by name; the input may have had any order.
  std::vector<SafetensorsTensor> sorted = parsed->tensors;
  std::sort(sorted.begin(), sorted.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.name < b.name; });
  PSFLOW_FUZZ_CHECK(SameTensors(again->tensors, sorted));
  return 0;
}
