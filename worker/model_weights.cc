#include "worker/model_weights.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/file_util.h"
#include "core/safetensors.h"
#include "core/status_macros.h"

namespace psflow {

absl::Status ExportModel(const models::ModelDefinition& m, const nn::ParameterSet& params,
                         int64_t global_step, const std::string& dir) {
  std::vector<SafetensorsTensor> tensors;
  for (const nn::ParameterDesc& d : params.descs()) {
    const float* v = params.values().data() + d.offset;
    if (!std::all_of(v, v + d.size, [](float x) { return std::isfinite(x); })) {
      return absl::FailedPreconditionError(
          absl::StrCat("not exported to ", dir, ": parameter ", d.name,
                       " is not finite (the training diverged; lower the learning rate or set "
                       "--max_grad_norm)"));
    }
    tensors.push_back(SafetensorsTensor{d.name, d.shape, std::vector<float>(v, v + d.size)});
  }
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"psflow.model", m.spec.name},
      {"psflow.global_step", absl::StrCat(global_step)},
      {"psflow.layout",
       "TensorFlow's: dense kernel [in, out]; conv2d kernel [height, width, in, out]; lstm kernel "
       "[in + units, 4 * units], gates i, j, f, o"},
  };
  RETURN_IF_ERROR(MakeDirs(dir));
  RETURN_IF_ERROR(WriteSafetensors(absl::StrCat(dir, "/", kWeightsFile), tensors, metadata));
  const std::string model_path = absl::StrCat(dir, "/", kModelFile);
  return WriteFileAtomically(model_path, [&](int fd, const std::string& temp) {
    return WriteFull(fd, m.source.data(), m.source.size(), temp);
  });
}

absl::Status CheckExportDir(const std::string& dir) {
  const absl::Status made = MakeDirs(dir);
  const int error = !made.ok() ? 0 : access(dir.c_str(), W_OK | X_OK) == 0 ? -1 : errno;
  if (error < 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("export folder ", dir, " cannot be written: ",
                   error == 0 ? std::string(made.message()) : std::string(std::strerror(error))));
}

absl::Status CopyWeights(const std::vector<SafetensorsTensor>& tensors, absl::string_view what,
                         nn::ParameterSet& params) {
  std::map<std::string, const SafetensorsTensor*> by_name;
  for (const SafetensorsTensor& t : tensors) by_name[t.name] = &t;
  for (const nn::ParameterDesc& d : params.descs()) {
    auto it = by_name.find(d.name);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": has no tensor \"", d.name, "\" [", absl::StrJoin(d.shape, ", "),
                       "] the model needs (weights of another model?)"));
    }
    if (it->second->shape != d.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": tensor \"", d.name, "\" is [", absl::StrJoin(it->second->shape, ", "),
          "], the model's is [", absl::StrJoin(d.shape, ", "), "]"));
    }
  }
  std::set<std::string> names;
  for (const nn::ParameterDesc& d : params.descs()) names.insert(d.name);
  for (const SafetensorsTensor& t : tensors) {
    if (names.count(t.name) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": tensor \"", t.name, "\" is not a parameter of the model"));
    }
  }
  for (const nn::ParameterDesc& d : params.descs()) {
    const std::vector<float>& v = by_name[d.name]->values;
    std::memcpy(params.values().data() + d.offset, v.data(), v.size() * sizeof(float));
  }
  params.ValuesChanged();
  return absl::OkStatus();
}

absl::Status LoadWeights(const std::string& path, nn::ParameterSet& params) {
  ASSIGN_OR_RETURN(const SafetensorsFile file, ReadSafetensors(path));
  return CopyWeights(file.tensors, path, params);
}

}  // namespace psflow
