// What `psflow validate` says of a model file that is valid: the model, each layer's shapes and
// parameters, and how it trains.
#ifndef PSFLOW_WORKER_MODELS_MODEL_SUMMARY_H_
#define PSFLOW_WORKER_MODELS_MODEL_SUMMARY_H_

#include <string>

#include "absl/strings/string_view.h"
#include "worker/models/model_definition.h"

namespace psflow::models {

// Lines ending in '\n': the model, one line per layer (label, input -> output, detail,
// parameters), then "<source>: valid: ..." with the totals and the recipe. `m` must have passed
// ParseModelFile.
std::string ModelSummary(const ModelDefinition& m, absl::string_view source);

}  // namespace psflow::models

#endif  // PSFLOW_WORKER_MODELS_MODEL_SUMMARY_H_
