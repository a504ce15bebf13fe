#include "core/chunk_plan.h"

#include <algorithm>

namespace psflow {

std::vector<std::vector<SegmentRange>> PlanChunks(std::span<const int64_t> partition_elements,
                                                  int64_t chunk_bytes) {
  const int64_t per_chunk = std::max<int64_t>(1, chunk_bytes / 4);
  std::vector<std::vector<SegmentRange>> chunks;
  int64_t room = 0;
  for (size_t p = 0; p < partition_elements.size(); ++p) {
    int64_t offset = 0;
    const int64_t n = partition_elements[p];
    do {
      if (room == 0) {
        chunks.emplace_back();
        room = per_chunk;
      }
      const int64_t take = std::min(room, n - offset);
      chunks.back().push_back({static_cast<uint32_t>(p), offset, take});
      offset += take;
      room -= take;
    } while (offset < n);
  }
  return chunks;
}

}  // namespace psflow
