// What a benchmark prints about the CPU it ran on (the machines' CPUs change between sessions).
#ifndef PSFLOW_BENCH_CPU_MODEL_H_
#define PSFLOW_BENCH_CPU_MODEL_H_

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace psflow::bench {

// /proc/cpuinfo's first "model name", or "an unnamed CPU".
inline std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (absl::StartsWith(line, "model name")) {
      return std::string(absl::StripAsciiWhitespace(line.substr(line.find(':') + 1)));
    }
  }
  return "an unnamed CPU";
}

}  // namespace psflow::bench

#endif  // PSFLOW_BENCH_CPU_MODEL_H_
