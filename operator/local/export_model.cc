#include "operator/local/export_model.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "ps/export.h"
#include "worker/model_weights.h"
#include "worker/models/model_file.h"
#include "worker/nn/backend.h"
#include "worker/nn/model.h"

namespace psflow::local {

absl::StatusOr<std::string> ExportFromCheckpoints(const std::string& model_file,
                                                  const std::string& checkpoint_dir,
                                                  const std::string& out_dir) {
  ASSIGN_OR_RETURN(const models::ModelDefinition m, models::ReadModelFile(model_file));
  ASSIGN_OR_RETURN(const TrainedModel trained, LoadTrainedModel(checkpoint_dir));
  // The model's parameters, as the workers declare them (a CPU model of one example).
  std::unique_ptr<nn::Backend> backend = nn::MakeCpuBackend(1);
  ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> model, nn::Model::Create(m.spec, *backend, 1));
  RETURN_IF_ERROR(CopyWeights(trained.variables,
                              absl::StrCat(checkpoint_dir, " (global step ", trained.global_step,
                                           ", ", trained.ps_tasks, " ps tasks)"),
                              model->params()));
  RETURN_IF_ERROR(ExportModel(m, model->params(), trained.global_step, out_dir));
  return absl::StrCat("exported ", m.spec.name, " at global step ", trained.global_step, " (",
                      trained.variables.size(), " tensors from ", trained.ps_tasks,
                      " ps tasks) to ", out_dir, "/", kWeightsFile, " and ", kModelFile);
}

}  // namespace psflow::local
