// The partitions one ps task holds: values, optimizer slots and (sync mode) the gradient
// accumulator of each, each partition behind its own mutex so pushes to different partitions
// proceed in parallel (no global lock).
//
// Bulk calls are validated first (CheckSegments: every index, offset, count and row against the
// partitions, the payload size against the segments) and only then applied, so a bad call
// changes nothing. Applying reads the payload straight out of the received slices.
//
// A partition's values are versioned (VersionedValues): a float32 pull sends them without a copy
// (PinOut), and an update of values a reply still sends writes a fresh version instead. Slots and
// accumulators are plain arrays (never sent).
//
// The partition list is fixed by Create (or Restore) before the store is shared; afterwards only
// element values change. Thread-safe after that.
#ifndef PSFLOW_PS_PARTITION_STORE_H_
#define PSFLOW_PS_PARTITION_STORE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/byte_source.h"
#include "core/chunk_plan.h"
#include "core/optimizer.h"
#include "core/wire_type.h"
#include "proto/ps.pb.h"
#include "ps/checkpoint.h"
#include "ps/versioned_values.h"

namespace psflow {

class PartitionStore {
 public:
  // Creates zeroed partitions (slots at their initial values) from the chief's request.
  // INVALID_ARGUMENT naming the partition for an empty list, a bad shape or row range, or a
  // duplicate. `accumulate` allocates the sync-mode gradient accumulators. RESOURCE_EXHAUSTED,
  // naming the bytes needed (values, slots, accumulators) and the bound, when they exceed
  // `max_bytes` (> 0; 0: no bound) or the allocation fails; nothing stays allocated then.
  static absl::StatusOr<std::unique_ptr<PartitionStore>> Create(
      const proto::InitializeRequest& request, const Optimizer& optimizer, bool accumulate,
      int64_t max_bytes = 0, absl::string_view bound = "");

  // Rebuilds the store from a checkpoint written by Snapshot (same request). DATA_LOSS when the
  // checkpoint's tensors do not match the partitions it describes.
  // The bound as Create's.
  static absl::StatusOr<std::unique_ptr<PartitionStore>> Restore(
      const proto::InitializeRequest& request, const Optimizer& optimizer, bool accumulate,
      const Checkpoint& checkpoint, int64_t max_bytes = 0, absl::string_view bound = "");

  int size() const { return static_cast<int>(partitions_.size()); }
  int64_t bytes() const { return bytes_; }
  // Bytes of partition i's values.
  int64_t partition_bytes(int i) const { return partitions_[static_cast<size_t>(i)]->elements * 4; }
  const std::string& partition_name(int i) const {
    return partitions_[static_cast<size_t>(i)]->name;
  }
  // Element counts in partition order (for PlanChunks).
  std::vector<int64_t> partition_elements() const;

  // The segments' total number of elements; INVALID_ARGUMENT naming the partition unless there
  // is a segment and every segment lies inside its partition (dense: offset + count <= elements;
  // sparse: allowed only when `allow_sparse` (gradient pushes and pulls), rows in range,
  // count = rows * row width).
  absl::StatusOr<int64_t> CheckSegments(const proto::TransferHeader& header,
                                        bool allow_sparse) const;

  // The next calls consume the payload of a header that passed CheckSegments.
  // Copies values in (the chief's initial values).
  void Assign(const proto::TransferHeader& header, ByteSource& payload);
  // Async: applies each segment's gradient with the optimizer under the partition's lock.
  void ApplyGradients(const proto::TransferHeader& header, ByteSource& payload,
                      const Optimizer& optimizer, float learning_rate, int64_t step);
  // Async: the same update applied to `snapshot` (what Snapshot returned) instead of the
  // partitions: a checkpoint completing the pushes that were half applied when it was taken.
  // The caller serialises the calls on one snapshot.
  void ApplyGradientsTo(std::vector<CheckpointTensor>& snapshot,
                        const proto::TransferHeader& header, ByteSource& payload,
                        const Optimizer& optimizer, float learning_rate, int64_t step) const;
  // Sync: keeps a copy of each segment's gradients, as the header's worker's, in its partition
  // until that partition is applied. Memory: the pieces of every partition not yet applied in
  // this step, per admitted worker (at most the task's gradient bytes per admitted worker, while
  // the slowest worker's backward runs), plus a row list per sparse piece; applied pieces keep
  // their buffers for the next step's (so the peak stays allocated, and a warm step allocates
  // nothing here).
  void Stage(const proto::TransferHeader& header, ByteSource& payload);
  // Sync: adds the staged pieces of `workers` (in that order) into the partition's accumulator,
  // applies accumulator * scale (to the whole partition when a piece is dense, else only to the
  // rows the sparse pieces name: core/optimizer.h's rule for sparse gradients), zeroes it and
  // discards every staged piece of the partition
  // (those of workers not listed: a worker that left mid-push, or a stale leftover) under the
  // partition's lock. Exact: a piece not listed never touches the values.
  void ApplyStaged(uint32_t partition, std::span<const int> workers, float scale,
                   const Optimizer& optimizer, float learning_rate, int64_t step);
  // Sync: discards every staged piece of `workers` (their pushes were given up) in every
  // partition, keeping the buffers for later pieces.
  void DropStaged(std::span<const int> workers);

  // Copies the segments' current values to out, back to back, in the header's wire type (a sparse
  // segment: its rows' values, in the order of its row list); each partition's part is read under
  // its lock, so it is never torn by a concurrent update.
  void CopyOut(const proto::TransferHeader& header, std::byte* out) const;
  // The same values as float32 without a copy: fn gets pins of them in the order CopyOut would
  // write them (one or more per segment). Each partition's part is pinned under its lock, so it
  // holds one version, untouched by later updates (they copy on write). The caller releases each
  // pin once with VersionedValues::Unpin(pin.handle), on any thread, also after the store is gone.
  void PinOut(const proto::TransferHeader& header,
              absl::FunctionRef<void(const VersionedValues::Pin&)> fn) const;

  // Values and slots, for a checkpoint (tensor names "<partition>" and "<partition>/<slot>").
  std::vector<CheckpointTensor> Snapshot(const Optimizer& optimizer) const;

 private:
  struct Partition {
    std::string name;  // "<variable>/part_<i>_of_<n>" or the variable's name when whole
    int64_t rows = 0;
    int64_t row_elements = 0;
    int64_t elements = 0;
    std::vector<int64_t> shape;  // the partition's own shape
    // Everything above is fixed at Create or Restore; what follows is read and written under mu
    // once the store is shared (Create and Restore fill it before).
    mutable std::mutex mu;
    std::unique_ptr<VersionedValues> value ABSL_PT_GUARDED_BY(mu);
    std::vector<std::vector<float>> slots ABSL_GUARDED_BY(mu);
    std::vector<float> accumulator ABSL_GUARDED_BY(mu);  // sync mode only
    // Sync: a gradient piece staged until the partition is applied (Stage).
    struct Piece {
      int worker = 0;
      int64_t offset = 0;         // dense
      std::vector<int64_t> rows;  // sparse (then offset unused)
      std::vector<float> values;
    };
    std::vector<Piece> staged ABSL_GUARDED_BY(mu);
    std::vector<Piece> spare ABSL_GUARDED_BY(mu);      // applied pieces, kept for the next Stage
    std::vector<int64_t> touched ABSL_GUARDED_BY(mu);  // ApplyStaged's rows (kept: no allocation)
  };
  // Where an update goes: a partition's values and slots, or a snapshot's copies of them.
  struct Target {
    VersionedValues* values = nullptr;  // a partition's
    float* flat = nullptr;              // or else a snapshot's copy
    absl::InlinedVector<float*, 3> slots;
    absl::InlinedVector<std::span<float>, 3> SlotSpans(int64_t offset, int64_t count) const;
    // Updates elements [offset, offset + count) of the values (VersionedValues::Update's runs).
    void Update(int64_t offset, int64_t count,
                absl::FunctionRef<void(std::span<float> run, int64_t at)> fn) const;
  };
  static Target TargetOf(Partition& p);
  // A validated segment's element ranges of its partition, in payload order: the dense range, or
  // the rows (consecutive ascending rows as one range). None for an empty segment.
  static void ForEachRange(const Partition& p, const proto::Segment& s,
                           absl::FunctionRef<void(int64_t offset, int64_t count)> fn);
  // Applies one validated segment's gradients (the payload's next elements) to `target`.
  static void ApplySegment(const Partition& p, const proto::Segment& s, ByteSource& payload,
                           WireType type, const Optimizer& optimizer, float learning_rate,
                           int64_t step, const Target& target);
  PartitionStore() = default;

  std::vector<std::unique_ptr<Partition>> partitions_;
  int64_t bytes_ = 0;
};

}  // namespace psflow

#endif  // PSFLOW_PS_PARTITION_STORE_H_
