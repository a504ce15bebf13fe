#include "worker/models/yaml_error.h"

#include "absl/strings/str_cat.h"
#include "yaml-cpp/depthguard.h"

namespace psflow::models {

std::string DescribeYamlError(const YAML::Exception& e) {
  if (const auto* deep = dynamic_cast<const YAML::DeepRecursion*>(&e)) {
    return absl::StrCat("nested deeper than the YAML parser allows (", deep->depth(), " levels)");
  }
  return e.msg;
}

}  // namespace psflow::models
