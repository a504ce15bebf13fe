#include "operator/local/validate.h"

#include <unistd.h>

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/file_util.h"
#include "core/read_file.h"
#include "core/status_macros.h"
#include "operator/api/training_job.h"
#include "operator/local/replica_check.h"
#include "worker/models/model_file.h"
#include "worker/models/model_summary.h"
#include "yaml-cpp/yaml.h"

namespace psflow::local {
namespace {

// Whether `text` is a model file: a map with neither `apiVersion` nor `kind` (a manifest's) and
// some key of a model file's own, so that one with a mistyped key (`layer:`) is still told
// about as a model file.
bool LooksLikeModelFile(const std::string& text) {
  try {
    const YAML::Node doc = YAML::Load(text);
    if (!doc.IsMap() || doc["apiVersion"].IsDefined() || doc["kind"].IsDefined()) return false;
    for (const char* key : {"layers", "input", "classes", "loss", "training", "data"}) {
      if (doc[key].IsDefined()) return true;
    }
    return false;
  } catch (const YAML::Exception&) {
    return false;
  }
}

absl::StatusOr<std::string> ValidateModelFile(const std::string& path, const std::string& text) {
  ASSIGN_OR_RETURN(const models::ModelDefinition m, models::ParseModelFile(text, path));
  return models::ModelSummary(m, path);
}

}  // namespace

absl::StatusOr<std::string> Validate(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  if (LooksLikeModelFile(*text)) return ValidateModelFile(path, *text);
  ASSIGN_OR_RETURN(const api::TrainingJob job, api::ParseTrainingJob(*text, path));
  std::string out = absl::StrCat(path, ": valid TrainingJob \"", job.name, "\"\n");
  if (!job.model_file.empty()) {  // valid: ParseTrainingJob checked it
    ASSIGN_OR_RETURN(const std::string report, ValidateModelFile("spec.modelFile", job.model_file));
    out += report;
  }
  std::set<std::string> seen;
  for (const auto& [type, spec] : job.replica_specs) {
    for (const std::string& file : ModelFileArgs(spec.MainContainer().args)) {
      if (!seen.insert(file).second) continue;
      if (access(file.c_str(), R_OK) != 0) {
        absl::StrAppend(&out, path, ": --model_file=", file,
                        " not checked: it is not on this machine (a ConfigMap mounted in the "
                        "pod?); `psflow validate` it where it is\n");
        continue;
      }
      ASSIGN_OR_RETURN(const std::string model_text, ReadFile(file));
      absl::StatusOr<std::string> report = ValidateModelFile(file, model_text);
      if (!report.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": --model_file: ", report.status().message()));
      }
      out += *report;
    }
  }
  const std::vector<ReplicaCheck> checks =
      CheckReplicas(job, {.inherited = OwnEnvironment(), .temp_dir = TempDirectory()});
  if (const std::string refusal = FirstRefusal(checks); !refusal.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", refusal));
  }
  for (const ReplicaCheck& c : checks) {
    absl::StrAppend(&out, path, ": spec.replicaSpecs.", api::ReplicaTypeName(c.type), ": ",
                    c.result == ReplicaCheck::Result::kValid ? "" : "args not checked: ", c.line,
                    "\n");
  }
  return out;
}

}  // namespace psflow::local
