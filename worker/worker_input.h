// A worker's data: the training input of its shard (real files or synthetic) and what its model
// is evaluated on afterwards, for whichever dataset the model trains on.
#ifndef PSFLOW_WORKER_WORKER_INPUT_H_
#define PSFLOW_WORKER_WORKER_INPUT_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "worker/data/cifar10.h"
#include "worker/data/dataset.h"
#include "worker/data/ptb.h"
#include "worker/models/model_definition.h"

namespace psflow {

struct InputOptions {
  bool synthetic = false;
  std::string data_path;  // empty: the dataset's default location, where it has one
  int64_t batch_size = 1;
  int shard_index = 0;  // this worker reads the shard_index-th of num_shards contiguous parts
  int num_shards = 1;
  uint64_t seed = 1;
  // Only the evaluation data (--eval_only): `train` stays empty, the shard's size unchecked.
  bool eval_only = false;
};

struct WorkerInput {
  // The training batches of this worker's shard. References the data below.
  std::unique_ptr<data::BatchSource> train;
  // Classifiers on real data: the test set (CIFAR-10's centre crops); none where the model's
  // data names no test split.
  std::optional<data::Dataset> test;
  // Language models on real data: the corpus (train, valid and test ids; no words for the tokens
  // format).
  std::optional<data::PtbCorpus> corpus;

 private:
  friend absl::StatusOr<std::unique_ptr<WorkerInput>> LoadWorkerInput(
      const models::ModelDefinition&, const InputOptions&);
  data::Dataset train_set_;  // classifiers but CIFAR-10
  data::Cifar10Images cifar_train_;
};

// Reads the model's dataset and builds this worker's training source. NOT_FOUND / DATA_LOSS /
// INVALID_ARGUMENT (one line, naming the file) when the data is missing or malformed, when the
// corpus's vocabulary is larger than the model's, or when the shard is smaller than one batch.
absl::StatusOr<std::unique_ptr<WorkerInput>> LoadWorkerInput(const models::ModelDefinition& model,
                                                             const InputOptions& options);

// Random batches of `model`'s shape (--data_source=synthetic), repeatable for a seed.
std::unique_ptr<data::BatchSource> MakeSyntheticInput(const models::ModelDefinition& model,
                                                      int64_t batch_size, uint64_t seed);

}  // namespace psflow

#endif  // PSFLOW_WORKER_WORKER_INPUT_H_
