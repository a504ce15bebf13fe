// What a worker trains on, built from its WorkerConfig: the backends (the CPU backend, or one
// CUDA backend per GPU) and the model on them (one Model, or synchronous towers over the GPUs).
#ifndef PSFLOW_WORKER_TRAINABLE_FACTORY_H_
#define PSFLOW_WORKER_TRAINABLE_FACTORY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/nn/backend.h"
#include "worker/nn/model.h"
#include "worker/nn/towers.h"
#include "worker/nn/trainable.h"
#include "worker/worker_config.h"

namespace psflow {

struct Backends {
  std::vector<std::unique_ptr<nn::Backend>> all;  // one per GPU, or the CPU backend
  // For the start-up line: "the CPU backend (a thread per core, OpenBLAS 0.3.21, ...)" or
  // "GPUs 0-1 (bf16 products, CUDA graphs)".
  std::string description;
};
// The device first, before the data: a worker that cannot get its GPU says so at once. The
// CUDA backend's errors (FAILED_PRECONDITION without a GPU), naming --gpu/--num_gpus when several.
absl::StatusOr<Backends> MakeBackends(const WorkerConfig& config);

struct TrainableModel {
  std::unique_ptr<nn::Towers> towers;  // several backends
  std::unique_ptr<nn::Model> single;   // one
  nn::Trainable* trainable = nullptr;  // what trains: towers or single
  nn::Model* model = nullptr;          // what evaluates: tower 0 or single
};
// The model of config.model on `backends`, seeded by the worker's seed and shard, with CUDA graphs
// when config.cuda_graphs. `backends` must outlive it.
absl::StatusOr<TrainableModel> MakeTrainable(const WorkerConfig& config, const Backends& backends);

}  // namespace psflow

#endif  // PSFLOW_WORKER_TRAINABLE_FACTORY_H_
