// Trained weights a user can take away: a model's parameters as safetensors (core/safetensors.h),
// the format PyTorch and Hugging Face load, with the model file beside them; and the way back,
// for evaluating an exported model (psflow-worker --weights=FILE --eval_only).
//
// Tensors are named as psflow names the parameters ("<layer>/kernel", "<layer>/bias",
// "<layer>/embeddings") and laid out as TensorFlow's: a dense kernel [in, out], a conv2d kernel
// [height, width, in channels, out channels], an LSTM kernel [in + units, 4 * units] with the
// gates i, j, f, o (docs/model-files.md says how to load them into PyTorch).
#ifndef PSFLOW_WORKER_MODEL_WEIGHTS_H_
#define PSFLOW_WORKER_MODEL_WEIGHTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/safetensors.h"
#include "worker/models/model_definition.h"
#include "worker/nn/parameter_set.h"

namespace psflow {

inline constexpr char kWeightsFile[] = "model.safetensors";
inline constexpr char kModelFile[] = "model.yaml";

// Writes <dir>/model.safetensors (every parameter of `params`, float32; metadata: the model's
// name, `global_step`, "format": "pt" as PyTorch's writers put it, and the layout above) and
// <dir>/model.yaml (m.source), each atomically, creating `dir` as needed. The file system's error
// naming the path; FAILED_PRECONDITION, writing nothing, when a parameter holds a value that is
// not finite (a diverged training).
// Before training: that ExportModel could write into `dir` (created as needed), so a folder that
// cannot be written is found before the training, not after. FAILED_PRECONDITION naming `dir`.
absl::Status CheckExportDir(const std::string& dir);

absl::Status ExportModel(const models::ModelDefinition& m, const nn::ParameterSet& params,
                         int64_t global_step, const std::string& dir);

// Copies `tensors` into params.values() and says ValuesChanged. Every parameter must be among
// them with its shape, and there must be nothing else: INVALID_ARGUMENT starting with `what`
// and naming the first tensor missing, extra or of another shape (weights of another model).
// params is unchanged on error.
absl::Status CopyWeights(const std::vector<SafetensorsTensor>& tensors, absl::string_view what,
                         nn::ParameterSet& params);

// CopyWeights of the safetensors file at `path`; ReadSafetensors' errors for the file itself.
absl::Status LoadWeights(const std::string& path, nn::ParameterSet& params);

}  // namespace psflow

#endif  // PSFLOW_WORKER_MODEL_WEIGHTS_H_
