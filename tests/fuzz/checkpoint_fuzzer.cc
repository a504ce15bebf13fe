// libFuzzer target: arbitrary bytes as a ps checkpoint file, read as a restarting ps reads one
// (ReadCheckpointFile, what CheckpointDir::RestoreNewest does per file). When the input's first
// byte is odd, the rest gets its correct CRC-32 appended, so that the fuzzer also reaches files
// whose checksum holds. Any input must end in a checkpoint or DATA_LOSS, never a crash, a read
// past the end or an allocation beyond the file's size; a checkpoint it accepts has a
// non-negative step and as many values per tensor as its shape says.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "ps/checkpoint.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psflow;
  if (size == 0) return 0;
  std::string file(fuzz::AsText(data + 1, size - 1));
  if (data[0] & 1) {
    const auto crc = static_cast<uint32_t>(
        ::crc32(::crc32(0L, Z_NULL, 0), data + 1, static_cast<uInt>(size - 1)));
    file.append(reinterpret_cast<const char*>(&crc), sizeof(crc));  // little-endian host
  }
  const std::string path = fuzz::WriteScratchFile("ckpt-000000000007.psck", file);
  const absl::StatusOr<Checkpoint> checkpoint = ReadCheckpointFile(path);
  fuzz::RecordOutcome(checkpoint.ok());
  if (!checkpoint.ok()) {
    PSFLOW_FUZZ_CHECK(checkpoint.status().code() == absl::StatusCode::kDataLoss);
    return 0;
  }
  PSFLOW_FUZZ_CHECK(checkpoint->global_step >= 0);
  for (const CheckpointTensor& t : checkpoint->tensors) {
    uint64_t elements = 1;
    for (int64_t d : t.shape) {
      PSFLOW_FUZZ_CHECK(d >= 0);
      elements *= static_cast<uint64_t>(d);
    }
    PSFLOW_FUZZ_CHECK(t.values.size() == elements);
  }
  return 0;
}
