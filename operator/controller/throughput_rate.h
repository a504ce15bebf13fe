// A TrainingJob's throughput from successive scrapes of its workers' counters
// (psflow_worker_examples_total, psflow_worker_words_total), computed as Prometheus's rate()
// would: per pod, the counter's increase over the time between that pod's last two samples; a
// decrease is a counter reset (the container restarted), so the increase is the new value.
//
// Not thread-safe: one ThroughputRate per job, used by the probe's thread only.
#ifndef PSFLOW_OPERATOR_CONTROLLER_THROUGHPUT_RATE_H_
#define PSFLOW_OPERATOR_CONTROLLER_THROUGHPUT_RATE_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace psflow::controller {

// What status.throughput shows: per second, summed over the job's workers (and chief).
struct Throughput {
  std::optional<double> words_per_second;  // language models only
  std::optional<double> examples_per_second;
  bool operator==(const Throughput&) const = default;
};

// One scrape of one pod.
struct PodCounters {
  std::string pod;  // the series: the pod's uid, so a replaced pod starts a new one
  double examples = 0;
  std::optional<double> words;  // absent when the pod does not export the counter
  absl::Time time;              // when the scrape answered
};

class ThroughputRate {
 public:
  // Folds in one round. `samples`: the pods scraped this round; `targets`: every pod that is
  // still a target (a pod whose scrape failed keeps its previous sample, so its next success
  // covers the longer interval; a pod absent from `targets` is forgotten).
  // Returns the round's rates: examples/s summed over the pods that have two samples (nullopt
  // when none has: the first round, or every scrape failed); words/s likewise, but nullopt
  // when no pod exports words or their total increase is zero (not a language model).
  Throughput Update(const std::vector<PodCounters>& samples, const std::set<std::string>& targets);

 private:
  std::map<std::string, PodCounters> last_;  // pod -> its previous sample
};

// True when `b` differs from `a` in which fields are present, or a present value by more than
// `fraction` of the old one (any change from 0).
bool ThroughputChanged(const std::optional<Throughput>& a, const std::optional<Throughput>& b,
                       double fraction);

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_THROUGHPUT_RATE_H_
