// The replicas' own check of what a TrainingJob tells them, before anything runs: for each
// replica type, the psflow program its main container runs (psflow-ps or psflow-worker) is run
// here with --check_config (core/task_main.h), the container's args and the environment a
// replica of that type gets (ReplicaEnvironment, for index 0). So a mistyped flag, a value out of
// range or a contradiction between flags is found by the code that would refuse it at start,
// and said in one line, before `psflow run` starts anything (not after the backoff limit's
// restarts) and by `psflow validate`.
#ifndef PSFLOW_OPERATOR_LOCAL_REPLICA_CHECK_H_
#define PSFLOW_OPERATOR_LOCAL_REPLICA_CHECK_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/cluster_spec.h"
#include "operator/api/training_job.h"

namespace psflow::local {

// The environment of replica (type, index) of `job` run as a local process: `inherited` (the
// runner's own environment), then the main container's env entries with a literal value (those
// from valueFrom are the kubelet's to resolve: not set), then TF_CONFIG (`cluster` for this
// task) and PSFLOW_JOB_NAME, PSFLOW_REPLICA_TYPE and PSFLOW_REPLICA_INDEX, later entries
// winning. Pure.
std::map<std::string, std::string> ReplicaEnvironment(
    const std::map<std::string, std::string>& inherited, const api::TrainingJob& job,
    api::ReplicaType type, int index, const ClusterSpec& cluster);

// This process's environment as a map.
std::map<std::string, std::string> OwnEnvironment();

// The psflow program whose --check_config can check `command` (a container's command): its
// first word's file name when that is psflow-ps or psflow-worker; empty otherwise (a shell, a
// user's script). Pure.
std::string CheckedProgram(const std::vector<std::string>& command);

// The one line a --check_config run printed, from its stdout and stderr together: the first of
// absl's "ERROR: ..." lines (an unknown flag, a value a flag cannot parse) where there is one,
// else the last line, with the "<program>: " prefix removed; "" for no output. Pure.
std::string CheckOutputLine(absl::string_view output, absl::string_view program);

// The values of --model_file (either "--model_file=PATH" or "--model_file PATH") in `args`, in
// order. Pure.
std::vector<std::string> ModelFileArgs(const std::vector<std::string>& args);

struct ReplicaCheck {
  enum class Result { kValid, kInvalid, kNotChecked };
  api::ReplicaType type{};
  std::string program;  // CheckedProgram of its command; empty where it is none
  Result result = Result::kNotChecked;
  // kValid: the program's summary ("valid: worker 0 of ..."); kInvalid: its error; kNotChecked:
  // why not.
  std::string line;
};

struct ReplicaCheckOptions {
  // The environment the replicas inherit (OwnEnvironment); its PATH finds the programs.
  std::map<std::string, std::string> inherited;
  // Folder for spec.modelFile's text while the checks run (given to the replicas other than
  // the ps as --model_file, as the operator's ConfigMap and `psflow run`'s copy are).
  std::string temp_dir;
  std::chrono::milliseconds timeout{60000};  // per check
};

// One check per replica type with replicas, in the job's order of types. Each runs psflow's own
// program of the name the main container's command names (CheckedProgram), found in PATH
// (psflow's own folder first, as `psflow` puts it there; never a path the manifest gives), with
// --check_config, the container's command and args (and --model_file=<spec.modelFile>, as the
// replicas get it) and the replica's environment (ReplicaEnvironment for index 0), of whose
// container entries only psflow's own (PSFLOW_*) are kept: a check runs nothing the manifest
// chose, such as an LD_PRELOAD. A type is not checked where its command is not a psflow program,
// its args hold what only a kubelet or the pod resolves ($(VAR), --flagfile, --fromenv,
// --tryfromenv, or a --model_file not on this machine), the program is not found, predates
// --check_config, or does not answer within the timeout.
std::vector<ReplicaCheck> CheckReplicas(const api::TrainingJob& job,
                                        const ReplicaCheckOptions& options);

// "spec.replicaSpecs.Worker: psflow-worker refuses its args: <line>" for the first kInvalid
// check; empty when there is none.
std::string FirstRefusal(const std::vector<ReplicaCheck>& checks);

}  // namespace psflow::local

#endif  // PSFLOW_OPERATOR_LOCAL_REPLICA_CHECK_H_
