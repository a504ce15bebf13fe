// psflow_fault_runner: the long fault-injection campaign (docs/operations.md, "Fault injection").
// Runs an undisturbed job, then --trials seeded trials of the same job with --faults each (SIGKILL
// of a ps task, the chief or a worker; SIGSTOP/SIGCONT of any replica), and with --partition_s a
// trial whose ps-0 is cut off from the other replicas that long; prints each trial's invariants
// and the totals. Exit status 0 when every trial held every invariant, 1 otherwise.
#include <unistd.h>

#include <iostream>

#include "absl/flags/flag.h"
#include "core/command_line.h"
#include "tests/faults/fault_campaign.h"

ABSL_FLAG(int, trials, 20, "Seeded trials (seeds --seed .. --seed + trials - 1)");
ABSL_FLAG(uint64_t, seed, 1, "The first trial's seed; --seed=S --trials=1 replays trial S");
ABSL_FLAG(int, faults, 2, "Faults per trial");
ABSL_FLAG(int, ps, 1, "ps tasks");
ABSL_FLAG(int, workers, 2, "Workers besides the chief");
ABSL_FLAG(int64_t, train_steps, 1200, "Steps of each trainer");
ABSL_FLAG(int64_t, checkpoint_every_steps, 100, "The ps tasks' --checkpoint_every_steps");
ABSL_FLAG(int64_t, rollback_slack, 100,
          "Steps a restored ps may lose beyond one checkpoint interval");
ABSL_FLAG(double, accuracy_tolerance, 0.05,
          "Largest difference of the trained model's test accuracy (the trainer that finished "
          "last) from the undisturbed run's");
ABSL_FLAG(int, partition_s, 0,
          "Seconds of one more trial's partition of ps-0 (0: none; needs root)");
ABSL_FLAG(int, window_ms, 0,
          "Faults fall within this many ms after training starts (0: within 70% of the "
          "undisturbed run's training time); give the printed window and pace (--steps_per_s) to "
          "replay a seed exactly");
ABSL_FLAG(double, steps_per_s, 0,
          "A fault at t fires once the global step reaches t x this (0: the undisturbed run's "
          "global steps per second of training); with --window_ms, replays a seed exactly");
ABSL_FLAG(int, timeout_s, 240, "A trial's limit (psflow run is killed after it)");
ABSL_FLAG(std::string, dir, "", "The campaign's folder (default: /tmp/psflow-faults-<pid>)");
ABSL_FLAG(bool, keep, false, "Keep every trial's folder (a broken trial's is always kept)");

int main(int argc, char** argv) {
  psflow::ParseFlags(argc, argv,
                     "seeded fault injection against psflow run, with invariants checked after "
                     "every trial (docs/operations.md)");
  psflow::faults::CampaignOptions o;
  o.job.dir = absl::GetFlag(FLAGS_dir);
  if (o.job.dir.empty()) o.job.dir = "/tmp/psflow-faults-" + std::to_string(getpid());
  o.job.ps = absl::GetFlag(FLAGS_ps);
  o.job.workers = absl::GetFlag(FLAGS_workers);
  o.job.train_steps = absl::GetFlag(FLAGS_train_steps);
  o.job.checkpoint_every_steps = absl::GetFlag(FLAGS_checkpoint_every_steps);
  o.job.rollback_slack = absl::GetFlag(FLAGS_rollback_slack);
  o.job.accuracy_tolerance = absl::GetFlag(FLAGS_accuracy_tolerance);
  o.job.timeout = std::chrono::seconds(absl::GetFlag(FLAGS_timeout_s));
  o.first_seed = absl::GetFlag(FLAGS_seed);
  o.trials = absl::GetFlag(FLAGS_trials);
  o.faults_per_trial = absl::GetFlag(FLAGS_faults);
  o.partition = std::chrono::seconds(absl::GetFlag(FLAGS_partition_s));
  o.keep = absl::GetFlag(FLAGS_keep);
  o.window = std::chrono::milliseconds(absl::GetFlag(FLAGS_window_ms));
  o.steps_per_second = absl::GetFlag(FLAGS_steps_per_s);
  std::cout << "fault campaign in " << o.job.dir << std::endl;
  const psflow::faults::CampaignResult r = psflow::faults::RunCampaign(o, std::cout);
  const bool all_held = r.baseline.held() && r.held == static_cast<int>(r.trials.size());
  return all_held ? 0 : 1;
}
