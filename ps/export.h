// A trained model out of a job's ps checkpoints, whole: what `psflow export` writes as a
// safetensors file (core/safetensors.h) for PyTorch or Hugging Face to load.
//
// Input: the job's checkpoint folder, <dir>/ps-<task>/ckpt-*.psck, one folder per ps task
// (ps/checkpoint.h). Each task's newest valid checkpoint (CheckpointDir::RestoreNewest) holds its
// partitions: rows [row_begin, row_end) of the first dimension of a variable
// (core/placement.h), described by the checkpoint's metadata, the chief's InitializeRequest
// (proto/ps.proto: variable name, whole shape, row range, in the task's partition order). Its
// tensors are, per partition in that order, the values and then the optimizer's slots (Adam's m
// and v, momentum's accumulator...: ps/partition_store.h Snapshot); only the values are taken,
// never the slots. A variable's partitions, from every task, are put back together in row order
// into the whole variable (row-major, so each partition is one contiguous run of it).
//
// Checked, so that an export is never a silent mix: the tasks found are ps-0 .. ps-<n-1> with no
// gap, each has a valid checkpoint, all are at the same global step and of the same model and
// placement (fingerprint), each checkpoint's tensors match its metadata (names, sizes), the
// partitions of each variable agree on its shape and tile its rows exactly. Not detectable: a
// job whose last task folders are all missing (ps-2 of 3 gone, say) and whose remaining tasks
// hold whole variables only, since a task's checkpoint does not list the others' variables.
//
// Memory: the model's values twice at most, plus one task's checkpoint (its slots included)
// while it is read.
#ifndef PSFLOW_PS_EXPORT_H_
#define PSFLOW_PS_EXPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/safetensors.h"

namespace psflow {

struct TrainedModel {
  int64_t global_step = 0;
  uint64_t fingerprint = 0;  // the model and placement's (core/placement.h)
  int ps_tasks = 0;
  // Every variable whole, sorted by name, named as in the model (e.g. "conv1/weights").
  std::vector<SafetensorsTensor> variables;
};

// Errors: NOT_FOUND when `checkpoint_dir` does not exist or holds no ps-<task> folder;
// FAILED_PRECONDITION, naming the tasks, when a task folder is missing (a gap), a task has no
// valid checkpoint, the tasks' newest checkpoints are at different global steps (each task's
// step listed) or of different models, or a variable's rows are not all present; DATA_LOSS,
// naming the task, for a checkpoint whose metadata does not parse or does not match its tensors,
// or partitions of one variable that overlap or disagree on its shape.
absl::StatusOr<TrainedModel> LoadTrainedModel(const std::string& checkpoint_dir);

// LoadTrainedModel's variables.
absl::StatusOr<std::vector<SafetensorsTensor>> LoadTrainedVariables(
    const std::string& checkpoint_dir);

// Writes the trained model as a safetensors file at `out_path` (WriteSafetensors: atomically,
// float32, tensors sorted by name). Its metadata: `metadata`, plus "psflow.global_step" (decimal,
// the key the worker's export, worker/model_weights.h, writes too), "psflow.fingerprint" (16 hex
// digits) and "psflow.ps_tasks"; and "format": "pt" (what safetensors.torch writes, which Hugging
// Face transformers expects) unless `metadata` sets "format". Errors: LoadTrainedModel's;
// INVALID_ARGUMENT when `metadata` sets one of the three psflow.* keys above, or a variable's name
// cannot be a safetensors tensor name ("__metadata__"); WriteSafetensors' file system errors.
absl::Status ExportCheckpoint(const std::string& checkpoint_dir, const std::string& out_path,
                              const std::map<std::string, std::string>& metadata);

}  // namespace psflow

#endif  // PSFLOW_PS_EXPORT_H_
