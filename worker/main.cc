// psflow-worker: trains one replica of a model between-graph against the ps tasks of its cluster
// spec ($TF_CONFIG, or the seed scripts' flags). With no cluster spec at all it trains alone,
// in process, with no ps.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/status_macros.h"
#include "core/task_flags.h"
#include "core/task_main.h"
#include "core/wire_type.h"
#include "worker/backend/cuda/devices.h"
#include "worker/evaluation.h"
#include "worker/evaluator.h"
#include "worker/gpu_monitor.h"
#include "worker/models/model_zoo.h"
#include "worker/nn/loss_scale.h"
#include "worker/nn/precision.h"
#include "worker/nn/towers.h"
#include "worker/ps_client.h"
#include "worker/trainer.h"
#include "worker/worker_input.h"

ABSL_FLAG(std::string, model, "mnist_mlp",
          "Model to train: mnist_mlp, mnist_cnn, cifar10_cnn or ptb_lstm. Flags left unset take "
          "the model's seed hyper-parameters (batch size, learning rate and its schedule, "
          "optimizer, epochs, gradient clipping)");
ABSL_FLAG(std::string, model_config, "",
          "ptb_lstm: the seed's configuration, small (default), medium, large or test");
ABSL_FLAG(int64_t, batch_size, 0, "Examples per step (0: the model's)");
ABSL_FLAG(float, learning_rate, 0, "The optimizer's initial learning rate (0: the model's)");
ABSL_FLAG(std::string, optimizer, "",
          "Update rule the ps applies: sgd, momentum, adagrad, adam or rmsprop (TensorFlow 1's "
          "definitions and defaults; empty: the model's)");
ABSL_FLAG(float, momentum, 0, "momentum (default 0.9) and rmsprop (default 0): the momentum");
ABSL_FLAG(bool, use_nesterov, false, "momentum: Nesterov's variant");
ABSL_FLAG(float, max_grad_norm, -1,
          "Clip the gradients by their global norm before each push (0: no clipping; negative: "
          "the model's)");
ABSL_FLAG(std::string, wire_dtype, "float32",
          "Element type of parameters and gradients between worker and ps: float32, bfloat16 or "
          "float16 (half the bytes; the ps keeps float32 master values)");
ABSL_FLAG(bool, sync_replicas, false,
          "Synchronous training: each step averages the gradients of --replicas_to_aggregate "
          "workers (TensorFlow's SyncReplicasOptimizer); otherwise every push is applied at once");
ABSL_FLAG(bool, overlap, true,
          "Asynchronous training through ps tasks: push each step's gradients and pull the "
          "parameters on a background thread while the next step computes (that step then lacks "
          "this worker's previous gradients: a delay of one step). Off, or in sync mode, or with "
          "no ps: pull, compute and push one after the other");
ABSL_FLAG(int, replicas_to_aggregate, 0,
          "Sync mode: gradients per step (0: every worker). Fewer than the workers leaves the "
          "rest as backup workers");
ABSL_FLAG(int, train_epochs, 0,
          "Passes over this worker's shard (ignored if --train_steps > 0; 0: the model's)");
ABSL_FLAG(int64_t, train_steps, 0, "Steps this worker runs; 0 means use --train_epochs");
ABSL_FLAG(std::string, data_source, "real",
          "real: read the model's dataset from --data_path; synthetic: random batches of the "
          "right shape, for throughput measurements (no evaluation)");
ABSL_FLAG(std::string, data_path, "",
          "Directory of the model's dataset: MNIST-format idx files (default "
          "/usr/share/datasets/fashion-mnist), CIFAR-10 binary batches, or ptb.{train,valid,"
          "test}.txt");
ABSL_FLAG(int64_t, eval_steps, 0,
          "Language models: at most this many batches of each evaluation (0: the whole valid "
          "and test sets; the test set runs one word per step, as the seed)");
ABSL_FLAG(double, eval_interval_s, 30,
          "Evaluator tasks: seconds between looks at the ps for new parameters to evaluate");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the initial parameters and the batch order");
ABSL_FLAG(int64_t, log_every_steps, 100, "Progress line every N steps (0: none)");
ABSL_FLAG(int, compute_threads, 0,
          "Threads for the CPU backend: its matrix products and its own loops (0: one per "
          "core). Use 1 when several workers share a machine");
ABSL_FLAG(std::string, device, "cpu",
          "cpu: the OpenBLAS backend; gpu: the CUDA backend (cuBLAS, cuDNN) on GPU --gpu");
ABSL_FLAG(int, gpu, 0, "--device=gpu: index of the GPU among the visible ones");
ABSL_FLAG(int, num_gpus, 1,
          "--device=gpu: GPUs this worker trains on, --gpu and the ones after it. Each takes a "
          "slice of every batch (synchronous towers); their averaged gradients make one push");
ABSL_FLAG(std::string, dtype, "fp32",
          "--device=gpu: what matrix products, convolutions and RNN cells compute in: fp32 "
          "(exact), tf32, bf16 or fp16 (tensor cores, fp32 accumulation). Parameters, gradients "
          "and activations stay fp32; the ps keeps fp32 master weights");
ABSL_FLAG(bool, use_fp16, false, "The seed's flag: the same as --dtype=fp16");
ABSL_FLAG(bool, tf32, false, "The same as --dtype=tf32");
ABSL_FLAG(std::string, loss_scale, "auto",
          "auto: dynamic with --dtype=fp16, none otherwise; none; dynamic (starts at 65536, halves "
          "on a step whose gradients are not finite, which is skipped, doubles after 2000 finite "
          "steps); or a positive number (a static scale)");
ABSL_FLAG(bool, cuda_graphs, false,
          "--device=gpu: record one training step of the full batch as a CUDA graph and replay "
          "it (fewer launches: helps small, launch-bound steps); checked against an eager step "
          "first, eager on any failure. Not yet measured on a GPU, hence off");
ABSL_FLAG(int, ps_timeout_s, 60,
          "Seconds to keep retrying an unreachable ps, or waiting for the chief to initialise");

namespace psflow {
namespace {

// The flag's value unless it is `unset` (its default), else the model's seed value.
template <class T>
T FlagOr(const absl::Flag<T>& flag, T unset, T recipe_value) {
  const T value = absl::GetFlag(flag);
  return value == unset ? recipe_value : value;
}

absl::StatusOr<WireType> ParseWireType(const std::string& wire) {
  if (wire == "float32") return WireType::kFloat32;
  if (wire == "bfloat16") return WireType::kBfloat16;
  if (wire == "float16") return WireType::kFloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("--wire_dtype must be float32, bfloat16 or float16, got \"", wire, "\""));
}

// --dtype, with the older spellings --use_fp16 and --tf32 folded in.
absl::StatusOr<nn::Precision> ResolvePrecision(const std::string& device) {
  absl::StatusOr<nn::Precision> parsed = nn::ParsePrecision(absl::GetFlag(FLAGS_dtype));
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--dtype ", parsed.status().message()));
  }
  nn::Precision p = *parsed;
  for (const auto& [set, implied, flag] :
       {std::tuple{absl::GetFlag(FLAGS_use_fp16), nn::Precision::kFp16, "--use_fp16"},
        std::tuple{absl::GetFlag(FLAGS_tf32), nn::Precision::kTf32, "--tf32"}}) {
    if (!set) continue;
    if (p != nn::Precision::kFp32 && p != implied) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " contradicts --dtype=", nn::PrecisionName(p)));
    }
    p = implied;
  }
  if (p != nn::Precision::kFp32 && device != "gpu") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dtype=", nn::PrecisionName(p), " needs --device=gpu: the CPU backend computes in fp32"));
  }
  return p;
}

// --loss_scale; "auto" is dynamic for fp16 products.
absl::StatusOr<nn::LossScaleOptions> ResolveLossScale(nn::Precision precision) {
  std::string text = absl::GetFlag(FLAGS_loss_scale);
  if (text == "auto") text = precision == nn::Precision::kFp16 ? "dynamic" : "none";
  absl::StatusOr<nn::LossScaleOptions> o = nn::ParseLossScale(text);
  if (!o.ok())
    return absl::InvalidArgumentError(absl::StrCat("--loss_scale ", o.status().message()));
  return o;
}

// Test accuracy (classifiers) or valid/test perplexity (language models) of the final model.
absl::Status EvaluateAndReport(const models::ZooModel& zoo, nn::Model& model, nn::Backend& backend,
                               const WorkerInput& input, const ClusterSpec& spec, bool is_chief,
                               const TrainResult& r, WorkerMetrics* metrics) {
  const std::string head = absl::StrFormat(
      "%s %d done: steps=%d examples=%d seconds=%.3f examples_per_sec=%.1f global_step=%d "
      "loss=%.4f pull_ms=%.3f compute_ms=%.3f push_ms=%.3f input_wait_ms=%.3f dropped_pushes=%d "
      "exchange_ms=%.3f skipped_steps=%d loss_scale=%g",
      spec.task.type, spec.task.index, r.steps, r.examples, r.seconds, r.examples_per_second(),
      r.global_step, r.last_loss, 1e3 * r.pull_seconds / r.steps, 1e3 * r.compute_seconds / r.steps,
      1e3 * r.push_seconds / r.steps, 1e3 * r.input_wait_seconds / r.steps, r.dropped_pushes,
      1e3 * r.exchange_seconds / r.steps, r.skipped_steps, r.loss_scale);
  if (input.test.has_value()) {
    ASSIGN_OR_RETURN(const ClassifierEvaluation e, EvaluateClassifier(model, *input.test));
    if (metrics != nullptr) metrics->test_accuracy.Set(e.accuracy);
    PSFLOW_LOG(INFO) << absl::StrFormat("%s test_loss=%.4f test_accuracy=%.4f", head, e.loss,
                                        e.accuracy);
    return absl::OkStatus();
  }
  if (!input.corpus.has_value()) {  // synthetic data
    // Words per second only where words mean something: a classifier's would repeat its examples.
    if (zoo.data == models::DataKind::kPtb) {
      PSFLOW_LOG(INFO) << absl::StrFormat("%s words_per_sec=%.1f", head, r.words_per_second());
    } else {
      PSFLOW_LOG(INFO) << head;
    }
    return absl::OkStatus();
  }
  std::string perplexities = absl::StrFormat(" train_perplexity=%.3f", r.train_perplexity);
  // Evaluation of a language model is the chief's: the test pass runs one word per step.
  if (is_chief) {
    const int64_t max_batches = absl::GetFlag(FLAGS_eval_steps);
    ASSIGN_OR_RETURN(const double valid, EvaluatePerplexity(model, input.corpus->valid,
                                                            model.max_batch(), max_batches));
    ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> test_model,
                     nn::Model::Create(zoo.eval_spec, backend, 1));
    std::span<const float> trained = model.params().values();
    std::copy(trained.begin(), trained.end(), test_model->params().values().begin());
    test_model->UploadParameters();
    ASSIGN_OR_RETURN(const double test,
                     EvaluatePerplexity(*test_model, input.corpus->test, 1, max_batches));
    if (metrics != nullptr) metrics->test_perplexity.Set(test);
    absl::StrAppendFormat(&perplexities, " valid_perplexity=%.3f test_perplexity=%.3f", valid,
                          test);
  }
  PSFLOW_LOG(INFO) << absl::StrFormat("%s words=%d words_per_sec=%.1f%s", head, r.words,
                                      r.words_per_second(), perplexities);
  return absl::OkStatus();
}

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
  if (spec.task.type != "worker" && spec.task.type != "chief" && spec.task.type != "evaluator") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "psflow-worker runs worker, chief or evaluator tasks, but the cluster spec says task type "
        "\"%s\"",
        spec.task.type));
  }
  const bool is_evaluator = spec.task.type == "evaluator";
  // A chief trains too (TensorFlow's convention): it takes shard 0 and the workers the rest.
  const bool has_chief = !spec.Tasks("chief").empty();
  const int num_trainers = static_cast<int>(spec.Tasks("worker").size()) + (has_chief ? 1 : 0);
  const int shard_index =
      spec.task.type == "chief" || is_evaluator ? 0 : spec.task.index + (has_chief ? 1 : 0);
  const bool is_chief = standalone || spec.IsChief();
  const auto& ps_hosts = spec.Tasks("ps");
  if (ps_hosts.empty() && num_trainers > 1) {
    return absl::InvalidArgumentError("several workers need at least one ps task to share with");
  }
  if (ps_hosts.empty() && is_evaluator) {
    return absl::InvalidArgumentError(
        "an evaluator follows the ps tasks, and the cluster has none");
  }
  if (absl::GetFlag(FLAGS_eval_interval_s) <= 0) {
    return absl::InvalidArgumentError("--eval_interval_s must be > 0");
  }

  ASSIGN_OR_RETURN(
      const models::ZooModel zoo,
      models::FindModel(absl::GetFlag(FLAGS_model), absl::GetFlag(FLAGS_model_config)));
  const models::Recipe& recipe = zoo.recipe;
  const int64_t batch_size = FlagOr<int64_t>(FLAGS_batch_size, 0, recipe.batch_size);
  const float learning_rate = FlagOr(FLAGS_learning_rate, 0.0f, recipe.learning_rate);
  const float max_grad_norm = absl::GetFlag(FLAGS_max_grad_norm) < 0
                                  ? recipe.max_grad_norm
                                  : absl::GetFlag(FLAGS_max_grad_norm);
  const int train_epochs = FlagOr(FLAGS_train_epochs, 0, recipe.epochs);
  if (batch_size < 1) return absl::InvalidArgumentError("--batch_size must be >= 1");
  if (!(learning_rate > 0)) return absl::InvalidArgumentError("--learning_rate must be > 0");
  // Checked before anything else, also where no ps is used, so a typo never passes silently.
  ASSIGN_OR_RETURN(const WireType wire_type, ParseWireType(absl::GetFlag(FLAGS_wire_dtype)));
  if (std::isnan(max_grad_norm)) return absl::InvalidArgumentError("--max_grad_norm is NaN");
  if (absl::GetFlag(FLAGS_replicas_to_aggregate) < 0 ||
      absl::GetFlag(FLAGS_replicas_to_aggregate) > std::max(num_trainers, 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--replicas_to_aggregate must be in [0, %d] (the number of workers), got %d",
        std::max(num_trainers, 1), absl::GetFlag(FLAGS_replicas_to_aggregate)));
  }
  TrainingConfig training;
  training.optimizer.set_name(FlagOr(FLAGS_optimizer, std::string(), recipe.optimizer));
  training.optimizer.set_learning_rate(learning_rate);
  training.optimizer.set_momentum(absl::GetFlag(FLAGS_momentum));
  training.optimizer.set_use_nesterov(absl::GetFlag(FLAGS_use_nesterov));
  training.sync.set_sync_replicas(absl::GetFlag(FLAGS_sync_replicas));
  training.sync.set_replicas_to_aggregate(absl::GetFlag(FLAGS_replicas_to_aggregate));
  training.sync.set_total_workers(std::max(num_trainers, 1));
  training.worker_index = shard_index;
  // Check the optimizer here, in one line, rather than on the ps.
  RETURN_IF_ERROR(LocalUpdate::Create(training).status());
  if (absl::GetFlag(FLAGS_train_steps) < 0 ||
      (absl::GetFlag(FLAGS_train_steps) == 0 && train_epochs < 1)) {
    return absl::InvalidArgumentError("--train_epochs must be >= 1 (or --train_steps >= 1)");
  }
  const std::string data_source = absl::GetFlag(FLAGS_data_source);
  if (data_source != "real" && data_source != "synthetic") {
    return absl::InvalidArgumentError(
        absl::StrCat("--data_source must be real or synthetic, got \"", data_source, "\""));
  }
  if (is_evaluator && data_source == "synthetic") {
    return absl::InvalidArgumentError(
        "an evaluator needs a test split: --data_source=synthetic has none");
  }
  if (absl::GetFlag(FLAGS_eval_steps) < 0) {
    return absl::InvalidArgumentError("--eval_steps must be >= 0");
  }
  if (absl::GetFlag(FLAGS_compute_threads) < 0 ||
      absl::GetFlag(FLAGS_compute_threads) > nn::kMaxCpuThreads) {
    return absl::InvalidArgumentError(absl::StrCat("--compute_threads must be between 0 and ",
                                                   nn::kMaxCpuThreads, " (0: one per core)"));
  }
  const std::string device = absl::GetFlag(FLAGS_device);
  if (device != "cpu" && device != "gpu") {
    return absl::InvalidArgumentError(
        absl::StrCat("--device must be cpu or gpu, got \"", device, "\""));
  }
  if (absl::GetFlag(FLAGS_gpu) < 0) return absl::InvalidArgumentError("--gpu must be >= 0");
  const int num_gpus = absl::GetFlag(FLAGS_num_gpus);
  if (num_gpus < 1) return absl::InvalidArgumentError("--num_gpus must be >= 1");
  if (num_gpus > 1 && device != "gpu") {
    return absl::InvalidArgumentError("--num_gpus > 1 needs --device=gpu");
  }
  if (absl::GetFlag(FLAGS_cuda_graphs) && device != "gpu") {
    return absl::InvalidArgumentError("--cuda_graphs needs --device=gpu");
  }
  if (absl::GetFlag(FLAGS_ps_timeout_s) < 1) {
    return absl::InvalidArgumentError("--ps_timeout_s must be >= 1");
  }
  ASSIGN_OR_RETURN(const int metrics_port, ResolveMetricsPort());
  ASSIGN_OR_RETURN(const nn::Precision precision, ResolvePrecision(device));
  ASSIGN_OR_RETURN(const nn::LossScaleOptions loss_scale, ResolveLossScale(precision));

  // The device before the data: a worker that cannot get its GPU says so at once.
  // One backend per GPU (towers), else one.
  std::vector<std::unique_ptr<nn::Backend>> backends;
  std::string backend_name = "the CPU backend";
  if (device == "gpu") {
    const int first = absl::GetFlag(FLAGS_gpu);
    for (int i = 0; i < num_gpus; ++i) {
      absl::StatusOr<std::unique_ptr<nn::Backend>> b = nn::MakeCudaBackend(first + i, precision);
      if (!b.ok()) {
        return num_gpus == 1 ? b.status()
                             : absl::Status(b.status().code(),
                                            absl::StrCat("--gpu=", first, " --num_gpus=", num_gpus,
                                                         ": ", b.status().message()));
      }
      backends.push_back(*std::move(b));
    }
    backend_name = absl::StrCat(num_gpus == 1 ? "GPU " : "GPUs ", first,
                                num_gpus == 1 ? "" : absl::StrCat("-", first + num_gpus - 1), " (",
                                nn::PrecisionName(precision), " products",
                                absl::GetFlag(FLAGS_cuda_graphs) ? ", CUDA graphs" : "", ")");
  } else {
    const int threads = absl::GetFlag(FLAGS_compute_threads);
    backends.push_back(nn::MakeCpuBackend(threads));
    backend_name =
        absl::StrCat("the CPU backend (",
                     threads > 0 ? absl::StrCat(threads, " thread(s)") : "a thread per core", ", ",
                     nn::CpuKernels(), ")");
  }
  InputOptions input_options;
  input_options.synthetic = data_source == "synthetic";
  input_options.data_path = absl::GetFlag(FLAGS_data_path);
  input_options.batch_size = batch_size;
  input_options.shard_index = shard_index;
  input_options.num_shards = std::max(num_trainers, 1);
  input_options.seed = absl::GetFlag(FLAGS_seed);
  ASSIGN_OR_RETURN(std::unique_ptr<WorkerInput> input, LoadWorkerInput(zoo, input_options));

  PSFLOW_LOG(INFO) << cuda::BuildInfo() << (is_evaluator ? "; evaluating " : "; training ")
                   << zoo.spec.name << " on " << backend_name << ": batch " << batch_size << ", "
                   << training.optimizer.name() << " learning rate " << learning_rate
                   << (max_grad_norm > 0 ? absl::StrCat(", clip norm ", max_grad_norm) : "")
                   << (loss_scale.mode == nn::LossScaleOptions::Mode::kNone
                           ? ""
                           : absl::StrCat(", loss scale ",
                                          loss_scale.mode == nn::LossScaleOptions::Mode::kDynamic
                                              ? "dynamic from "
                                              : "",
                                          loss_scale.initial));
  const uint64_t model_seed = absl::GetFlag(FLAGS_seed) * 31 + shard_index;
  // What trains (one model, or towers over the GPUs) and the model that evaluates (tower 0).
  std::unique_ptr<nn::Towers> towers;
  std::unique_ptr<nn::Model> single;
  nn::Trainable* trainable = nullptr;
  nn::Model* model = nullptr;
  if (backends.size() > 1) {
    std::vector<nn::Backend*> raw;
    for (auto& b : backends) raw.push_back(b.get());
    ASSIGN_OR_RETURN(towers, nn::Towers::Create(zoo.spec, raw, batch_size, model_seed));
    trainable = towers.get();
    model = &towers->tower(0);
    if (absl::GetFlag(FLAGS_cuda_graphs)) towers->EnableGraphs();
  } else {
    ASSIGN_OR_RETURN(single, nn::Model::Create(zoo.spec, *backends[0], batch_size, model_seed));
    trainable = single.get();
    model = single.get();
    if (absl::GetFlag(FLAGS_cuda_graphs)) single->EnableGraphs();
  }

  std::unique_ptr<MetricsEndpoint> endpoint;
  std::unique_ptr<WorkerMetrics> metrics;
  if (metrics_port >= 0) {
    ASSIGN_OR_RETURN(endpoint, MetricsEndpoint::Start("0.0.0.0", metrics_port));
    metrics = std::make_unique<WorkerMetrics>(endpoint->registry(),
                                              StandardLabels(spec.task.type, spec.task.index));
    PSFLOW_LOG(INFO) << "metrics on :" << endpoint->port() << "/metrics";
  }
  // GPU utilization and memory, when the NVIDIA driver's NVML is there to ask.
  std::unique_ptr<GpuMonitor> gpu_monitor;
  std::unique_ptr<GpuMetricsExporter> gpu_metrics;
  if (metrics != nullptr && device == "gpu") {
    absl::StatusOr<std::unique_ptr<GpuMonitor>> opened = GpuMonitor::Open();
    if (opened.ok()) {
      gpu_monitor = *std::move(opened);
      std::vector<MonitoredGpu> gpus;
      for (int i = 0; i < num_gpus; ++i) {
        const int gpu = absl::GetFlag(FLAGS_gpu) + i;
        gpus.push_back({gpu, cuda::PciBusId(gpu)});
      }
      gpu_metrics = std::make_unique<GpuMetricsExporter>(
          *gpu_monitor, endpoint->registry(), StandardLabels(spec.task.type, spec.task.index),
          std::move(gpus), std::chrono::seconds(1));
    } else {
      PSFLOW_LOG(WARNING) << opened.status().message() << "; no GPU metrics";
    }
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

  if (is_evaluator) {
    EvaluatorOptions evaluator;
    evaluator.interval = absl::Seconds(absl::GetFlag(FLAGS_eval_interval_s));
    evaluator.eval_steps = absl::GetFlag(FLAGS_eval_steps);
    evaluator.name = absl::StrCat("evaluator ", spec.task.index);
    return RunEvaluator(*model, *sync, *input, evaluator, metrics.get());
  }

  TrainerOptions options;
  options.train_steps = absl::GetFlag(FLAGS_train_steps);
  options.train_epochs = train_epochs;
  options.is_chief = is_chief;
  options.seed = absl::GetFlag(FLAGS_seed);
  options.log_every_steps = absl::GetFlag(FLAGS_log_every_steps);
  options.max_grad_norm = max_grad_norm;
  options.learning_rate = learning_rate;
  options.schedule = recipe.schedule;
  options.overlap =
      absl::GetFlag(FLAGS_overlap) && !ps_hosts.empty() && !absl::GetFlag(FLAGS_sync_replicas);
  options.loss_scale = loss_scale;
  data::Prefetcher prefetcher(std::move(input->train));
  Trainer trainer(*trainable, *sync, prefetcher, options, metrics.get());
  ASSIGN_OR_RETURN(const TrainResult r, trainer.Run());
  // Towers upload on their threads at the next step, which never comes: tower 0 evaluates here,
  // on this thread (bound to its GPU), with the final parameters.
  if (towers != nullptr) model->UploadParameters();
  return EvaluateAndReport(zoo, *model, *backends[0], *input, spec, is_chief, r, metrics.get());
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  return psflow::RunTaskMain(
      argc, argv, "psflow-worker",
      "trains one replica of a model against the ps tasks of its cluster.\n"
      "  psflow-worker [--model=NAME] [flags]  with $TF_CONFIG set, or with --job_name=worker\n"
      "      --task_index=N --ps_hosts=H:P,... --worker_hosts=H:P,...; with neither, trains alone",
      psflow::Main);
}
