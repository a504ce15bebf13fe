// libFuzzer target: arbitrary bytes as a /metrics answer, read as `psflow run`'s progress line
// and the operator's throughput probe read one (SumSamples over the samples they ask for, plus
// the name on the input's first line). Any input must give a sum or nothing, never a crash; a
// sum is only found for a metric that has a sample line.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"
#include "core/prometheus_text.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

// The samples psflow reads (operator/local/runner.cc, operator/controller/throughput_probe.cc).
constexpr absl::string_view kMetrics[] = {
    "psflow_ps_global_step",     "psflow_worker_steps_total", "psflow_worker_examples_total",
    "psflow_worker_words_total", "psflow_worker_loss",        "psflow_worker_train_steps"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text = psflow::fuzz::AsText(data, size);
  bool any = false;
  const auto sum = [&](absl::string_view metric) {
    const std::optional<double> v = psflow::SumSamples(text, metric);
    // A sample line starts with the metric's name.
    if (v.has_value()) PSFLOW_FUZZ_CHECK(text.find(metric) != text.npos);
    any |= v.has_value();
  };
  for (absl::string_view metric : kMetrics) sum(metric);
  if (const absl::string_view first = text.substr(0, text.find('\n')); !first.empty()) sum(first);
  psflow::fuzz::RecordOutcome(any);
  return 0;
}
