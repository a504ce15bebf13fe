// One fault-injection trial: a bounded `psflow run` job (mnist_mlp on Fashion-MNIST, a chief,
// `workers` workers, `ps` checkpointing ps tasks, every replica restartPolicy OnFailure), the
// faults of a plan (fault_plan.h) carried out against its real processes, and the invariants
// checked while it runs and after it ends:
//  1. the job Succeeded (psflow run exited 0 and said so);
//  2. the trained model's test accuracy (that of the trainer that finished last, at the highest
//     global step) is within `accuracy_tolerance` of `baseline_accuracy` (when set);
//  3. every restart of a ps task restored exactly the newest valid checkpoint its folder held once
//     the killed process was dead (none: no restore; a restart stopped at the job's end before
//     it restored or served is not held to it), a ps restarted only when killed, and no ps
//     task's global step ever went back by more than one checkpoint interval plus
//     `rollback_slack` steps, as scraped from its /metrics every 100 ms (loopback runs) and as its
//     log tells it (checkpoint, restore and stop lines, every run);
//  4. every checkpoint file seen, during the run and after it, reads back valid with the
//     product's reader (ps/checkpoint.h) and holds the step its name says;
//  5. no process of the job is left once psflow run has exited.
//
// Replicas are found by a tag: psflow run gets PSFLOW_FAULT_TRIAL=<tag> in its environment, which
// every replica inherits; /proc/<pid>/environ then names each process's job, replica type and
// index (PSFLOW_REPLICA_TYPE/INDEX), and its metrics port. Needs the built psflow, psflow-ps and
// psflow-worker (tests/test_util.h) and the Fashion-MNIST package; a partition needs root.
#ifndef PSFLOW_TESTS_FAULTS_FAULT_TRIAL_H_
#define PSFLOW_TESTS_FAULTS_FAULT_TRIAL_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/faults/fault_plan.h"

namespace psflow::faults {

struct TrialOptions {
  std::string dir;  // this trial's folder: emptied, then the manifest, run folder, checkpoints
  std::string name = "faults";  // the job's name (a DNS label)
  int ps = 1;
  int workers = 2;             // besides the chief
  int64_t train_steps = 1200;  // each trainer's; a restarted trainer runs them all again
  float learning_rate = 0.2f;
  int64_t checkpoint_every_steps = 100;
  // Beyond the checkpoint interval, the steps a restored ps may have lost: those made while the
  // ps's checkpoint thread woke at the interval's step and wrote the file (17-22 steps measured
  // on two quiet cores at ~800 steps/s; the margin is for a loaded machine).
  int64_t rollback_slack = 100;
  std::vector<Fault> faults;
  // When positive (loopback runs, whose ps metrics can be scraped), a fault at `at` fires once
  // the ps tasks' highest global step reaches at x steps_per_second, the step an undisturbed run
  // had reached by then, rather than `at` after training started: a machine faster or slower
  // than during the undisturbed run (other work beside it) moves the clock, not the point in
  // training the fault hits. Zero: by the clock.
  double steps_per_second = 0;
  std::string emulate_network;  // psflow run --emulate_network (e.g. "10gbit"); empty: loopback
  std::chrono::seconds timeout{180};
  std::optional<double> baseline_accuracy;
  double accuracy_tolerance = 0.05;
};

struct TrialReport {
  bool succeeded = false;
  double seconds = 0;                      // psflow run's wall time
  double training_seconds = 0;             // from the ps's initialisation to the end
  std::vector<std::string> injected;       // Describe() of each fault carried out
  std::vector<std::string> skipped;        // a fault whose target was not running, and why
  std::map<std::string, int> injected_by;  // "kill ps", "pause worker", ... -> count
  std::optional<double> accuracy;          // the chief's test_accuracy
  int64_t max_rollback = 0;                // the largest fall of a ps's global step seen
  int64_t global_step = 0;                 // the highest any ps task's /metrics showed
  int64_t allowed_rollback = 0;
  int checkpoints_read = 0;
  int temp_files = 0;  // a checkpoint writer's temporary files left behind (killed mid-write)
  std::vector<std::string> broken;  // one line per invariant broken
  std::string output;               // psflow run's stdout and stderr
  std::string run_dir;              // the replicas' logs
  bool held() const { return broken.empty(); }
};

TrialReport RunTrial(const TrialOptions& options);

// One line: outcome, figures and the faults, e.g. "HELD Succeeded 14.2s acc=0.8120 ...".
std::string Summarize(const TrialReport& report);

}  // namespace psflow::faults

#endif  // PSFLOW_TESTS_FAULTS_FAULT_TRIAL_H_
