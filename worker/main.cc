// psflow-worker: trains one replica of a model between-graph against the ps tasks of its cluster
// spec ($TF_CONFIG, or the seed scripts' flags). With no cluster spec at all it trains alone,
// in process, with no ps.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/status_macros.h"
#include "core/task_flags.h"
#include "core/task_main.h"
#include "worker/backend/cuda/devices.h"
#include "worker/data/mnist.h"
#include "worker/models/model_zoo.h"
#include "worker/ps_client.h"
#include "worker/trainer.h"

ABSL_FLAG(std::string, model, "mnist_mlp", "Model to train: mnist_mlp");
ABSL_FLAG(int64_t, batch_size, 100, "Examples per step");
ABSL_FLAG(float, learning_rate, 0.001f, "The optimizer's learning rate");
ABSL_FLAG(std::string, optimizer, "sgd",
          "Update rule the ps applies: sgd, momentum, adagrad, adam or rmsprop (TensorFlow 1's "
          "definitions and defaults)");
ABSL_FLAG(float, momentum, 0, "momentum (default 0.9) and rmsprop (default 0): the momentum");
ABSL_FLAG(bool, use_nesterov, false, "momentum: Nesterov's variant");
ABSL_FLAG(float, max_grad_norm, 0,
          "Clip the gradients by their global norm before each push (0: no clipping)");
ABSL_FLAG(std::string, wire_dtype, "float32",
          "Element type of parameters and gradients between worker and ps: float32, bfloat16 or "
          "float16 (half the bytes; the ps keeps float32 master values)");
ABSL_FLAG(bool, sync_replicas, false,
          "Synchronous training: each step averages the gradients of --replicas_to_aggregate "
          "workers (TensorFlow's SyncReplicasOptimizer); otherwise every push is applied at once");
ABSL_FLAG(int, replicas_to_aggregate, 0,
          "Sync mode: gradients per step (0: every worker). Fewer than the workers leaves the "
          "rest as backup workers");
ABSL_FLAG(int, train_epochs, 1, "Passes over this worker's shard (ignored if --train_steps > 0)");
ABSL_FLAG(int64_t, train_steps, 0, "Steps this worker runs; 0 means use --train_epochs");
ABSL_FLAG(std::string, data_path, "/usr/share/datasets/fashion-mnist",
          "Directory with the MNIST-format idx files");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the initial parameters and the batch order");
ABSL_FLAG(int64_t, log_every_steps, 100, "Progress line every N steps (0: none)");
ABSL_FLAG(int, compute_threads, 0,
          "Threads for the CPU backend's matrix products (0: one per core). Use 1 when several "
          "workers share a machine");
ABSL_FLAG(int, ps_timeout_s, 60,
          "Seconds to keep retrying an unreachable ps, or waiting for the chief to initialise");

namespace psflow {
namespace {

absl::Status Main() {
  const char* tf_config = std::getenv("TF_CONFIG");
  // Alone only when nothing names a cluster: a half-given one is an error, not a solo run.
  const bool standalone =
      (tf_config == nullptr || *tf_config == '\0') && absl::GetFlag(FLAGS_job_name).empty() &&
      absl::GetFlag(FLAGS_task_index) < 0 && absl::GetFlag(FLAGS_ps_hosts).empty() &&
      absl::GetFlag(FLAGS_worker_hosts).empty();
  ClusterSpec spec;
  if (standalone) {
    spec.cluster["worker"] = {"localhost:0"};
    spec.task = {"worker", 0};
  } else {
    ASSIGN_OR_RETURN(spec, ResolveClusterSpec());
  }
  if (spec.task.type != "worker" && spec.task.type != "chief") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "psflow-worker runs worker or chief tasks, but the cluster spec says task type \"%s\"",
        spec.task.type));
  }
  // A chief trains too (TensorFlow's convention): it takes shard 0 and the workers the rest.
  const bool has_chief = !spec.Tasks("chief").empty();
  const int num_trainers = static_cast<int>(spec.Tasks("worker").size()) + (has_chief ? 1 : 0);
  const int shard_index = spec.task.type == "chief" ? 0 : spec.task.index + (has_chief ? 1 : 0);
  const auto& ps_hosts = spec.Tasks("ps");
  if (ps_hosts.empty() && num_trainers > 1) {
    return absl::InvalidArgumentError("several workers need at least one ps task to share with");
  }
  if (absl::GetFlag(FLAGS_batch_size) < 1) {
    return absl::InvalidArgumentError("--batch_size must be >= 1");
  }
  if (!(absl::GetFlag(FLAGS_learning_rate) > 0)) {
    return absl::InvalidArgumentError("--learning_rate must be > 0");
  }
  // Checked before anything else, also where no ps is used, so a typo never passes silently.
  WireType wire_type = WireType::kFloat32;
  const std::string wire = absl::GetFlag(FLAGS_wire_dtype);
  if (wire == "bfloat16") {
    wire_type = WireType::kBfloat16;
  } else if (wire == "float16") {
    wire_type = WireType::kFloat16;
  } else if (wire != "float32") {
    return absl::InvalidArgumentError(
        absl::StrCat("--wire_dtype must be float32, bfloat16 or float16, got \"", wire, "\""));
  }
  if (!(absl::GetFlag(FLAGS_max_grad_norm) >= 0)) {
    return absl::InvalidArgumentError("--max_grad_norm must be >= 0");
  }
  if (absl::GetFlag(FLAGS_replicas_to_aggregate) < 0 ||
      absl::GetFlag(FLAGS_replicas_to_aggregate) > std::max(num_trainers, 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--replicas_to_aggregate must be in [0, %d] (the number of workers), got %d",
        std::max(num_trainers, 1), absl::GetFlag(FLAGS_replicas_to_aggregate)));
  }
  TrainingConfig training;
  training.optimizer.set_name(absl::GetFlag(FLAGS_optimizer));
  training.optimizer.set_learning_rate(absl::GetFlag(FLAGS_learning_rate));
  training.optimizer.set_momentum(absl::GetFlag(FLAGS_momentum));
  training.optimizer.set_use_nesterov(absl::GetFlag(FLAGS_use_nesterov));
  training.sync.set_sync_replicas(absl::GetFlag(FLAGS_sync_replicas));
  training.sync.set_replicas_to_aggregate(absl::GetFlag(FLAGS_replicas_to_aggregate));
  training.sync.set_total_workers(std::max(num_trainers, 1));
  training.worker_index = shard_index;
  // Check the optimizer here, in one line, rather than on the ps.
  RETURN_IF_ERROR(LocalUpdate::Create(training).status());
  if (absl::GetFlag(FLAGS_train_steps) < 0 ||
      (absl::GetFlag(FLAGS_train_steps) == 0 && absl::GetFlag(FLAGS_train_epochs) < 1)) {
    return absl::InvalidArgumentError("--train_epochs must be >= 1 (or --train_steps >= 1)");
  }
  if (absl::GetFlag(FLAGS_compute_threads) < 0) {
    return absl::InvalidArgumentError("--compute_threads must be >= 0");
  }
  if (absl::GetFlag(FLAGS_ps_timeout_s) < 1) {
    return absl::InvalidArgumentError("--ps_timeout_s must be >= 1");
  }
  ASSIGN_OR_RETURN(const int metrics_port, ResolveMetricsPort());

  ASSIGN_OR_RETURN(nn::ModelSpec model_spec, models::ModelByName(absl::GetFlag(FLAGS_model)));
  const std::string data_path = absl::GetFlag(FLAGS_data_path);
  ASSIGN_OR_RETURN(data::Dataset train, data::LoadMnist(data_path, data::Split::kTrain));
  ASSIGN_OR_RETURN(data::Dataset test, data::LoadMnist(data_path, data::Split::kTest));
  PSFLOW_LOG(INFO) << "loaded " << train.size() << " training and " << test.size()
                   << " test examples from " << data_path;
  const int64_t shard_size = data::ShardRange(train.size(), shard_index, num_trainers).size();
  if (absl::GetFlag(FLAGS_batch_size) > shard_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--batch_size=%d is larger than this worker's shard (%d examples)",
                        absl::GetFlag(FLAGS_batch_size), shard_size));
  }

  PSFLOW_LOG(INFO) << cuda::BuildInfo() << "; training on the CPU backend";
  std::unique_ptr<nn::Backend> backend = nn::MakeCpuBackend(absl::GetFlag(FLAGS_compute_threads));
  ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> model,
                   nn::Model::Create(model_spec, *backend, absl::GetFlag(FLAGS_batch_size)));

  std::unique_ptr<MetricsEndpoint> endpoint;
  std::unique_ptr<WorkerMetrics> metrics;
  if (metrics_port >= 0) {
    ASSIGN_OR_RETURN(endpoint, MetricsEndpoint::Start("0.0.0.0", metrics_port));
    metrics = std::make_unique<WorkerMetrics>(endpoint->registry(),
                                              StandardLabels(spec.task.type, spec.task.index));
    PSFLOW_LOG(INFO) << "metrics on :" << endpoint->port() << "/metrics";
  }

  std::unique_ptr<ParameterSync> sync;
  if (ps_hosts.empty()) {
    PSFLOW_LOG(INFO) << "no ps task: training in process";
    ASSIGN_OR_RETURN(sync, LocalUpdate::Create(training));
  } else {
    PsClient::Options options;
    options.ps_addresses = ps_hosts;
    options.training = training;
    options.wire_type = wire_type;
    options.connect_timeout = std::chrono::seconds(absl::GetFlag(FLAGS_ps_timeout_s));
    ASSIGN_OR_RETURN(auto client, PsClient::Create(options, model->params()));
    sync = std::move(client);
  }

  TrainerOptions options;
  options.batch_size = absl::GetFlag(FLAGS_batch_size);
  options.train_steps = absl::GetFlag(FLAGS_train_steps);
  options.train_epochs = absl::GetFlag(FLAGS_train_epochs);
  options.shard_index = shard_index;
  options.num_shards = std::max(num_trainers, 1);
  options.is_chief = standalone || spec.IsChief();
  options.seed = absl::GetFlag(FLAGS_seed);
  options.log_every_steps = absl::GetFlag(FLAGS_log_every_steps);
  options.max_grad_norm = absl::GetFlag(FLAGS_max_grad_norm);
  Trainer trainer(*model, *sync, train, test, options, metrics.get());
  ASSIGN_OR_RETURN(TrainResult r, trainer.Run());
  PSFLOW_LOG(INFO) << absl::StrFormat(
      "%s %d done: steps=%d examples=%d seconds=%.3f examples_per_sec=%.1f global_step=%d "
      "loss=%.4f test_loss=%.4f test_accuracy=%.4f pull_ms=%.3f compute_ms=%.3f push_ms=%.3f "
      "dropped_pushes=%d",
      spec.task.type, spec.task.index, r.steps, r.examples, r.seconds, r.examples_per_second(),
      r.global_step, r.last_loss, r.test_loss, r.test_accuracy, 1e3 * r.pull_seconds / r.steps,
      1e3 * r.compute_seconds / r.steps, 1e3 * r.push_seconds / r.steps, r.dropped_pushes);
  return absl::OkStatus();
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  return psflow::RunTaskMain(
      argc, argv, "psflow-worker",
      "Trains a model between-graph: psflow-worker [--job_name=worker --task_index=N "
      "--ps_hosts=h:p,... --worker_hosts=h:p,...] or with $TF_CONFIG set",
      psflow::Main);
}
