// libFuzzer target: arbitrary bytes as a bulk Push or Pull frame to a ready ps task (async and
// sync), split into arbitrary slices as gRPC may deliver them. A ps must answer every input with
// a reply or an error status: never crash, hang, read out of bounds or allocate without bound.
// Built and run by scripts/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
//
// With $PSFLOW_FUZZ_SEEDS=<dir> set, the target writes a few valid frames there first (the seed
// corpus) and exits.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/byte_source.h"
#include "core/frame.h"
#include "ps/ps_state.h"

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

std::string Frame(const proto::TransferHeader& h, size_t floats) {
  std::string f = EncodeFrameHeader(h);
  f.append(floats * 4, '\0');
  return f;
}

void WriteSeeds(const std::string& dir) {
  proto::TransferHeader h;
  h.set_kind(proto::TK_GRADIENT);
  h.set_fingerprint(kFingerprint);
  h.set_wire_dtype(proto::DT_FLOAT32);
  h.set_num_chunks(1);
  auto* s0 = h.add_segments();
  s0->set_partition(0);
  s0->set_count(16);
  auto* s1 = h.add_segments();
  s1->set_partition(1);
  s1->set_offset(1);
  s1->set_count(3);
  std::ofstream(dir + "/push_dense", std::ios::binary) << '\x00' << Frame(h, 19);
  proto::TransferHeader sparse = h;
  sparse.clear_segments();
  auto* rows = sparse.add_segments();
  rows->set_partition(0);
  rows->add_rows(3);
  rows->add_rows(0);
  rows->set_count(8);
  std::ofstream(dir + "/push_sparse", std::ios::binary) << '\x01' << Frame(sparse, 8);
  proto::TransferHeader pull = h;
  pull.set_kind(proto::TK_PULL);
  std::ofstream(dir + "/pull", std::ios::binary) << '\x02' << Frame(pull, 0);
}

}  // namespace
}  // namespace psflow

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("PSFLOW_FUZZ_SEEDS")) {
    psflow::WriteSeeds(dir);
    std::exit(0);
  }
  return 0;
}

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
    if (bytes.ok()) {
      std::vector<std::byte> out(static_cast<size_t>(*bytes));
      state.FillPull(header, out.data());
    }
  } else {
    (void)state.Push(source);
  }
  return 0;
}
