// `psflow export`: a job's trained model from its ps checkpoints, as the chief's --export_dir
// writes it when training ends (worker/model_weights.h): for jobs that ended without an export,
// or to take a model away while training goes on.
#ifndef PSFLOW_OPERATOR_LOCAL_EXPORT_MODEL_H_
#define PSFLOW_OPERATOR_LOCAL_EXPORT_MODEL_H_

#include <string>

#include "absl/status/statusor.h"

namespace psflow::local {

// Puts the variables of the newest checkpoints in `checkpoint_dir` (every ps task's, at one
// global step: ps/export.h) back together, checks them against the model file's parameters
// (names and shapes: weights of another model are refused) and writes <out_dir>/model.safetensors
// and <out_dir>/model.yaml. Returns the line that says what was written. Errors: the model
// file's, LoadTrainedModel's, CopyWeights' and the file system's, each one line naming the path.
absl::StatusOr<std::string> ExportFromCheckpoints(const std::string& model_file,
                                                  const std::string& checkpoint_dir,
                                                  const std::string& out_dir);

}  // namespace psflow::local

#endif  // PSFLOW_OPERATOR_LOCAL_EXPORT_MODEL_H_
