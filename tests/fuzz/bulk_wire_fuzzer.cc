// libFuzzer target: arbitrary bytes as a bulk channel stream (core/bulk_wire.h), read as a ps reads
// requests or as a worker reads replies (the input's first byte picks which): message after
// message, each prefix decoded and checked, its body taken as the reader takes it (a reply's frame
// header length, a reply frame's header, an error body). Any input must end in a clean rejection or
// the stream's end: never a crash, an out-of-bounds read, or an allocation the prefix asked for
// beyond the limit. A decoded prefix encodes back to the same bytes. The seeds (corpus/bulk_wire)
// are a pull request, a reply and an error reply as psflow sends them.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/bulk_wire.h"
#include "core/byte_source.h"
#include "core/chunk_plan.h"
#include "core/frame.h"
#include "proto/ps.pb.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psflow;
  if (size == 0) return 0;
  const BulkReader reader = (data[0] & 1) != 0 ? BulkReader::kWorker : BulkReader::kPs;
  std::span<const std::byte> rest(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  bool accepted = true;
  while (rest.size() >= kBulkPrefixBytes && accepted) {
    const auto prefix_bytes = rest.first<kBulkPrefixBytes>();
    absl::StatusOr<BulkPrefix> p =
        DecodeBulkPrefix(prefix_bytes, reader, static_cast<uint64_t>(kMaxBulkMessageBytes));
    if (!p.ok()) {
      accepted = false;
      break;
    }
    PSFLOW_FUZZ_CHECK(EncodeBulkPrefix(*p) ==
                      (std::array<std::byte, kBulkPrefixBytes>{
                          prefix_bytes[0], prefix_bytes[1], prefix_bytes[2], prefix_bytes[3],
                          prefix_bytes[4], prefix_bytes[5], prefix_bytes[6], prefix_bytes[7],
                          prefix_bytes[8], prefix_bytes[9], prefix_bytes[10], prefix_bytes[11],
                          prefix_bytes[12], prefix_bytes[13], prefix_bytes[14], prefix_bytes[15]}));
    PSFLOW_FUZZ_CHECK(p->length <= static_cast<uint64_t>(kMaxBulkMessageBytes));
    rest = rest.subspan(kBulkPrefixBytes);
    if (rest.size() < p->length) break;  // the stream ends mid-body: the reader waits for more
    const auto body = rest.first(static_cast<size_t>(p->length));
    rest = rest.subspan(static_cast<size_t>(p->length));
    switch (p->kind) {
      case BulkKind::kError:
        PSFLOW_FUZZ_CHECK(!DecodeBulkError(body).ok() || body.size() >= 4);
        break;
      case BulkKind::kReply: {
        if (body.size() < 4) {
          accepted = false;
          break;
        }
        absl::StatusOr<uint32_t> n = FrameHeaderBytes(body.first<4>(), body.size());
        if (!n.ok()) {
          accepted = false;
          break;
        }
        PSFLOW_FUZZ_CHECK(4 + uint64_t{*n} <= body.size());
        ByteSource source({body});
        proto::TransferReply reply;
        accepted = DecodeFrameHeader(source, &reply).ok();
        if (accepted) PSFLOW_FUZZ_CHECK(source.remaining() == body.size() - 4 - *n);
        break;
      }
      case BulkKind::kPush:
      case BulkKind::kPull: {
        // The frame itself is the ps's to check (frame_fuzzer); its header must parse.
        ByteSource source({body});
        proto::TransferHeader header;
        accepted = DecodeFrameHeader(source, &header).ok();
        break;
      }
    }
  }
  psflow::fuzz::RecordOutcome(accepted);
  return 0;
}
