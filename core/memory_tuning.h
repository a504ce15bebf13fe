// glibc malloc settings for processes that move large tensors (ps, worker, benchmarks).
//
// By default glibc gives memory back to the kernel eagerly: blocks over a (dynamic) threshold are
// mmap'ed fresh and unmapped on free, and free space at the top of a heap is trimmed with
// madvise(MADV_DONTNEED). gRPC allocates its receive buffers per message, so every chunk then
// lands in fresh pages: a page fault per 4 KiB and a TLB shootdown per trim. Profiling
// bench_ps_throughput showed ~30% of its CPU time there. Keeping freed memory (mmap threshold at
// its 32 MiB maximum, trimming only above 1 GiB) lets the next message reuse warm pages.
#ifndef PSFLOW_CORE_MEMORY_TUNING_H_
#define PSFLOW_CORE_MEMORY_TUNING_H_

namespace psflow {

// Call once at start-up, before other threads exist.
void KeepFreedMemoryForReuse();

}  // namespace psflow

#endif  // PSFLOW_CORE_MEMORY_TUNING_H_
