// psflow: the command-line tool. `psflow run JOB.yaml` runs a TrainingJob locally as processes;
// `psflow validate JOB.yaml` checks a manifest without running it.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "core/command_line.h"
#include "operator/api/training_job.h"
#include "operator/local/export_model.h"
#include "operator/local/runner.h"
#include "operator/local/validate.h"

ABSL_FLAG(std::string, progress, "auto",
          "Progress display: auto (a bar redrawn in place on a terminal, a plain line every "
          "--progress_every_s otherwise), always (the live bar), never");
ABSL_FLAG(int, progress_every_s, 10,
          "Seconds between progress lines when stdout is not a terminal");
ABSL_FLAG(std::string, run_dir, "",
          "Folder for the replicas' logs (<replica>.log each); empty: "
          "psflow-runs/<job>-<YYYYmmdd-HHMMSS> in the working directory");
ABSL_FLAG(bool, verbose, false,
          "Also stream every replica's output to stdout, each line prefixed with its name");
ABSL_FLAG(int, stop_grace_s, 10, "Seconds between SIGTERM and SIGKILL when stopping replicas");
ABSL_FLAG(std::string, prometheus_targets, "",
          "Write a Prometheus file_sd JSON file here listing every replica's /metrics endpoint "
          "(labels job, replica_type, replica_index; emptied when the run ends), for "
          "deploy/prometheus/prometheus-local.yml; empty: none");

ABSL_FLAG(std::string, emulate_network, "",
          "RATE[,DELAY[,LOSS]], e.g. 1gbit, 10gbit,0.2ms or 25gbit,1ms,0.1%: run every replica "
          "in a network namespace of its own, its link shaped so both ways (root and iproute2 "
          "needed; docs/user-guide.md); empty: all on this machine's loopback");

ABSL_FLAG(std::string, model_file, "",
          "export: the model file the checkpoints were trained from (its parameters are checked "
          "against them, and it is written beside the weights)");

namespace {

constexpr char kUsage[] =
    "psflow run [--progress=auto|always|never] [--progress_every_s=N] [--run_dir=DIR]\n"
    "           [--verbose] [--stop_grace_s=N]\n"
    "           [--prometheus_targets=FILE.json | --emulate_network=RATE[,DELAY[,LOSS]]]\n"
    "           JOB.yaml                                   run a TrainingJob locally\n"
    "psflow validate JOB.yaml | MODEL.yaml                check a TrainingJob manifest (and the\n"
    "                                                      model files it names) or a model file\n"
    "psflow export --model_file=MODEL.yaml CHECKPOINT_DIR OUT_DIR\n"
    "                                                      the trained model in a job's ps\n"
    "                                                      checkpoints as "
    "OUT_DIR/model.safetensors";

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "psflow: %s\n", message.c_str());
  return code;
}

// Puts the directory of this executable first in $PATH, so manifests can name the sibling
// binaries (psflow-ps, psflow-worker) as they would in a container image, and their flags are
// checked by the binaries of this psflow.
void PrependOwnDirToPath() {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return;
  std::string dir(self, static_cast<size_t>(n));
  dir.erase(dir.rfind('/'));
  const char* path = std::getenv("PATH");
  setenv("PATH", absl::StrCat(dir, ":", path ? path : "/usr/bin:/bin").c_str(), 1);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = psflow::ParseFlags(argc, argv, kUsage);
  const std::string command = args.size() > 1 ? args[1] : "";
  if (command == "export" && args.size() == 4) {
    if (absl::GetFlag(FLAGS_model_file).empty()) {
      return Fail(2, "export needs --model_file=FILE, the model the checkpoints are of");
    }
    absl::StatusOr<std::string> done =
        psflow::local::ExportFromCheckpoints(absl::GetFlag(FLAGS_model_file), args[2], args[3]);
    if (!done.ok()) return Fail(2, std::string(done.status().message()));
    std::printf("%s\n", done->c_str());
    return 0;
  }
  if (args.size() != 3 || (command != "run" && command != "validate")) {
    return Fail(2, absl::StrCat("usage:\n", kUsage));
  }
  const std::string path = args[2];
  PrependOwnDirToPath();
  if (command == "validate") {
    absl::StatusOr<std::string> report = psflow::local::Validate(path);
    if (!report.ok()) return Fail(2, std::string(report.status().message()));
    std::fputs(report->c_str(), stdout);
    return 0;
  }
  auto job = psflow::api::LoadTrainingJob(path);
  if (!job.ok()) return Fail(2, std::string(job.status().message()));

  psflow::local::RunOptions options;
  const std::string progress = absl::GetFlag(FLAGS_progress);
  if (progress == "auto") {
    options.progress = psflow::local::RunOptions::Progress::kAuto;
  } else if (progress == "always") {
    options.progress = psflow::local::RunOptions::Progress::kAlways;
  } else if (progress == "never") {
    options.progress = psflow::local::RunOptions::Progress::kNever;
  } else {
    return Fail(2,
                absl::StrCat("--progress must be auto, always or never, got \"", progress, "\""));
  }
  if (absl::GetFlag(FLAGS_progress_every_s) < 1) {
    return Fail(2, absl::StrCat("--progress_every_s must be >= 1, got ",
                                absl::GetFlag(FLAGS_progress_every_s)));
  }
  options.progress_every = std::chrono::seconds(absl::GetFlag(FLAGS_progress_every_s));
  options.run_dir = absl::GetFlag(FLAGS_run_dir);
  options.verbose = absl::GetFlag(FLAGS_verbose);
  if (absl::GetFlag(FLAGS_stop_grace_s) < 0) {
    return Fail(
        2, absl::StrCat("--stop_grace_s must be >= 0, got ", absl::GetFlag(FLAGS_stop_grace_s)));
  }
  options.stop_grace = std::chrono::seconds(absl::GetFlag(FLAGS_stop_grace_s));
  options.prometheus_targets = absl::GetFlag(FLAGS_prometheus_targets);
  if (const std::string spec = absl::GetFlag(FLAGS_emulate_network); !spec.empty()) {
    auto shape = psflow::local::ParseLinkShape(spec);
    if (!shape.ok()) return Fail(2, std::string(shape.status().message()));
    options.emulate_network = *shape;
  }
  auto outcome = psflow::local::RunLocally(*job, options);
  if (!outcome.ok()) return Fail(2, std::string(outcome.status().message()));
  switch (*outcome) {
    case psflow::local::JobOutcome::kSucceeded:
      return 0;
    case psflow::local::JobOutcome::kFailed:
      return 1;
    case psflow::local::JobOutcome::kInterrupted:
      return 130;
  }
  return 1;
}
