// libFuzzer target: sealed records (core/sealed_records.h), the bulk channel's bytes under TLS.
// The input's first byte picks how the rest is used:
// - even: as a record stream from the peer, opened with the seeds' secret (00 01 .. 1f,
//   AES-128-GCM, two records per epoch) and read in reads of 1 to 3 pieces of several sizes;
//   byte 0's bits 1-7, when not 0, number the read from the source that gets nothing in time.
//   Any input must end in the stream's end, a cut, a deadline or DATA_LOSS: never a crash, an
//   out-of-bounds access, or an allocation a header asked for beyond one record; after an error
//   the reader gives it again. Accepted: no record failed to open.
// - odd: as plaintext, cut into records of sizes the bytes pick, sealed, and read back in other
//   sizes: every byte as it was (a failed check aborts).
// The seeds (corpus/sealed_records) are two records of the spec's test vectors (also with the
// source late at its second read), the same with a tag byte changed or the records swapped, and
// a round trip.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "core/sealed_records.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using psflow::SealedDirection;

std::string Secret() {
  std::string s(psflow::kSealedSecretBytes, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i);
  return s;
}

SealedDirection Make(SealedDirection::Role role) {
  absl::StatusOr<SealedDirection> d =
      SealedDirection::Make(role, psflow::SealCipher::kAes128Gcm, Secret(), 2);
  PSFLOW_FUZZ_CHECK(d.ok());
  return *std::move(d);
}

constexpr std::array<size_t, 5> kReadSizes = {1, 7, 100, 4096, 70000};

// Reads `wire` to its end or its first error, each read at most what `expected` bytes leave (when
// not 0); the plaintext read in *out. The source's call number `late` (when not 0) gets nothing in
// time. True when it ended without a record failing to open. After an error, the reader must
// give the same error again.
bool ReadAll(const std::string& wire, size_t expected, size_t late, std::string* out) {
  psflow::SealedReader reader(Make(SealedDirection::Role::kOpen));
  size_t at = 0;
  size_t calls = 0;
  auto source = [&](std::span<iovec> pieces) -> absl::StatusOr<size_t> {
    if (++calls == late) return absl::DeadlineExceededError("late");
    size_t n = 0;
    for (const iovec& p : pieces) {
      const size_t k = std::min(p.iov_len, wire.size() - at);
      std::memcpy(p.iov_base, wire.data() + at, k);
      at += k;
      n += k;
    }
    return n;
  };
  for (size_t i = 0;; ++i) {
    size_t want = kReadSizes[i % kReadSizes.size()];
    if (expected > 0 && out->size() < expected) want = std::min(want, expected - out->size());
    std::string part(want, '\0');
    // Read into 1 to 3 pieces (the middle one may be empty).
    std::array<iovec, 3> pieces{};
    const size_t count = 1 + i % 3;
    const size_t a = count > 1 ? want / 3 : want;
    const size_t b = count > 2 ? (i % 2 == 0 ? 0 : want / 3) : 0;
    pieces[0] = {part.data(), a};
    pieces[1] = {part.data() + a, count > 2 ? b : want - a};
    pieces[2] = {part.data() + a + b, want - a - b};
    bool ended = false;
    const absl::Status s =
        reader.Read(std::span<iovec>(pieces.data(), count), source, "fuzz", &ended);
    if (ended) return true;
    if (!s.ok()) {
      PSFLOW_FUZZ_CHECK(!reader.buffered());
      PSFLOW_FUZZ_CHECK(reader.Read(std::span<iovec>(pieces.data(), count), source, "fuzz") == s);
      return s.code() != absl::StatusCode::kDataLoss;
    }
    *out += part;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((data[0] & 1) == 0) {
    std::string plain;
    psflow::fuzz::RecordOutcome(ReadAll(rest, 0, data[0] >> 1, &plain));
    return 0;
  }
  // Round trip: record i holds 1 + (byte i * 37) % 5000 bytes of the plaintext.
  SealedDirection sealer = Make(SealedDirection::Role::kSeal);
  std::string wire;
  size_t sizes_at = 0;
  for (size_t at = 0; at < rest.size();) {
    const auto pick = static_cast<unsigned char>(rest[sizes_at++ % rest.size()]);
    const size_t n = std::min(rest.size() - at, 1 + (size_t{pick} * 37) % 5000);
    std::string record(n + psflow::kSealedOverhead, '\0');
    iovec piece{const_cast<char*>(rest.data() + at), n};
    PSFLOW_FUZZ_CHECK(sealer.Seal(std::span<const iovec>(&piece, 1), record.data()).ok());
    wire += record;
    at += n;
  }
  std::string plain;
  PSFLOW_FUZZ_CHECK(ReadAll(wire, rest.size(), 0, &plain));
  PSFLOW_FUZZ_CHECK(plain == rest);
  psflow::fuzz::RecordOutcome(true);
  return 0;
}
