#include "ps/export.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "core/file_util.h"
#include "core/optimizer.h"
#include "core/status_macros.h"
#include "core/tensor_shape.h"
#include "proto/ps.pb.h"
#include "ps/checkpoint.h"

namespace psflow {
namespace {

constexpr absl::string_view kTaskPrefix = "ps-";
// The export's own metadata keys; "psflow.global_step" as the worker's export
// (worker/model_weights.h) writes it.
constexpr char kStepKey[] = "psflow.global_step";
constexpr char kFingerprintKey[] = "psflow.fingerprint";
constexpr char kTasksKey[] = "psflow.ps_tasks";

// The task of a folder named as CheckpointDir names it ("ps-<task>", canonical decimal), or -1.
int ParseTaskFolder(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kTaskPrefix) || name.empty() ||
      !std::all_of(name.begin(), name.end(), absl::ascii_isdigit)) {
    return -1;
  }
  int task = 0;
  if (!absl::SimpleAtoi(name, &task) || absl::StrCat(task) != name) return -1;
  return task;
}

// One partition's values out of a task's checkpoint.
struct Piece {
  int task = 0;
  std::string variable;
  std::vector<int64_t> shape;  // the whole variable's
  int64_t row_begin = 0;
  int64_t row_end = 0;
  std::vector<float> values;
};

struct TaskValues {
  int64_t global_step = 0;
  uint64_t fingerprint = 0;
  std::vector<Piece> pieces;
};

// The name a partition's values have in a checkpoint (ps/partition_store.cc): the variable's when
// the partition is the whole variable, else "<variable>[<row_begin>:<row_end>]".
std::string PartitionName(const proto::PartitionSpec& spec, int64_t rows) {
  if (spec.row_begin() == 0 && spec.row_end() == rows) return spec.variable();
  return absl::StrCat(spec.variable(), "[", spec.row_begin(), ":", spec.row_end(), "]");
}

// Keeps the values of the task's partitions out of its newest checkpoint, dropping the slots.
absl::StatusOr<TaskValues> ReadTask(const std::string& dir, int task) {
  const CheckpointDir checkpoints(dir, task, 1);
  ASSIGN_OR_RETURN(std::optional<Checkpoint> checkpoint, checkpoints.RestoreNewest());
  if (!checkpoint.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat(checkpoints.path(), " holds no valid checkpoint of ps task ", task));
  }
  const std::string which =
      absl::StrCat(checkpoints.path(), " (checkpoint of step ", checkpoint->global_step, ")");
  proto::InitializeRequest request;
  if (!request.ParseFromString(checkpoint->metadata)) {
    return absl::DataLossError(absl::StrCat(which, ": its metadata does not parse"));
  }
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(request.optimizer());
  if (!optimizer.ok()) {
    return absl::DataLossError(
        absl::StrCat(which, ": its optimizer: ", optimizer.status().message()));
  }
  // Per partition, in the request's order: its values, then one tensor per slot.
  const size_t per_partition = 1 + static_cast<size_t>((*optimizer)->num_slots());
  const size_t partitions = static_cast<size_t>(request.partitions_size());
  if (checkpoint->tensors.size() != partitions * per_partition) {
    return absl::DataLossError(
        absl::StrCat(which, ": ", checkpoint->tensors.size(), " tensors, but its ", partitions,
                     " partitions with their ", per_partition - 1, " optimizer slot(s) make ",
                     partitions * per_partition));
  }
  TaskValues out;
  out.global_step = checkpoint->global_step;
  out.fingerprint = checkpoint->fingerprint;
  out.pieces.reserve(partitions);
  for (size_t i = 0; i < partitions; ++i) {
    const proto::PartitionSpec& spec = request.partitions(static_cast<int>(i));
    Piece piece;
    piece.task = task;
    piece.variable = spec.variable();
    piece.shape.assign(spec.variable_shape().begin(), spec.variable_shape().end());
    piece.row_begin = spec.row_begin();
    piece.row_end = spec.row_end();
    absl::StatusOr<int64_t> elements = CheckShape(piece.shape, spec.variable());
    const int64_t rows = piece.shape.empty() ? 1 : piece.shape[0];
    if (!elements.ok() || spec.variable().empty() || piece.row_begin < 0 ||
        piece.row_begin > piece.row_end || piece.row_end > rows) {
      return absl::DataLossError(absl::StrCat(which, ": partition ", i, " is rows [",
                                              piece.row_begin, ", ", piece.row_end,
                                              ") of variable \"", spec.variable(), "\" of shape [",
                                              absl::StrJoin(piece.shape, ","), "]"));
    }
    const int64_t row_elements = rows == 0 ? 0 : *elements / rows;
    const int64_t expected_elements = (piece.row_end - piece.row_begin) * row_elements;
    CheckpointTensor& tensor = checkpoint->tensors[i * per_partition];
    const std::string expected_name = PartitionName(spec, rows);
    if (tensor.name != expected_name ||
        tensor.values.size() != static_cast<size_t>(expected_elements)) {
      return absl::DataLossError(absl::StrCat(which, ": tensor ", i * per_partition, " is \"",
                                              tensor.name, "\" with ", tensor.values.size(),
                                              " values; partition ", i, " is \"", expected_name,
                                              "\" with ", expected_elements));
    }
    piece.values = std::move(tensor.values);
    out.pieces.push_back(std::move(piece));
  }
  return out;
}

// Every task at one step, of one model.
absl::Status CheckConsistent(const std::string& dir, const std::vector<TaskValues>& tasks) {
  const bool same_step = std::all_of(tasks.begin(), tasks.end(), [&](const TaskValues& t) {
    return t.global_step == tasks[0].global_step;
  });
  if (!same_step) {
    std::vector<std::string> steps;
    for (size_t t = 0; t < tasks.size(); ++t) {
      steps.push_back(absl::StrCat("ps-", t, " at step ", tasks[t].global_step));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "the ps tasks' newest checkpoints in ", dir, " are at different global steps (",
        absl::StrJoin(steps, ", "),
        "): the model was never whole at one step there; export after the job has ended, when "
        "every task has written its final checkpoint"));
  }
  for (size_t t = 1; t < tasks.size(); ++t) {
    if (tasks[t].fingerprint != tasks[0].fingerprint) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "the ps tasks' checkpoints in %s are of different models or placements: ps-0's "
          "fingerprint is %016x, ps-%d's %016x",
          dir, tasks[0].fingerprint, t, tasks[t].fingerprint));
    }
  }
  return absl::OkStatus();
}

// Puts one variable's pieces (all of its name) back together.
absl::StatusOr<SafetensorsTensor> Assemble(const std::string& name, std::vector<Piece> pieces) {
  const std::vector<int64_t>& shape = pieces[0].shape;
  for (const Piece& p : pieces) {
    if (p.shape != shape) {
      return absl::DataLossError(absl::StrCat("variable \"", name, "\" has the shape [",
                                              absl::StrJoin(shape, ","), "] in ps-", pieces[0].task,
                                              "'s checkpoint but [", absl::StrJoin(p.shape, ","),
                                              "] in ps-", p.task, "'s"));
    }
  }
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
    return std::make_pair(a.row_begin, a.row_end) < std::make_pair(b.row_begin, b.row_end);
  });
  const int64_t rows = shape.empty() ? 1 : shape[0];
  SafetensorsTensor whole{name, shape, {}};
  whole.values.reserve(static_cast<size_t>(NumElements(shape)));
  int64_t next_row = 0;
  const Piece* previous = nullptr;
  for (Piece& p : pieces) {
    if (p.row_begin < next_row) {
      return absl::DataLossError(
          absl::StrCat("variable \"", name, "\": rows [", p.row_begin, ", ", p.row_end, ") in ps-",
                       p.task, "'s checkpoint overlap rows [", previous->row_begin, ", ",
                       previous->row_end, ") in ps-", previous->task, "'s"));
    }
    if (p.row_begin > next_row) break;  // a gap: reported below
    whole.values.insert(whole.values.end(), p.values.begin(), p.values.end());
    std::vector<float>().swap(p.values);  // copied: let it go
    next_row = p.row_end;
    previous = &p;
  }
  if (next_row != rows) {
    const auto gap_end = std::find_if(pieces.begin(), pieces.end(),
                                      [&](const Piece& p) { return p.row_begin > next_row; });
    return absl::FailedPreconditionError(
        absl::StrCat("variable \"", name, "\" of shape [", absl::StrJoin(shape, ","), "]: rows [",
                     next_row, ", ", gap_end == pieces.end() ? rows : gap_end->row_begin,
                     ") are in no ps task's checkpoint (is a ps-<task> folder missing?)"));
  }
  return whole;
}

}  // namespace

absl::StatusOr<TrainedModel> LoadTrainedModel(const std::string& checkpoint_dir) {
  ASSIGN_OR_RETURN(const std::vector<std::string> names, DirNames(checkpoint_dir));
  std::set<int> found;
  for (const std::string& name : names) {
    if (const int task = ParseTaskFolder(name); task >= 0) found.insert(task);
  }
  if (found.empty()) {
    return absl::NotFoundError(
        absl::StrCat(checkpoint_dir,
                     " holds no ps-<task> folder: not the checkpoint folder of a job's ps "
                     "tasks (their --checkpoint_dir)"));
  }
  const int num_tasks = *found.rbegin() + 1;
  for (int t = 0; t < num_tasks; ++t) {
    if (found.count(t) == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(checkpoint_dir, " has ps-", num_tasks - 1, " but no ps-", t,
                       ": the checkpoints of ps task ", t, " are missing"));
    }
  }
  std::vector<TaskValues> tasks;
  for (int t = 0; t < num_tasks; ++t) {
    ASSIGN_OR_RETURN(TaskValues values, ReadTask(checkpoint_dir, t));
    tasks.push_back(std::move(values));
  }
  RETURN_IF_ERROR(CheckConsistent(checkpoint_dir, tasks));

  TrainedModel model;
  model.global_step = tasks[0].global_step;
  model.fingerprint = tasks[0].fingerprint;
  model.ps_tasks = num_tasks;
  std::map<std::string, std::vector<Piece>> by_variable;  // sorted by name
  for (TaskValues& t : tasks) {
    for (Piece& p : t.pieces) {
      std::string variable = p.variable;
      by_variable[variable].push_back(std::move(p));
    }
  }
  tasks.clear();
  for (auto& [name, pieces] : by_variable) {
    ASSIGN_OR_RETURN(SafetensorsTensor whole, Assemble(name, std::move(pieces)));
    model.variables.push_back(std::move(whole));
  }
  return model;
}

absl::StatusOr<std::vector<SafetensorsTensor>> LoadTrainedVariables(
    const std::string& checkpoint_dir) {
  ASSIGN_OR_RETURN(TrainedModel model, LoadTrainedModel(checkpoint_dir));
  return std::move(model.variables);
}

absl::Status ExportCheckpoint(const std::string& checkpoint_dir, const std::string& out_path,
                              const std::map<std::string, std::string>& metadata) {
  for (const char* reserved : {kStepKey, kFingerprintKey, kTasksKey}) {
    if (metadata.count(reserved) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("export to ", out_path, ": the metadata key \"", reserved,
                       "\" is the export's own (taken from the checkpoints)"));
    }
  }
  ASSIGN_OR_RETURN(const TrainedModel model, LoadTrainedModel(checkpoint_dir));
  std::map<std::string, std::string> all = metadata;
  all.emplace("format", "pt");  // unless the caller set it
  all[kStepKey] = absl::StrCat(model.global_step);
  all[kFingerprintKey] = absl::StrFormat("%016x", model.fingerprint);
  all[kTasksKey] = absl::StrCat(model.ps_tasks);
  return WriteSafetensors(out_path, model.variables, all);
}

}  // namespace psflow
