// What went wrong in a YAML text yaml-cpp could not load, in words a user can act on.
#ifndef PSFLOW_WORKER_MODELS_YAML_ERROR_H_
#define PSFLOW_WORKER_MODELS_YAML_ERROR_H_

#include <string>

#include "yaml-cpp/exceptions.h"

namespace psflow::models {

// yaml-cpp's message ("end of map not found"), except for text nested deeper than yaml-cpp
// parses (its DeepRecursion, whose own message is "bad file"): "nested deeper than the YAML
// parser allows (N levels)". Without the line: callers place e.mark themselves.
std::string DescribeYamlError(const YAML::Exception& e);

}  // namespace psflow::models

#endif  // PSFLOW_WORKER_MODELS_YAML_ERROR_H_
