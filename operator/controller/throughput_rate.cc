#include "operator/controller/throughput_rate.h"

#include <cmath>

namespace psflow::controller {
namespace {

// Prometheus's counter semantics: a counter only goes up; a lower value means it restarted
// from 0, and everything it counted since is the increase.
double Increase(double previous, double current) {
  return current >= previous ? current - previous : current;
}

bool ValueChanged(const std::optional<double>& a, const std::optional<double>& b, double fraction) {
  if (a.has_value() != b.has_value()) return true;
  if (!a) return false;
  return std::fabs(*b - *a) > fraction * std::fabs(*a) || (*a == 0 && *b != 0);
}

}  // namespace

Throughput ThroughputRate::Update(const std::vector<PodCounters>& samples,
                                  const std::set<std::string>& targets) {
  for (auto it = last_.begin(); it != last_.end();) {
    it = targets.count(it->first) ? std::next(it) : last_.erase(it);
  }
  bool measured = false;
  double examples_per_second = 0;
  double words_per_second = 0;
  double words_increase = 0;
  for (const PodCounters& sample : samples) {
    auto it = last_.find(sample.pod);
    if (it != last_.end() && sample.time > it->second.time) {
      const PodCounters& previous = it->second;
      const double seconds = absl::ToDoubleSeconds(sample.time - previous.time);
      measured = true;
      examples_per_second += Increase(previous.examples, sample.examples) / seconds;
      if (sample.words && previous.words) {
        const double increase = Increase(*previous.words, *sample.words);
        words_increase += increase;
        words_per_second += increase / seconds;
      }
    }
    if (it == last_.end() || sample.time > it->second.time) last_[sample.pod] = sample;
  }
  Throughput out;
  if (measured) out.examples_per_second = examples_per_second;
  if (words_increase > 0) out.words_per_second = words_per_second;
  return out;
}

bool ThroughputChanged(const std::optional<Throughput>& a, const std::optional<Throughput>& b,
                       double fraction) {
  if (a.has_value() != b.has_value()) return true;
  if (!a) return false;
  return ValueChanged(a->examples_per_second, b->examples_per_second, fraction) ||
         ValueChanged(a->words_per_second, b->words_per_second, fraction);
}

}  // namespace psflow::controller
