// `psflow validate FILE`: checks a TrainingJob manifest or a model file without running anything.
#ifndef PSFLOW_OPERATOR_LOCAL_VALIDATE_H_
#define PSFLOW_OPERATOR_LOCAL_VALIDATE_H_

#include <string>

#include "absl/status/statusor.h"

namespace psflow::local {

// A model file (a YAML/JSON map with `layers`): ParseModelFile's check and, when valid, its
// summary (worker/models/model_summary.h). Anything else is read as a TrainingJob manifest
// (api::ParseTrainingJob, which checks an inline spec.modelFile: its summary follows); every
// --model_file=PATH (or "--model_file PATH") in a replica's
// arguments is then checked too where PATH can be read here (relative to the current directory,
// as `psflow run` starts the replicas), and named as not checked where it cannot (a ConfigMap
// mounted in the pod). Then each replica type's own program checks its args and environment
// (replica_check.h: CheckReplicas): a line per type says what it will run, or why its args were
// not checked. Returns the report, lines ending in '\n'; the first error otherwise, one line
// naming the file.
absl::StatusOr<std::string> Validate(const std::string& path);

}  // namespace psflow::local

#endif  // PSFLOW_OPERATOR_LOCAL_VALIDATE_H_
