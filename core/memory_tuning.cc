#include "core/memory_tuning.h"

#include <malloc.h>

namespace psflow {

void KeepFreedMemoryForReuse() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum on 64-bit
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace psflow
