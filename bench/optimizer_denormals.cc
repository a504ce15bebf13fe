// Each optimizer's update over one partition (mnist_cnn's 3.3 M parameters by default), with its
// slots at ordinary values and then decayed into the denormal range (a zero gradient, slots at
// 1e-39: what Adam's first moment or a momentum accumulator becomes some 800 steps after a
// parameter's gradient stops). With denormals flushed (core/flush_denormals.h) the two take the
// same time; the last column is the ratio, denormal / ordinary, same process.
//
//   build/bin/bench_optimizer_denormals [--elements=3300000] [--updates=20]
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "core/command_line.h"
#include "core/optimizer.h"

ABSL_FLAG(int64_t, elements, 3300000, "Elements in the partition");
ABSL_FLAG(int, updates, 20, "Timed updates per case");

namespace psflow::bench {
namespace {

// Milliseconds per update of `n` elements, every slot starting at `slot_value`, gradient `grad`.
double MillisPerUpdate(const Optimizer& optimizer, size_t n, float slot_value, float grad,
                       int updates) {
  std::vector<float> var(n, 0.5f), g(n, grad);
  std::vector<std::vector<float>> slots(static_cast<size_t>(optimizer.num_slots()),
                                        std::vector<float>(n, slot_value));
  std::vector<std::span<float>> spans(slots.begin(), slots.end());
  optimizer.Apply(0.01f, 1, var, g, spans);  // warm the pages
  for (auto& slot : slots) std::fill(slot.begin(), slot.end(), slot_value);
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < updates; ++t) {
    // Keep the slots where the case puts them: the decay would otherwise leave the range.
    if (t % 4 == 0) {
      for (auto& slot : slots) std::fill(slot.begin(), slot.end(), slot_value);
    }
    optimizer.Apply(0.01f, t + 2, var, g, spans);
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
             .count() /
         updates;
}

int Main() {
  const auto n = static_cast<size_t>(absl::GetFlag(FLAGS_elements));
  const int updates = absl::GetFlag(FLAGS_updates);
  std::printf("optimizer update of %zu elements, %d updates per case, %d CPU cores\n", n, updates,
              static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  std::printf("%-10s %14s %14s %8s\n", "optimizer", "ordinary ms", "denormal ms", "ratio");
  for (const char* name : {"momentum", "adagrad", "adam", "rmsprop"}) {
    proto::OptimizerConfig config;
    config.set_name(name);
    config.set_learning_rate(0.01f);
    config.set_momentum(0.9f);
    absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(config);
    if (!optimizer.ok()) {
      std::fprintf(stderr, "%s: %s\n", name, optimizer.status().ToString().c_str());
      return 1;
    }
    const double ordinary = MillisPerUpdate(**optimizer, n, 1e-3f, 1e-3f, updates);
    const double denormal = MillisPerUpdate(**optimizer, n, 1e-39f, 0.0f, updates);
    std::printf("%-10s %14.2f %14.2f %8.2f\n", name, ordinary, denormal, denormal / ordinary);
  }
  return 0;
}

}  // namespace
}  // namespace psflow::bench

int main(int argc, char** argv) {
  psflow::ParseFlags(argc, argv, "optimizer updates with ordinary and denormal slot values");
  return psflow::bench::Main();
}
