// The table `psflow run` prints when a job ends: one row per replica with how it ended and what
// it did, read from the lines it logged:
//   - a worker's final "worker 0 done: steps=... examples_per_sec=... pull_ms=... compute_ms=...
//     push_ms=... input_wait_ms=... [words_per_sec=...] [test_accuracy=...|test_perplexity=...|
//     train_perplexity=...]" line (worker/main.cc);
//   - an evaluator's "evaluator 0: global_step=N test_accuracy=..." (worker/evaluator.cc), the last
//     one;
//   - a ps's "ps task 0 stopped: global_step=N" (ps/main.cc).
#ifndef PSFLOW_OPERATOR_LOCAL_RUN_SUMMARY_H_
#define PSFLOW_OPERATOR_LOCAL_RUN_SUMMARY_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace psflow::local {

struct ReplicaReport {
  std::string name;  // "worker-0"
  // How it ended: "exit 0", "signal 9", "stopped" (StoppedExit); "running" if not yet.
  std::string exit;
  int restarts = 0;
  // From a worker's done: line (per step, in milliseconds, where named so).
  std::optional<double> steps, examples_per_sec, words_per_sec;
  std::optional<double> compute_ms, push_ms, pull_ms, wait_ms;
  // Evaluation figures (a worker's final ones, an evaluator's latest).
  std::optional<double> test_accuracy, test_perplexity, train_perplexity;
  std::optional<double> evaluated_step;  // an evaluator's: the global step it evaluated
  std::optional<double> ps_global_step;  // a ps's final global step
  std::optional<double> global_step;     // a worker's done: line: the global step it ended at
};

// How a replica that `psflow run` stopped (SIGTERM, then SIGKILL after the grace) ended, for
// ReplicaReport::exit: "stopped" where it ended as a stop should (exit code 0 or 143, or by the
// SIGTERM itself: a ps, a worker and an evaluator respectively), "stopped, exit N" or "stopped,
// signal N" otherwise (killed after the grace: signal 9). Pure.
std::string StoppedExit(int exit_code, int signal);

// The number after " key=" in `line` (or at its start); nullopt when absent or not a number.
std::optional<double> LineField(absl::string_view line, absl::string_view key);

// Takes what `line` (one line of the replica's output) says into `report`; lines that carry none
// of the figures above leave it as it was. Later lines win. True when `line` is a worker's final
// done: line (its training is over).
bool ObserveLogLine(absl::string_view line, ReplicaReport& report);

// The table, columns aligned, one row per report in order, "-" where a figure is absent; the exit
// says "(N restarts)" after it when there were any:
//   replica   exit              steps  examples/s  compute ms  push ms  pull ms  wait ms evaluation
// The rate column is words/s when any replica reports words_per_sec; the evaluation is the test
// accuracy, else the test perplexity, else the training perplexity ("at step N" for an
// evaluator's), and a ps's final global step. `ansi`: the header in bold
// (only for a terminal). Ends with a newline.
std::string FormatSummaryTable(const std::vector<ReplicaReport>& reports, bool ansi);

}  // namespace psflow::local

#endif  // PSFLOW_OPERATOR_LOCAL_RUN_SUMMARY_H_
