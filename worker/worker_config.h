// What a worker process is told — its flags and its cluster spec — resolved against its model's
// recipe (flags left unset take the seed's hyper-parameters) and checked in one place, so that
// every contradiction is one INVALID_ARGUMENT line before anything starts.
#ifndef PSFLOW_WORKER_WORKER_CONFIG_H_
#define PSFLOW_WORKER_WORKER_CONFIG_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/cluster_spec.h"
#include "core/placement.h"
#include "core/wire_type.h"
#include "worker/background_exchange.h"
#include "worker/models/model_definition.h"
#include "worker/nn/loss_scale.h"
#include "worker/nn/precision.h"
#include "worker/parameter_sync.h"
#include "worker/ps_client.h"

namespace psflow {

// The worker's flags as given (worker/main.cc defines them; the defaults here are theirs). 0, -1
// or empty where the model's recipe supplies the value.
struct WorkerFlags {
  std::string model{};       // empty: mnist_mlp, unless model_file names one
  std::string model_file{};  // a model file (worker/models/model_file.h) instead of `model`
  std::string model_config{};
  int64_t batch_size = 0;
  float learning_rate = 0;
  std::string optimizer{};
  float momentum = 0;
  bool use_nesterov = false;
  float max_grad_norm = -1;
  std::string wire_dtype = "float32";
  std::string placement = "balanced";
  std::string transport = "bulk";
  bool sync_replicas = false;
  bool overlap = true;
  bool stream_gradients = true;
  bool sparse_pulls = true;
  bool update_on_device = true;
  int replicas_to_aggregate = 0;
  int train_epochs = 0;
  int64_t train_steps = 0;
  double train_seconds = 0;
  std::string data_source = "real";
  std::string data_path{};
  int64_t eval_steps = 0;
  double eval_interval_s = 30;
  uint64_t seed = 1;
  int64_t log_every_steps = 100;
  int compute_threads = 0;
  std::string device = "cpu";
  int gpu = 0;
  int num_gpus = 1;
  std::string dtype = "fp32";
  bool use_fp16 = false;
  bool tf32 = false;
  std::string loss_scale = "auto";
  bool cuda_graphs = false;
  int ps_timeout_s = 60;
  int startup_timeout_s = 0;
  int ps_connections = 1;
  std::string compute = "real";
  std::string export_dir{};
  std::string weights{};
  bool eval_only = false;
};

// --compute: whether steps compute, or replay a step's time without computing
// (worker/replay_trainable.h).
struct ComputeMode {
  enum class Kind { kReal, kReplay, kReplayMeasured };
  Kind kind = Kind::kReal;
  double step_ms = 0;  // kReplay: milliseconds per step
  // As the flag says it, for the done line: "real", "replay:20", "replay:measured".
  std::string label = "real";
  bool replay() const { return kind != Kind::kReal; }
};

struct WorkerConfig {
  // The cluster and this task's place in it. A chief trains too (TensorFlow's convention): it
  // takes shard 0 and the workers the shards after it; an evaluator reads shard 0's test split.
  ClusterSpec spec;
  bool is_chief = false;
  bool is_evaluator = false;
  int num_trainers = 1;  // chief + workers, at least 1
  int shard_index = 0;
  std::vector<std::string> ps_hosts;  // empty: training alone, in process

  // The model and how it trains.
  models::ModelDefinition model;
  int64_t batch_size = 0;
  float learning_rate = 0;
  float max_grad_norm = 0;  // 0: no clipping
  int train_epochs = 0;
  int64_t train_steps = 0;   // 0: train_epochs
  double train_seconds = 0;  // > 0: a time budget for the training loop (TrainerOptions)
  TrainingConfig training;   // optimizer and sync settings, as the ps gets them
  WireType wire_type = WireType::kFloat32;
  PlacementStrategy placement = PlacementStrategy::kBalanced;  // of the variables on the ps tasks
  Transport transport = Transport::kBulk;  // of the tensor bytes to and from the ps tasks
  bool overlap = false;                    // asynchronous through ps tasks only
  bool stream_gradients = true;
  bool sparse_pulls = true;      // pulls bring only the embedding rows a step reads
  bool update_on_device = true;  // no ps, on GPUs: the optimizer on the (first) GPU
  nn::LossScaleOptions loss_scale;

  // Data and reporting.
  bool synthetic = false;
  std::string data_path{};
  int64_t eval_steps = 0;
  absl::Duration eval_interval;
  uint64_t seed = 1;
  int64_t log_every_steps = 0;

  // The device.
  bool gpu = false;
  int compute_threads = 0;  // CPU: 0 is one per core
  int first_gpu = 0;
  int num_gpus = 1;
  nn::Precision precision = nn::Precision::kFp32;
  bool cuda_graphs = false;
  // --ps_timeout_s: how long an unreachable ps is retried and the chief waited for once training
  // has begun, and the deadline of every call to a ps (a parked sync pull: twice it).
  std::chrono::seconds ps_timeout{60};
  // --startup_timeout_s: how long the worker waits at the start for its ps tasks to be reachable
  // and initialised by the chief; 0: as long as it takes.
  std::chrono::seconds startup_timeout{0};
  // --ps_connections: connections to each ps task (PsClient::Options::connections_per_task).
  int ps_connections = 1;
  ComputeMode compute;

  // The model taken away and brought back (worker/model_weights.h).
  std::string export_dir{};  // the chief writes the trained model here; empty: nowhere
  std::string weights{};     // --eval_only: the safetensors evaluated
  bool eval_only = false;    // evaluate `weights` on the test data instead of training
};

// `spec` is the resolved cluster (core/task_flags.h); `standalone` when nothing named one (the
// worker then trains alone as the chief of a one-worker cluster). INVALID_ARGUMENT, naming the
// flag, for every value out of range and every contradiction between flags, the cluster and the
// model; NOT_FOUND for an unknown model or configuration.
absl::StatusOr<WorkerConfig> MakeWorkerConfig(const WorkerFlags& flags, const ClusterSpec& spec,
                                              bool standalone);

// The ps client's options for a worker configured as `c` (ps_hosts not empty): its ps tasks,
// training config, wire type and placement, `security`, c.ps_timeout as both the connect
// timeout and the call deadline, c.startup_timeout and c.ps_connections.
PsClient::Options MakePsClientOptions(const WorkerConfig& c, const TransportSecurity& security);

// The overlapped exchange's hand-over (background_exchange.h) for a worker configured as `c`:
// kSwap, except where a recorded CUDA graph writes each layer's gradients to the host buffer it
// was recorded with: --cuda_graphs on one GPU with steps that stream their gradients to the host
// per layer (no clipping, no loss scaling). Towers never record such copies.
HandOver HandOverFor(const WorkerConfig& c);

}  // namespace psflow

#endif  // PSFLOW_WORKER_WORKER_CONFIG_H_
