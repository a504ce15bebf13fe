// PSFLOW_VECTOR_CLONES: compiles a function for AVX-512, AVX2+FMA and baseline x86-64 and picks the
// clone for the CPU at load time (GCC's target_clones), so a loop GCC vectorises runs at the
// CPU's width while the binary stays runnable on any x86-64. Put it on out-of-line functions
// holding plain loops, in files compiled with -O3 (GCC 12's -O2 barely vectorises).
#ifndef PSFLOW_CORE_VECTOR_CLONES_H_
#define PSFLOW_CORE_VECTOR_CLONES_H_

// Not under TSan: the loader runs the clones' resolvers (ifuncs) before TSan's runtime is set
// up, and the instrumented resolvers crash the program at start-up (ASan builds keep the clones).
// A build that defines it itself (empty, with -march=LEVEL: the tests of each clone's code on any
// CPU, core/CMakeLists.txt) keeps its definition.
#ifndef PSFLOW_VECTOR_CLONES
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define PSFLOW_VECTOR_CLONES \
  __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define PSFLOW_VECTOR_CLONES
#endif
#endif

#endif  // PSFLOW_CORE_VECTOR_CLONES_H_
