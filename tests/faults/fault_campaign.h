// A campaign of seeded fault-injection trials (fault_trial.h) of one job: first an undisturbed
// run, whose test accuracy is the baseline and whose training time bounds when faults fall, then
// one trial per seed, each printed as it ends, then the totals. Shared by the CI test and the
// longer runner (fault_runner.cc).
#ifndef PSFLOW_TESTS_FAULTS_FAULT_CAMPAIGN_H_
#define PSFLOW_TESTS_FAULTS_FAULT_CAMPAIGN_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "tests/faults/fault_trial.h"

namespace psflow::faults {

struct CampaignOptions {
  TrialOptions job;  // dir: the campaign's folder (a subfolder per trial); faults ignored
  uint64_t first_seed = 1;
  int trials = 3;  // seeds first_seed .. first_seed + trials - 1
  int faults_per_trial = 2;
  // Faults fall within `window` after training starts; zero: within `window_fraction` of the
  // undisturbed run's training time (so they land in training on a fast or a slow machine; a
  // seed then replays the same faults in the same order at times scaled to that machine).
  std::chrono::milliseconds window{0};
  double window_fraction = 0.7;
  // The faults' pace (TrialOptions::steps_per_second); zero: the undisturbed run's global steps
  // per second of training, so a trial's faults hit where the undisturbed run was at their times.
  double steps_per_second = 0;
  // With a positive value, one more trial: ps-0 partitioned from every replica that long, 2 s
  // into training, under --emulate_network=10gbit (needs root).
  std::chrono::seconds partition{0};
  bool keep = false;  // keep the trials' folders (always kept for a broken trial)
};

struct CampaignResult {
  TrialReport baseline;
  std::vector<uint64_t> seeds;  // per trial; the partition trial's is 0
  std::vector<TrialReport> trials;
  std::map<std::string, int> injected_by;  // over all trials
  int injected = 0, skipped = 0, held = 0;
};

// Runs the campaign, writing a line per trial and the totals to `out`. An undisturbed run that
// breaks an invariant ends the campaign there (its trials would compare against nothing).
CampaignResult RunCampaign(const CampaignOptions& options, std::ostream& out);

}  // namespace psflow::faults

#endif  // PSFLOW_TESTS_FAULTS_FAULT_CAMPAIGN_H_
