#include "tests/faults/fault_campaign.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psflow::faults {

CampaignResult RunCampaign(const CampaignOptions& options, std::ostream& out) {
  CampaignResult result;
  TrialOptions job = options.job;
  job.faults.clear();
  job.dir = options.job.dir + "/undisturbed";
  result.baseline = RunTrial(job);
  out << "undisturbed: " << Summarize(result.baseline)
      << " training=" << absl::StrFormat("%.1fs", result.baseline.training_seconds) << std::endl;
  if (!result.baseline.held() || !result.baseline.accuracy) {
    out << "the undisturbed run broke an invariant: no trials (logs: " << result.baseline.run_dir
        << ")" << std::endl;
    return result;
  }
  if (!options.keep) std::filesystem::remove_all(job.dir);

  PlanOptions plan;
  plan.ps = job.ps;
  plan.workers = job.workers;
  plan.faults = options.faults_per_trial;
  plan.window = options.window.count() > 0
                    ? options.window
                    : std::chrono::milliseconds(static_cast<int64_t>(
                          1e3 * options.window_fraction * result.baseline.training_seconds));
  job.steps_per_second = options.steps_per_second;
  if (job.steps_per_second <= 0 && result.baseline.training_seconds > 0) {
    job.steps_per_second =
        static_cast<double>(result.baseline.global_step) / result.baseline.training_seconds;
  }
  out << "faults within " << plan.window.count() << " ms of the start of training"
      << absl::StrFormat(", paced at %.1f global steps/s", job.steps_per_second) << std::endl;
  job.baseline_accuracy = result.baseline.accuracy;

  auto record = [&](uint64_t seed, TrialReport report, const std::string& label) {
    out << label << ": " << Summarize(report) << std::endl;
    if (!report.held()) out << "    logs: " << report.run_dir << std::endl;
    if (report.held() && !options.keep) std::filesystem::remove_all(job.dir);
    result.injected += static_cast<int>(report.injected.size());
    result.skipped += static_cast<int>(report.skipped.size());
    result.held += report.held() ? 1 : 0;
    for (const auto& [kind, n] : report.injected_by) result.injected_by[kind] += n;
    result.seeds.push_back(seed);
    result.trials.push_back(std::move(report));
  };
  for (int t = 0; t < options.trials; ++t) {
    const uint64_t seed = options.first_seed + static_cast<uint64_t>(t);
    job.dir = absl::StrCat(options.job.dir, "/seed-", seed);
    job.faults = MakeFaultPlan(seed, plan);
    record(seed, RunTrial(job), absl::StrCat("seed ", seed));
  }
  if (options.partition.count() > 0) {
    job.dir = options.job.dir + "/partition";
    job.emulate_network = "10gbit";
    job.faults = {Fault{FaultKind::kPartition, "ps-0", std::chrono::seconds(2),
                        std::chrono::duration_cast<std::chrono::milliseconds>(options.partition)}};
    record(0, RunTrial(job), "partition");
  }

  out << absl::StrFormat("trials=%d held=%d broken=%d faults_injected=%d skipped=%d",
                         result.trials.size(), result.held, result.trials.size() - result.held,
                         result.injected, result.skipped);
  for (const auto& [kind, n] : result.injected_by) out << " [" << kind << "]=" << n;
  out << std::endl;
  for (size_t i = 0; i < result.trials.size(); ++i) {
    if (!result.trials[i].held()) {
      out << "broken: "
          << (result.seeds[i] == 0 ? std::string("partition")
                                   : absl::StrCat("seed ", result.seeds[i]))
          << std::endl;
    }
  }
  return result;
}

}  // namespace psflow::faults
