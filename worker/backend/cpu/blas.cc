#include "worker/backend/cpu/blas.h"

#include <cblas.h>  // the functions' types only: the library is loaded with dlopen
#include <dlfcn.h>
#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "absl/strings/str_cat.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#ifndef PSFLOW_OPENBLAS_LIBRARY
#error "PSFLOW_OPENBLAS_LIBRARY: the OpenBLAS library's path, found at configure time"
#endif

namespace psflow::cpu::blas {
namespace {

struct Library {
  absl::Status status;
  std::string describe;
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&cblas_saxpy) saxpy = nullptr;
  decltype(&openblas_get_corename) get_corename = nullptr;
};

Library& TheLibrary() {
  static Library library;
  return library;
}

#if defined(__x86_64__)
// XCR0: the register states the OS saves (bits 1-2: SSE/AVX, 5-7: AVX-512).
uint64_t EnabledStates() {
  uint32_t eax = 0, edx = 0;
  __asm__("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}
#endif

template <class F>
bool Resolve(void* handle, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  return *out != nullptr;
}

std::string FeatureNames(const CpuFeatures& cpu) {
  if (cpu.avx512) return "AVX-512";
  return cpu.avx2_fma ? "AVX2+FMA" : "no AVX2";
}

absl::Status Open(const std::string& core_type, Library& lib) {
  const char* user_choice = getenv("OPENBLAS_CORETYPE");
  std::string chosen_by;
  bool set_here = false;
  if (void* loaded = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD); loaded != nullptr) {
    // Linked into this program (cuda_backend_test is, so that tools which follow ldd carry the
    // library): it chose its kernels when the program started.
    dlclose(loaded);
    chosen_by = "loaded before psflow could choose";
  } else if (user_choice != nullptr && *user_choice != '\0') {
    chosen_by = "OPENBLAS_CORETYPE";
  } else if (!core_type.empty()) {
    // OpenBLAS reads the variable in its constructor, when dlopen runs it.
    setenv("OPENBLAS_CORETYPE", core_type.c_str(), 1);
    set_here = true;
    chosen_by = absl::StrCat("chosen from CPUID: ", FeatureNames(DetectCpu()));
  } else {
    chosen_by = "OpenBLAS's own choice";
  }
  void* handle = nullptr;
  std::string errors;
  for (const char* name : {"libopenblas.so.0", PSFLOW_OPENBLAS_LIBRARY}) {
    handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", dlerror());
  }
  if (set_here) unsetenv("OPENBLAS_CORETYPE");
  if (handle == nullptr) {
    return absl::InternalError(absl::StrCat(
        "cannot load OpenBLAS for the CPU backend (install Debian's libopenblas0): ", errors));
  }
  decltype(&openblas_get_config) get_config = nullptr;
  decltype(&openblas_set_num_threads) set_num_threads = nullptr;
  if (!Resolve(handle, "cblas_sgemm", &lib.sgemm) || !Resolve(handle, "cblas_saxpy", &lib.saxpy) ||
      !Resolve(handle, "openblas_set_num_threads", &set_num_threads) ||
      !Resolve(handle, "openblas_get_corename", &lib.get_corename) ||
      !Resolve(handle, "openblas_get_config", &get_config)) {
    return absl::InternalError(
        absl::StrCat("the OpenBLAS library lacks a function psflow calls: ", dlerror()));
  }
  set_num_threads(1);  // blas.h: the backend's pool splits the products
  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": its first two words.
  std::string version = get_config();
  const size_t second_space = version.find(' ', version.find(' ') + 1);
  if (second_space != std::string::npos) version.resize(second_space);
  lib.describe = absl::StrCat(version, ", ", lib.get_corename(), " kernels (", chosen_by, ")");
  return absl::OkStatus();
}

}  // namespace

CpuFeatures DetectCpu() {
  CpuFeatures cpu;
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return cpu;
  const unsigned max_leaf = eax;
  cpu.amd = ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163;  // "AuthenticAMD"
  if (max_leaf < 7 || __get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return cpu;
  const bool fma = (ecx & bit_FMA) != 0, osxsave = (ecx & bit_OSXSAVE) != 0;
  if (!osxsave) return cpu;
  const uint64_t states = EnabledStates();
  const bool ymm = (states & 0x6) == 0x6, zmm = (states & 0xe6) == 0xe6;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  cpu.avx2_fma = ymm && fma && (ebx & bit_AVX2) != 0;
  const unsigned avx512 = bit_AVX512F | bit_AVX512CD | bit_AVX512BW | bit_AVX512DQ | bit_AVX512VL;
  cpu.avx512 = cpu.avx2_fma && zmm && (ebx & avx512) == avx512;
#endif  // other CPUs: no features, OpenBLAS chooses
  return cpu;
}

std::string CoreTypeFor(const CpuFeatures& cpu) {
  if (cpu.avx512) return "SkylakeX";
  if (cpu.avx2_fma) return cpu.amd ? "Zen" : "Haswell";
  return "";
}

absl::Status Load(const std::string& core_type) {
  static std::once_flag once;
  std::call_once(once, [&] {
    Library& lib = TheLibrary();
    lib.status = Open(core_type, lib);
  });
  return TheLibrary().status;
}

absl::Status LoadForThisCpu() { return Load(CoreTypeFor(DetectCpu())); }

namespace {

// The library, loaded for this CPU if nobody has loaded it: a layer made without a backend (the
// layer tests) computes before anyone called Load.
const Library& Loaded() {
  static const Library& library = []() -> const Library& {
    if (absl::Status loaded = LoadForThisCpu(); !loaded.ok()) {
      std::fprintf(stderr, "psflow: %s\n", std::string(loaded.message()).c_str());
      std::exit(1);
    }
    return TheLibrary();
  }();
  return library;
}

}  // namespace

std::string Describe() { return Loaded().describe; }

std::string CoreName() { return Loaded().get_corename(); }

void Gemm(Op op_a, Op op_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  Loaded().sgemm(CblasRowMajor, op_a == kTrans ? CblasTrans : CblasNoTrans,
                 op_b == kTrans ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta,
                 c, ldc);
}

void Axpy(int n, float alpha, const float* x, float* y) { Loaded().saxpy(n, alpha, x, 1, y, 1); }

}  // namespace psflow::cpu::blas
