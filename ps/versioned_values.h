// One partition's values as versioned blocks, so that a pull reply can send the values
// themselves instead of a copy.
//
// The values are cut into blocks of block_elements (the last one shorter), each a
// reference-counted buffer: the current version. A reply pins the blocks it sends (PinRuns) and
// gRPC unpins them once it has written them out. An update (Update, Write) writes a block in place
// when nothing pins it; a pinned block is copied-on-write: the update's own pass reads the old
// version and writes a fresh buffer (the block's elements outside the update are copied over),
// which becomes current, while the pinned version stays as it was until its last reply unpins it
// and it goes back to the pool. So a pin always shows one version: the values as they were when
// it was taken, never part of a later update.
//
// Memory: the current versions (the partition's size), plus the old versions pinned by replies
// still in flight (at most those replies' payload bytes, which the copying path held in its reply
// buffers instead), plus idle buffers kept for the next copy-on-write: at most one per block, so
// an idle pool never holds more than the partition again. Once the pool holds what the traffic
// needs, updates and pins allocate nothing.
//
// Thread safety: the caller serialises every call (the partition's lock) except Unpin, which any
// thread may call at any time, also after the VersionedValues is gone (a pinned version outlives
// it).
#ifndef PSFLOW_PS_VERSIONED_VALUES_H_
#define PSFLOW_PS_VERSIONED_VALUES_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/functional/function_ref.h"

namespace psflow {

class VersionedValues {
 public:
  // 64 KiB: small enough that the copy-on-write of the block at either end of an update, outside
  // the update's range, costs little; large enough that a 4 MiB reply is 64 slices.
  static constexpr int64_t kDefaultBlockElements = 16 << 10;
  // Update hands out runs of at most this many elements (16 KiB: a copy-on-write's copy of a run
  // is still in L1 when the update reads it).
  static constexpr int64_t kRunElements = 4096;

  // `elements` zeros.
  explicit VersionedValues(int64_t elements, int64_t block_elements = kDefaultBlockElements);
  // Drops the current versions; pinned ones stay valid until unpinned.
  ~VersionedValues();
  VersionedValues(const VersionedValues&) = delete;
  VersionedValues& operator=(const VersionedValues&) = delete;

  int64_t size() const { return elements_; }

  // Copies elements [offset, offset + out.size()) to out.
  void Read(int64_t offset, std::span<float> out) const;
  // Calls fn on the successive runs of elements [offset, offset + count), in order; runs end
  // where blocks end. The spans are valid during the call only.
  void ForEachRun(int64_t offset, int64_t count,
                  absl::FunctionRef<void(std::span<const float>)> fn) const;

  // Overwrites elements [offset, offset + values.size()) with values.
  void Write(int64_t offset, std::span<const float> values);
  // Updates elements [offset, offset + count) in place, in order: fn(run, at) on successive runs
  // of at most kRunElements, run holding elements [at, at + run.size()) at their current values;
  // what fn leaves there becomes the new values. A pinned block is copied on write first (see
  // the top), run by run.
  void Update(int64_t offset, int64_t count,
              absl::FunctionRef<void(std::span<float> run, int64_t at)> fn);

  // A run of current values that stays unchanged until Unpin(handle).
  struct Pin {
    std::span<const float> values;
    void* handle = nullptr;
  };
  // Calls fn on pins of the successive runs of elements [offset, offset + count), in order (one
  // per block touched); each must be unpinned exactly once.
  void PinRuns(int64_t offset, int64_t count, absl::FunctionRef<void(const Pin&)> fn) const;
  // Releases a pin. Any thread; the signature of a C release callback (grpc::Slice's).
  static void Unpin(void* handle);

 private:
  class Pool;
  struct Buffer;
  // Fn(block index, first element in the block, past the last) for each block touching the range.
  template <class Fn>
  void ForEachBlock(int64_t offset, int64_t count, Fn fn) const;
  int64_t BlockSize(size_t block) const;
  // Prepares block's elements [lo, hi) for writing. When the current version is pinned, a fresh
  // one, holding the old values outside [lo, hi), becomes current and the old one is returned:
  // the caller fills [lo, hi) and then drops the block's reference to it (Unpin). Else null.
  Buffer* MakeWritable(size_t block, int64_t lo, int64_t hi);

  int64_t elements_ = 0;
  int64_t block_elements_ = 0;
  std::shared_ptr<Pool> pool_;
  std::vector<Buffer*> blocks_;  // the current versions, one reference each
};

}  // namespace psflow

#endif  // PSFLOW_PS_VERSIONED_VALUES_H_
