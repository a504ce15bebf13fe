// libFuzzer target: arbitrary bytes as a bulk Push or Pull frame to a ready ps task (async and
// sync), split into arbitrary slices as gRPC may deliver them. A ps must answer every input with
// a reply or an error status: never crash, hang, read out of bounds or allocate without bound.
// The input's first byte picks the state and the call, the rest is the frame; its seeds
// (corpus/frame) are a dense and a sparse push and a dense and a sparse pull (rows) of the state
// below. A float32 pull is answered both ways (copied and pinned), which must carry the same
// bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "core/byte_source.h"
#include "core/wire_type.h"
#include "ps/ps_state.h"
#include "ps/versioned_values.h"
#include "tests/fuzz/fuzz_support.h"

namespace psflow {
namespace {

constexpr uint64_t kFingerprint = 42;

proto::InitializeRequest Request(bool sync) {
  proto::InitializeRequest r;
  r.mutable_optimizer()->set_name("adam");
  r.mutable_optimizer()->set_learning_rate(0.01f);
  r.mutable_sync()->set_total_workers(3);
  r.mutable_sync()->set_sync_replicas(sync);
  r.mutable_sync()->set_replicas_to_aggregate(sync ? 2 : 0);
  r.set_fingerprint(kFingerprint);
  auto* w = r.add_partitions();
  w->set_variable("w");
  w->add_variable_shape(8);
  w->add_variable_shape(4);
  w->set_row_begin(2);
  w->set_row_end(6);
  auto* b = r.add_partitions();
  b->set_variable("b");
  b->add_variable_shape(5);
  b->set_row_begin(0);
  b->set_row_end(5);
  return r;
}

std::unique_ptr<PsState> ReadyState(bool sync) {
  auto state = std::make_unique<PsState>(PsState::Options{}, nullptr);
  proto::InitializeRequest r = Request(sync);
  if (!state->Initialize(r).ok()) std::abort();
  r.set_commit(true);
  if (!state->Initialize(r).ok()) std::abort();
  return state;
}

}  // namespace
}  // namespace psflow

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psflow;
  static std::unique_ptr<PsState> async_state = ReadyState(false);
  static std::unique_ptr<PsState> sync_state = ReadyState(true);
  if (size < 1) return 0;
  // First byte: bit 0 picks the state, bit 1 push or pull, the high bits where to cut slices.
  const uint8_t mode = data[0];
  const auto* frame = reinterpret_cast<const std::byte*>(data + 1);
  const size_t n = size - 1;
  std::vector<std::span<const std::byte>> pieces;
  const size_t cut = n == 0 ? 0 : (mode >> 2) % (n + 1);
  pieces.emplace_back(frame, cut);
  pieces.emplace_back(frame + cut, n - cut);
  PsState& state = (mode & 1) ? *sync_state : *async_state;
  ByteSource source(std::move(pieces));
  if (mode & 2) {
    proto::TransferHeader header;
    auto bytes = state.CheckPull(source, &header);
    fuzz::RecordOutcome(bytes.ok());
    if (bytes.ok()) {
      std::vector<std::byte> out(static_cast<size_t>(*bytes));
      state.FillPull(header, out.data());
      if (WireTypeOf(header.wire_dtype()).value_or(WireType::kBfloat16) == WireType::kFloat32) {
        std::vector<std::byte> pinned;
        state.PinPull(header, [&](const VersionedValues::Pin& pin) {
          const auto* first = reinterpret_cast<const std::byte*>(pin.values.data());
          pinned.insert(pinned.end(), first, first + pin.values.size_bytes());
          VersionedValues::Unpin(pin.handle);
        });
        if (pinned != out) std::abort();
      }
    }
  } else {
    fuzz::RecordOutcome(state.Push(source).ok());
  }
  return 0;
}
