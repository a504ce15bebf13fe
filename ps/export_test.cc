#include "ps/export.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/byte_source.h"
#include "core/frame.h"
#include "core/placement.h"
#include "core/safetensors.h"
#include "core/tensor_shape.h"
#include "proto/ps.pb.h"
#include "ps/checkpoint.h"
#include "ps/ps_state.h"

namespace psflow {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Message(const absl::Status& status) { return std::string(status.message()); }

// A fresh, empty folder for the running test.
std::string TestDir() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string dir = absl::StrCat(::testing::TempDir(), "psflow_export_",
                                       info->test_suite_name(), "_", info->name(), "_", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A model with a variable big enough to be split across two tasks (dense/kernel, 1280 bytes, in
// pieces of at most 256), one split in two (embedding), a bias and a scalar.
std::vector<VariableInfo> Model() {
  return {{"dense/kernel", {40, 8}}, {"dense/bias", {8}}, {"embedding", {30, 4}}, {"scale", {}}};
}

PlacementOptions SmallPieces() {
  PlacementOptions options;
  options.min_partition_bytes = 256;
  options.pieces_per_task = 4;
  return options;
}

// Exact small floats, different per variable.
std::vector<float> InitialValues(const VariableInfo& v, int variable) {
  std::vector<float> values(static_cast<size_t>(NumElements(v.shape)));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<float>(static_cast<int>(i % 23) - 11) * 0.125f + variable;
  }
  return values;
}

proto::OptimizerConfig Optimizer(const std::string& name) {
  proto::OptimizerConfig c;
  c.set_name(name);
  c.set_learning_rate(0.01f);
  if (name == "momentum") c.set_momentum(0.9f);
  return c;
}

// Bulk frames to a PsState, as the worker's ps client sends them.
absl::StatusOr<proto::TransferReply> Push(PsState& state, const proto::TransferHeader& header,
                                          const std::vector<float>& payload) {
  std::string frame = EncodeFrameHeader(header);
  frame.append(reinterpret_cast<const char*>(payload.data()), payload.size() * sizeof(float));
  ByteSource source({std::as_bytes(std::span<const char>(frame))});
  return state.Push(source);
}

// A job's ps tasks, created and initialised (Start) as a worker's chief does it (core/placement.h,
// then Initialize, the TK_ASSIGN pushes and the commit), trained by async gradient pushes and
// checkpointed by PsState::Checkpoint into <dir>/ps-<task>.
class Job {
 public:
  // Creates and initialises the tasks (fatal failures: call through ASSERT_NO_FATAL_FAILURE).
  void Start(const std::string& dir, int num_tasks, const std::string& optimizer,
             uint64_t task1_fingerprint_delta = 0) {
    variables_ = Model();
    absl::StatusOr<Placement> placement = PlaceVariables(variables_, num_tasks, SmallPieces());
    ASSERT_TRUE(placement.ok()) << placement.status();
    placement_ = *placement;
    for (size_t v = 0; v < variables_.size(); ++v) {
      initial_.push_back(InitialValues(variables_[v], static_cast<int>(v)));
    }
    for (int t = 0; t < num_tasks; ++t) {
      PsState::Options options;
      options.task = t;
      options.checkpoint_dir = dir;
      tasks_.push_back(std::make_unique<PsState>(options, nullptr));
      proto::InitializeRequest request = Request(t, optimizer);
      if (t == 1) request.set_fingerprint(request.fingerprint() + task1_fingerprint_delta);
      fingerprints_.push_back(request.fingerprint());
      ASSERT_TRUE(tasks_[t]->Initialize(request).ok());
      std::vector<float> values;
      for (int i : placement_.task_partitions[t]) {
        const PartitionPlacement& p = placement_.partitions[static_cast<size_t>(i)];
        const std::vector<float>& all = initial_[static_cast<size_t>(p.variable)];
        values.insert(values.end(), all.begin() + p.row_begin * p.row_elements,
                      all.begin() + p.row_end * p.row_elements);
      }
      const auto assigned = Push(*tasks_[t], Header(t, proto::TK_ASSIGN, 0), values);
      ASSERT_TRUE(assigned.ok()) << assigned.status();
      request.set_commit(true);
      ASSERT_TRUE(tasks_[t]->Initialize(request).ok());
    }
  }

  const Placement& placement() const { return placement_; }
  const std::vector<std::vector<float>>& initial() const { return initial_; }
  PsState& task(int t) { return *tasks_[static_cast<size_t>(t)]; }

  // One gradient push to every partition of task t (values depending on the step).
  void Train(int t) {
    PsState& state = task(t);
    const int64_t step = state.global_step();
    std::vector<float> gradient(static_cast<size_t>(TaskElements(t)));
    for (size_t i = 0; i < gradient.size(); ++i) {
      gradient[i] =
          static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(step)) % 13) - 6);
    }
    const auto reply = Push(state, Header(t, proto::TK_GRADIENT, step), gradient);
    ASSERT_TRUE(reply.ok()) << reply.status();
    ASSERT_FALSE(reply->dropped());
  }

  void TrainAll(int steps) {
    for (int s = 0; s < steps; ++s) {
      for (size_t t = 0; t < tasks_.size(); ++t) Train(static_cast<int>(t));
    }
  }

  // Checkpoints every task; the step each wrote.
  std::vector<int64_t> CheckpointAll() {
    std::vector<int64_t> steps;
    for (auto& state : tasks_) {
      const absl::StatusOr<std::optional<int64_t>> step = state->Checkpoint();
      EXPECT_TRUE(step.ok()) << step.status();
      steps.push_back(step.ok() && step->has_value() ? **step : -1);
    }
    return steps;
  }

  // The model as the ps tasks hold it now: every variable whole, put together from what each
  // task answers to a pull of all its partitions, sorted by name.
  std::vector<SafetensorsTensor> Pulled() {
    std::vector<std::vector<float>> task_values;
    for (size_t t = 0; t < tasks_.size(); ++t) {
      const int task_index = static_cast<int>(t);
      proto::TransferHeader header = Header(task_index, proto::TK_PULL, 0);
      const std::string frame = EncodeFrameHeader(header);
      ByteSource source({std::as_bytes(std::span<const char>(frame))});
      const absl::StatusOr<int64_t> bytes = tasks_[t]->CheckPull(source, &header);
      EXPECT_TRUE(bytes.ok()) << bytes.status();
      std::vector<float> values(static_cast<size_t>(bytes.value_or(0) / 4));
      tasks_[t]->FillPull(header, reinterpret_cast<std::byte*>(values.data()));
      task_values.push_back(std::move(values));
    }
    std::map<std::string, SafetensorsTensor> whole;
    for (size_t v = 0; v < variables_.size(); ++v) {
      whole[variables_[v].name] = {variables_[v].name, variables_[v].shape,
                                   std::vector<float>(initial_[v].size(), -999.0f)};
    }
    for (size_t t = 0; t < tasks_.size(); ++t) {
      int64_t at = 0;  // the partitions lie back to back in the pull, in the task's order
      for (int i : placement_.task_partitions[t]) {
        const PartitionPlacement& p = placement_.partitions[static_cast<size_t>(i)];
        std::vector<float>& out = whole[variables_[static_cast<size_t>(p.variable)].name].values;
        std::copy(task_values[t].begin() + at, task_values[t].begin() + at + p.elements(),
                  out.begin() + p.row_begin * p.row_elements);
        at += p.elements();
      }
    }
    std::vector<SafetensorsTensor> out;
    for (auto& [name, tensor] : whole) out.push_back(std::move(tensor));
    return out;
  }

 private:
  proto::InitializeRequest Request(int t, const std::string& optimizer) const {
    proto::InitializeRequest request;
    for (int i : placement_.task_partitions[t]) {
      const PartitionPlacement& p = placement_.partitions[static_cast<size_t>(i)];
      const VariableInfo& v = variables_[static_cast<size_t>(p.variable)];
      proto::PartitionSpec* spec = request.add_partitions();
      spec->set_variable(v.name);
      spec->mutable_variable_shape()->Assign(v.shape.begin(), v.shape.end());
      spec->set_row_begin(p.row_begin);
      spec->set_row_end(p.row_end);
    }
    *request.mutable_optimizer() = Optimizer(optimizer);
    request.mutable_sync()->set_total_workers(1);
    request.set_fingerprint(placement_.fingerprint);
    return request;
  }

  int64_t TaskElements(int t) const {
    int64_t n = 0;
    for (int i : placement_.task_partitions[t]) {
      n += placement_.partitions[static_cast<size_t>(i)].elements();
    }
    return n;
  }

  // Every partition of task t, whole, in one frame.
  proto::TransferHeader Header(int t, proto::TransferKind kind, int64_t step) const {
    proto::TransferHeader h;
    h.set_kind(kind);
    h.set_fingerprint(fingerprints_[static_cast<size_t>(t)]);
    h.set_wire_dtype(proto::DT_FLOAT32);
    h.set_step(step);
    h.set_worker(0);
    h.set_chunk(0);
    h.set_num_chunks(1);
    h.set_examples(1);
    const auto& list = placement_.task_partitions[t];
    for (size_t k = 0; k < list.size(); ++k) {
      proto::Segment* s = h.add_segments();
      s->set_partition(static_cast<uint32_t>(k));
      s->set_offset(0);
      s->set_count(placement_.partitions[static_cast<size_t>(list[k])].elements());
    }
    return h;
  }

  std::vector<VariableInfo> variables_;
  Placement placement_;
  std::vector<std::vector<float>> initial_;
  std::vector<uint64_t> fingerprints_;
  std::vector<std::unique_ptr<PsState>> tasks_;
};

std::vector<uint32_t> Bits(const std::vector<float>& values) {
  std::vector<uint32_t> bits;
  for (float v : values) bits.push_back(std::bit_cast<uint32_t>(v));
  return bits;
}

void ExpectSameTensors(const std::vector<SafetensorsTensor>& actual,
                       const std::vector<SafetensorsTensor>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_EQ(actual[i].name, expected[i].name);
    EXPECT_EQ(actual[i].shape, expected[i].shape) << expected[i].name;
    EXPECT_EQ(Bits(actual[i].values), Bits(expected[i].values)) << expected[i].name;
  }
}

// The test's premise: some variable has partitions on both tasks.
bool SplitAcrossTasks(const Placement& placement) {
  std::map<int, std::set<int>> tasks_of;
  for (const PartitionPlacement& p : placement.partitions) tasks_of[p.variable].insert(p.task);
  for (const auto& [variable, tasks] : tasks_of) {
    if (tasks.size() > 1) return true;
  }
  return false;
}

TEST(ExportTest, VariablesSplitAcrossTwoTasksComeBackWholeWithoutTheAdamSlots) {
  const std::string dir = TestDir();
  Job job;
  ASSERT_NO_FATAL_FAILURE(job.Start(dir, 2, "adam"));
  ASSERT_TRUE(SplitAcrossTasks(job.placement())) << job.placement().Describe();
  job.TrainAll(3);
  EXPECT_THAT(job.CheckpointAll(), ElementsAre(3, 3));
  const std::vector<SafetensorsTensor> expected = job.Pulled();
  ASSERT_NE(Bits(expected[1].values), Bits(job.initial()[0]));  // dense/kernel was trained

  const absl::StatusOr<TrainedModel> model = LoadTrainedModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->global_step, 3);
  EXPECT_EQ(model->ps_tasks, 2);
  EXPECT_EQ(model->fingerprint, job.placement().fingerprint);
  // Exactly the model's variables, sorted by name: no "<partition>/m" or "/v".
  ASSERT_EQ(model->variables.size(), 4u);
  EXPECT_EQ(model->variables[0].name, "dense/bias");
  EXPECT_EQ(model->variables[1].name, "dense/kernel");
  EXPECT_EQ(model->variables[2].name, "embedding");
  EXPECT_EQ(model->variables[3].name, "scale");
  ExpectSameTensors(model->variables, expected);

  const absl::StatusOr<std::vector<SafetensorsTensor>> variables = LoadTrainedVariables(dir);
  ASSERT_TRUE(variables.ok()) << variables.status();
  ExpectSameTensors(*variables, expected);
}

TEST(ExportTest, ExportWritesTheVariablesAndTheStepAsSafetensors) {
  const std::string dir = TestDir();
  Job job;
  ASSERT_NO_FATAL_FAILURE(job.Start(dir, 2, "momentum"));
  job.TrainAll(2);
  EXPECT_THAT(job.CheckpointAll(), ElementsAre(2, 2));
  const std::string out = dir + "/model.safetensors";
  const absl::Status exported = ExportCheckpoint(dir, out, {{"model", "test-mlp"}});
  ASSERT_TRUE(exported.ok()) << exported;

  const absl::StatusOr<SafetensorsFile> file = ReadSafetensors(out);
  ASSERT_TRUE(file.ok()) << file.status();
  ExpectSameTensors(file->tensors, job.Pulled());
  EXPECT_EQ(file->metadata,
            (std::map<std::string, std::string>{
                {"format", "pt"},
                {"model", "test-mlp"},
                {"psflow.fingerprint", absl::StrFormat("%016x", job.placement().fingerprint)},
                {"psflow.global_step", "2"},
                {"psflow.ps_tasks", "2"}}));
}

TEST(ExportTest, OneTaskWithPlainSgdHoldsEveryVariableWhole) {
  const std::string dir = TestDir();
  Job job;
  ASSERT_NO_FATAL_FAILURE(job.Start(dir, 1, "sgd"));
  job.TrainAll(1);
  EXPECT_THAT(job.CheckpointAll(), ElementsAre(1));
  const absl::StatusOr<TrainedModel> model = LoadTrainedModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->ps_tasks, 1);
  ExpectSameTensors(model->variables, job.Pulled());
}

TEST(ExportTest, TasksAtDifferentStepsAreFailedPreconditionNamingTheSteps) {
  const std::string dir = TestDir();
  Job job;
  ASSERT_NO_FATAL_FAILURE(job.Start(dir, 2, "adam"));
  job.TrainAll(1);
  job.CheckpointAll();
  job.Train(1);
  ASSERT_TRUE(job.task(1).Checkpoint().ok());
  const absl::Status status = LoadTrainedModel(dir).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(Message(status), HasSubstr("ps-0 at step 1, ps-1 at step 2"));
}

TEST(ExportTest, TasksOfDifferentModelsAreFailedPrecondition) {
  const std::string dir = TestDir();
  Job job;
  ASSERT_NO_FATAL_FAILURE(job.Start(dir, 2, "sgd", /*task1_fingerprint_delta=*/1));
  job.TrainAll(1);
  job.CheckpointAll();
  const absl::Status status = LoadTrainedModel(dir).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(Message(status), HasSubstr("different models or placements"));
}

TEST(ExportTest, AMissingTaskIsFailedPrecondition) {
  const std::string dir = TestDir();
  Job job;
  ASSERT_NO_FATAL_FAILURE(job.Start(dir, 2, "sgd"));
  job.TrainAll(1);
  job.CheckpointAll();
  // The last task gone: the variables split across both are incomplete.
  fs::rename(dir + "/ps-1", dir + "/moved");
  absl::Status status = LoadTrainedModel(dir).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(Message(status), HasSubstr("are in no ps task's checkpoint"));
  // The first task gone: a gap in the task folders.
  fs::rename(dir + "/moved", dir + "/ps-1");
  fs::rename(dir + "/ps-0", dir + "/moved");
  status = LoadTrainedModel(dir).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(Message(status), HasSubstr("no ps-0"));
  // A task folder without a checkpoint.
  fs::create_directory(dir + "/ps-0");
  status = LoadTrainedModel(dir).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(Message(status), HasSubstr("holds no valid checkpoint"));
}

TEST(ExportTest, NoCheckpointFolderIsNotFound) {
  const std::string dir = TestDir();
  EXPECT_EQ(LoadTrainedModel(dir).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadTrainedModel(dir + "/none").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ExportCheckpoint(dir, dir + "/model.safetensors", {}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors"));
}

TEST(ExportTest, ACheckpointThatDoesNotMatchItsMetadataIsDataLoss) {
  const std::string dir = TestDir();
  proto::InitializeRequest request;
  proto::PartitionSpec* spec = request.add_partitions();
  spec->set_variable("w");
  spec->add_variable_shape(4);
  spec->set_row_begin(0);
  spec->set_row_end(4);
  *request.mutable_optimizer() = Optimizer("sgd");
  Checkpoint checkpoint;
  checkpoint.global_step = 5;
  checkpoint.metadata = request.SerializeAsString();
  checkpoint.tensors = {{"w", {3}, {1, 2, 3}}};  // 3 values where the metadata says 4
  ASSERT_TRUE(CheckpointDir(dir, 0, 1).Write(checkpoint).ok());
  absl::Status status = LoadTrainedModel(dir).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(Message(status), HasSubstr("tensor 0 is \"w\" with 3 values; partition 0 is \"w\" "
                                         "with 4"));

  checkpoint.global_step = 6;
  checkpoint.metadata = "not a request";
  ASSERT_TRUE(CheckpointDir(dir, 0, 1).Write(checkpoint).ok());
  status = LoadTrainedModel(dir).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(Message(status), HasSubstr("metadata does not parse"));
}

TEST(ExportTest, ReservedMetadataKeysAreInvalidArgument) {
  const std::string dir = TestDir();
  Job job;
  ASSERT_NO_FATAL_FAILURE(job.Start(dir, 1, "sgd"));
  job.CheckpointAll();
  const std::string out = dir + "/model.safetensors";
  const absl::Status status = ExportCheckpoint(dir, out, {{"psflow.global_step", "1"}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_FALSE(fs::exists(out));
  // "format" may be set.
  ASSERT_TRUE(ExportCheckpoint(dir, out, {{"format", "np"}}).ok());
  EXPECT_EQ(ReadSafetensors(out)->metadata.at("format"), "np");
}

}  // namespace
}  // namespace psflow
