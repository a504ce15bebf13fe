// How a ps task's partitions travel: as chunks of at most kChunkBytes, one bulk call each,
// planned identically by every worker and the ps.
#ifndef PSFLOW_CORE_CHUNK_PLAN_H_
#define PSFLOW_CORE_CHUNK_PLAN_H_

#include <cstdint>
#include <span>
#include <vector>

#include "core/frame.h"

namespace psflow {

// Payload bytes per bulk call: every model is moved as chunks of at most this many bytes, each
// its own call, several in flight. One constant (not a flag) so every worker splits a push the
// same way.
inline constexpr int64_t kChunkBytes = 4 << 20;
// gRPC's receive limit for bulk calls: a chunk plus its header, with room to spare.
inline constexpr int kMaxBulkMessageBytes =
    2 * kChunkBytes + static_cast<int>(kMaxFrameHeaderBytes);

// A run of one partition's elements inside a chunk.
struct SegmentRange {
  uint32_t partition = 0;
  int64_t offset = 0;
  int64_t count = 0;
  bool operator==(const SegmentRange&) const = default;
};

// Splits a task's partitions (given by element counts, in task order) into chunks of at most
// chunk_bytes / 4 elements: partitions packed in order, a partition larger than the room left
// split across chunks. Deterministic: every worker and the ps compute the same chunks.
std::vector<std::vector<SegmentRange>> PlanChunks(std::span<const int64_t> partition_elements,
                                                  int64_t chunk_bytes = kChunkBytes);

}  // namespace psflow

#endif  // PSFLOW_CORE_CHUNK_PLAN_H_
