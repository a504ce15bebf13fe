// psflow-worker: trains one replica of a model between-graph against the ps tasks of its cluster
// spec ($TF_CONFIG, or the seed scripts' flags). With no cluster spec at all it trains alone,
// in process, with no ps.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/status_macros.h"
#include "core/task_flags.h"
#include "core/task_main.h"
#include "worker/backend/cuda/devices.h"
#include "worker/evaluation.h"
#include "worker/evaluator.h"
#include "worker/gpu_monitor.h"
#include "worker/model_weights.h"
#include "worker/models/model_zoo.h"
#include "worker/overlapped_sync.h"
#include "worker/ps_client.h"
#include "worker/replay_trainable.h"
#include "worker/stop_request.h"
#include "worker/trainable_factory.h"
#include "worker/trainer.h"
#include "worker/worker_config.h"
#include "worker/worker_input.h"

ABSL_FLAG(std::string, model, "",
          "A built-in model to train: mnist_mlp (the default), mnist_cnn, cifar10_cnn or ptb_lstm "
          "(deploy/models). Flags left unset take the model's hyper-parameters (batch size, "
          "learning rate and its schedule, optimizer, epochs, gradient clipping)");
ABSL_FLAG(std::string, model_file, "",
          "Your own model instead of --model: a model file, YAML or JSON (docs/model-files.md; "
          "`psflow validate FILE` checks one)");
ABSL_FLAG(std::string, model_config, "",
          "ptb_lstm: the seed's configuration, small (default), medium, large or test");
ABSL_FLAG(std::string, export_dir, "",
          "The chief writes the trained model here when training ends: model.safetensors (the "
          "parameters, as PyTorch and Hugging Face load them) and model.yaml (its model file)");
ABSL_FLAG(std::string, weights, "",
          "With --eval_only: a model.safetensors (from --export_dir) to evaluate");
ABSL_FLAG(bool, eval_only, false,
          "Evaluate --weights on the model's test data (its valid and test sets for a language "
          "model) instead of training; alone, without a cluster");
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
ABSL_FLAG(std::string, transport, "bulk",
          "How tensor bytes travel to and from the ps tasks: bulk (the bulk channel, plain TCP "
          "beside gRPC, where the ps offers one; gRPC under mutual TLS) or grpc (raw gRPC calls)");
ABSL_FLAG(std::string, placement, "balanced",
          "How the variables are placed on the ps tasks (every worker must agree): balanced (split "
          "into partitions balanced by bytes) or round_robin (TensorFlow 1.x's "
          "replica_device_setter: variable i whole on task i mod n, for comparisons)");
ABSL_FLAG(bool, sync_replicas, false,
          "Synchronous training: each step averages the gradients of --replicas_to_aggregate "
          "workers (TensorFlow's SyncReplicasOptimizer); otherwise every push is applied at once");
ABSL_FLAG(bool, overlap, true,
          "Asynchronous training through ps tasks: push each step's gradients and pull the "
          "parameters on a background thread while the next step computes (that step then lacks "
          "this worker's previous gradients: a delay of one step). Off, or in sync mode, or with "
          "no ps: pull, compute and push one after the other");
ABSL_FLAG(bool, stream_gradients, true,
          "Send each layer's gradients to the ps as backward produces them (steps without "
          "clipping or loss scaling, not with --num_gpus > 1; on a GPU as each layer's copy to "
          "the host lands), the rest at the step's end; false: all after the step, as "
          "TensorFlow 1.x (for comparisons)");
ABSL_FLAG(bool, sparse_pulls, true,
          "Pull only the embedding rows each step reads (the rows of its batch's token ids, as "
          "TensorFlow 1.x gathered them on the ps); false: every row of every variable each step "
          "(for comparisons)");
ABSL_FLAG(bool, update_on_device, true,
          "With no ps task and --device=gpu: the optimizer runs on the GPU (with --num_gpus, on "
          "the first, which then copies the values to the others), its slots in device memory, "
          "and no parameter or gradient crosses to the host per step (towers: where the GPUs "
          "have peer access); false: on the host, as the ps runs it (for comparisons)");
ABSL_FLAG(int, replicas_to_aggregate, 0,
          "Sync mode: gradients per step (0: every worker). Fewer than the workers leaves the "
          "rest as backup workers");
ABSL_FLAG(int, train_epochs, 0,
          "Passes over this worker's shard (ignored if --train_steps > 0; 0: the model's)");
ABSL_FLAG(int64_t, train_steps, 0, "Steps this worker runs; 0 means use --train_epochs");
ABSL_FLAG(double, train_seconds, 0,
          "A time budget: no step starts after the training loop has run this long, and the "
          "worker ends as after its last step (a success). 0: none");
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
ABSL_FLAG(double, export_wait_s, 600,
          "The chief with --export_dir and ps tasks: after its own last step, wait up to this "
          "long for the other workers to finish, so that the exported model holds their updates "
          "too (less when the global step stops moving for 60 s; 0: export what the ps tasks "
          "hold at once)");
ABSL_FLAG(double, final_scrape_wait_s, 30,
          "After training: when a monitoring system (Prometheus) has scraped /metrics, wait up to "
          "this long for its next scrape, so it sees the final test accuracy or perplexity before "
          "the process goes (0: do not wait)");
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
ABSL_FLAG(std::string, compute, "real",
          "real: every step computes its gradients. replay:MS: network-scaling experiments "
          "with more workers than cores: the first step computes the real gradients, every later "
          "step pushes them again after sleeping MS milliseconds instead of computing, split over "
          "the layers' forward and backward as measured at start on this machine (the gradients "
          "go out layer by layer as backward would make them). replay:measured: sleep the "
          "measured times themselves. CPU backend only; nothing is learned and the result is not "
          "evaluated; figures are labelled compute=replay:...");
ABSL_FLAG(int, ps_connections, 1,
          "Connections to each ps task for the tensor bytes (1-64; bulk channel or gRPC): a push "
          "or pull's chunks are spread over them, and the ps reads and applies each connection's "
          "on a thread of its own");
ABSL_FLAG(int, ps_timeout_s, 60,
          "Seconds to keep retrying a ps that became unreachable during training (or waiting for "
          "the chief to re-create it); also the deadline of every call to a ps (a sync pull waits "
          "up to twice it for its step): keep it above the ps's --push_timeout_s and a sync "
          "step's length");
ABSL_FLAG(int, startup_timeout_s, 0,
          "Seconds to wait at the start for the ps tasks to be reachable and, on a worker other "
          "than the chief, for the chief to initialise them, logging every --ps_timeout_s; 0: as "
          "long as it takes (a TrainingJob's schedulingTimeoutSeconds and activeDeadlineSeconds "
          "end a job that never starts)");
ABSL_FLAG(int, stop_grace_s, 25,
          "On SIGTERM a training worker ends after the step in progress, completes its push, "
          "leaves the job and exits 143; it exits at once if that takes longer than this many "
          "seconds (keep it below the pod's terminationGracePeriodSeconds, 30 by default)");

namespace psflow {
namespace {

WorkerFlags FlagsGiven() {
  return WorkerFlags{.model = absl::GetFlag(FLAGS_model),
                     .model_file = absl::GetFlag(FLAGS_model_file),
                     .model_config = absl::GetFlag(FLAGS_model_config),
                     .batch_size = absl::GetFlag(FLAGS_batch_size),
                     .learning_rate = absl::GetFlag(FLAGS_learning_rate),
                     .optimizer = absl::GetFlag(FLAGS_optimizer),
                     .momentum = absl::GetFlag(FLAGS_momentum),
                     .use_nesterov = absl::GetFlag(FLAGS_use_nesterov),
                     .max_grad_norm = absl::GetFlag(FLAGS_max_grad_norm),
                     .wire_dtype = absl::GetFlag(FLAGS_wire_dtype),
                     .placement = absl::GetFlag(FLAGS_placement),
                     .transport = absl::GetFlag(FLAGS_transport),
                     .sync_replicas = absl::GetFlag(FLAGS_sync_replicas),
                     .overlap = absl::GetFlag(FLAGS_overlap),
                     .stream_gradients = absl::GetFlag(FLAGS_stream_gradients),
                     .sparse_pulls = absl::GetFlag(FLAGS_sparse_pulls),
                     .update_on_device = absl::GetFlag(FLAGS_update_on_device),
                     .replicas_to_aggregate = absl::GetFlag(FLAGS_replicas_to_aggregate),
                     .train_epochs = absl::GetFlag(FLAGS_train_epochs),
                     .train_steps = absl::GetFlag(FLAGS_train_steps),
                     .train_seconds = absl::GetFlag(FLAGS_train_seconds),
                     .data_source = absl::GetFlag(FLAGS_data_source),
                     .data_path = absl::GetFlag(FLAGS_data_path),
                     .eval_steps = absl::GetFlag(FLAGS_eval_steps),
                     .eval_interval_s = absl::GetFlag(FLAGS_eval_interval_s),
                     .seed = absl::GetFlag(FLAGS_seed),
                     .log_every_steps = absl::GetFlag(FLAGS_log_every_steps),
                     .compute_threads = absl::GetFlag(FLAGS_compute_threads),
                     .device = absl::GetFlag(FLAGS_device),
                     .gpu = absl::GetFlag(FLAGS_gpu),
                     .num_gpus = absl::GetFlag(FLAGS_num_gpus),
                     .dtype = absl::GetFlag(FLAGS_dtype),
                     .use_fp16 = absl::GetFlag(FLAGS_use_fp16),
                     .tf32 = absl::GetFlag(FLAGS_tf32),
                     .loss_scale = absl::GetFlag(FLAGS_loss_scale),
                     .cuda_graphs = absl::GetFlag(FLAGS_cuda_graphs),
                     .ps_timeout_s = absl::GetFlag(FLAGS_ps_timeout_s),
                     .startup_timeout_s = absl::GetFlag(FLAGS_startup_timeout_s),
                     .ps_connections = absl::GetFlag(FLAGS_ps_connections),
                     .compute = absl::GetFlag(FLAGS_compute),
                     .export_dir = absl::GetFlag(FLAGS_export_dir),
                     .weights = absl::GetFlag(FLAGS_weights),
                     .eval_only = absl::GetFlag(FLAGS_eval_only)};
}

// --eval_only: the exported model of config.weights on the test data (a language model: valid
// and test perplexity, as its training ends).
absl::Status EvaluateWeights(const WorkerConfig& config, nn::Model& model, nn::Backend& backend,
                             const WorkerInput& input) {
  RETURN_IF_ERROR(LoadWeights(config.weights, model.params()));
  if (config.model.language_model()) {
    ASSIGN_OR_RETURN(const double valid, EvaluatePerplexity(model, input.corpus->valid,
                                                            model.max_batch(), config.eval_steps));
    ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> test_model,
                     nn::Model::Create(config.model.eval_spec(), backend, 1));
    test_model->params().CopyValuesFrom(model.params());
    ASSIGN_OR_RETURN(const double test,
                     EvaluatePerplexity(*test_model, input.corpus->test, 1, config.eval_steps));
    PSFLOW_LOG(INFO) << absl::StrFormat(
        "eval_only weights=%s valid_perplexity=%.3f "
        "test_perplexity=%.3f",
        config.weights, valid, test);
    return absl::OkStatus();
  }
  if (!input.test.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("--eval_only: model ", config.model.spec.name,
                                                   "'s data names no test split to evaluate on"));
  }
  ASSIGN_OR_RETURN(const ClassifierEvaluation e, EvaluateClassifier(model, *input.test));
  PSFLOW_LOG(INFO) << absl::StrFormat(
      "eval_only weights=%s examples=%d test_loss=%.4f "
      "test_accuracy=%.4f",
      config.weights, input.test->size(), e.loss, e.accuracy);
  return absl::OkStatus();
}

// Test accuracy (classifiers) or valid/test perplexity (language models) of the final model.
absl::Status EvaluateAndReport(const WorkerConfig& config, nn::Model& model, nn::Backend& backend,
                               const WorkerInput& input, const TrainResult& r,
                               WorkerMetrics* metrics) {
  // Per-step figures of a run that made no step (a time budget spent at start-up) read 0.
  const auto steps = static_cast<double>(std::max<int64_t>(r.steps, 1));
  const std::string head = absl::StrFormat(
      "%s %d done: steps=%d examples=%d seconds=%.3f examples_per_sec=%.1f global_step=%d "
      "loss=%.4f pull_ms=%.3f compute_ms=%.3f push_ms=%.3f input_wait_ms=%.3f dropped_pushes=%d "
      "exchange_ms=%.3f skipped_steps=%d loss_scale=%g pulled_mb_per_step=%.3f "
      "pushed_mb_per_step=%.3f compute=%s",
      config.spec.task.type, config.spec.task.index, r.steps, r.examples, r.seconds,
      r.examples_per_second(), r.global_step, r.last_loss, 1e3 * r.pull_seconds / steps,
      1e3 * r.compute_seconds / steps, 1e3 * r.push_seconds / steps,
      1e3 * r.input_wait_seconds / steps, r.dropped_pushes, 1e3 * r.exchange_seconds / steps,
      r.skipped_steps, r.loss_scale, 1e-6 * static_cast<double>(r.pulled_bytes) / steps,
      1e-6 * static_cast<double>(r.pushed_bytes) / steps, config.compute.label);
  const bool lm = config.model.language_model();
  if (config.compute.replay()) {
    PSFLOW_LOG(INFO) << head
                     << (lm ? absl::StrFormat(" words_per_sec=%.1f", r.words_per_second()) : "")
                     << " (not evaluated: replayed steps push the first step's gradients again, "
                        "so accuracy and perplexity would mean nothing)";
    return absl::OkStatus();
  }
  if (input.test.has_value()) {
    ASSIGN_OR_RETURN(const ClassifierEvaluation e, EvaluateClassifier(model, *input.test));
    if (metrics != nullptr) metrics->test_accuracy.Set(e.accuracy);
    PSFLOW_LOG(INFO) << absl::StrFormat("%s test_loss=%.4f test_accuracy=%.4f", head, e.loss,
                                        e.accuracy);
    return absl::OkStatus();
  }
  if (!input.corpus.has_value()) {  // synthetic data
    // Words per second only where words mean something: a classifier's would repeat its examples.
    if (lm) {
      PSFLOW_LOG(INFO) << absl::StrFormat("%s words_per_sec=%.1f", head, r.words_per_second());
    } else {
      PSFLOW_LOG(INFO) << head;
    }
    return absl::OkStatus();
  }
  std::string perplexities = absl::StrFormat(" train_perplexity=%.3f", r.train_perplexity);
  // Evaluation of a language model is the chief's: the test pass runs one word per step.
  if (config.is_chief) {
    ASSIGN_OR_RETURN(const double valid, EvaluatePerplexity(model, input.corpus->valid,
                                                            model.max_batch(), config.eval_steps));
    ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> test_model,
                     nn::Model::Create(config.model.eval_spec(), backend, 1));
    test_model->params().CopyValuesFrom(model.params());  // the same variables
    ASSIGN_OR_RETURN(const double test,
                     EvaluatePerplexity(*test_model, input.corpus->test, 1, config.eval_steps));
    if (metrics != nullptr) metrics->test_perplexity.Set(test);
    absl::StrAppendFormat(&perplexities, " valid_perplexity=%.3f test_perplexity=%.3f", valid,
                          test);
  }
  PSFLOW_LOG(INFO) << absl::StrFormat("%s words=%d words_per_sec=%.1f%s", head, r.words,
                                      r.words_per_second(), perplexities);
  return absl::OkStatus();
}

// What trains with which hyper-parameters, `where`: "training mnist_cnn on the CPU: batch 128,
// adam learning rate 0.001".
std::string DescribeTraining(const WorkerConfig& c, absl::string_view where) {
  const nn::LossScaleOptions& scale = c.loss_scale;
  return absl::StrCat(
      c.is_evaluator ? "evaluating " : "training ", c.model.spec.name, " on ", where, ": batch ",
      c.batch_size, ", ", c.training.optimizer.name(), " learning rate ", c.learning_rate,
      c.max_grad_norm > 0 ? absl::StrCat(", clip norm ", c.max_grad_norm) : "",
      scale.mode == nn::LossScaleOptions::Mode::kNone
          ? ""
          : absl::StrCat(", loss scale ",
                         scale.mode == nn::LossScaleOptions::Mode::kDynamic ? "dynamic from " : "",
                         scale.initial));
}

// The start-up line: the build, and what trains on which backends.
std::string Describe(const WorkerConfig& c, const Backends& backends) {
  return absl::StrCat(cuda::BuildInfo(), "; ", DescribeTraining(c, backends.description));
}

// GPU utilization and memory, when the NVIDIA driver's NVML is there to ask; null otherwise.
std::unique_ptr<GpuMetricsExporter> ExportGpuMetrics(const WorkerConfig& c,
                                                     MetricsEndpoint& endpoint,
                                                     std::unique_ptr<GpuMonitor>& monitor) {
  absl::StatusOr<std::unique_ptr<GpuMonitor>> opened = GpuMonitor::Open();
  if (!opened.ok()) {
    PSFLOW_LOG(WARNING) << opened.status().message() << "; no GPU metrics";
    return nullptr;
  }
  monitor = *std::move(opened);
  std::vector<MonitoredGpu> gpus;
  for (int i = 0; i < c.num_gpus; ++i) {
    gpus.push_back({c.first_gpu + i, cuda::PciBusId(c.first_gpu + i)});
  }
  return std::make_unique<GpuMetricsExporter>(*monitor, endpoint.registry(),
                                              StandardLabels(c.spec.task.type, c.spec.task.index),
                                              std::move(gpus), std::chrono::seconds(1));
}

// --compute=replay: the model profiled on a synthetic batch of its shape (the training input's
// first batch stays the first step's), then replayed; the start-up line says what a step spends.
absl::StatusOr<std::unique_ptr<ReplayTrainable>> MakeReplay(const WorkerConfig& c, nn::Model& model,
                                                            WorkerMetrics* metrics) {
  data::BatchBuffer batch;
  MakeSyntheticInput(c.model, c.batch_size, c.seed)->Fill(batch);
  ASSIGN_OR_RETURN(std::unique_ptr<ReplayTrainable> replay,
                   ReplayTrainable::Create(model, batch.view(), c.compute.step_ms / 1e3));
  PSFLOW_LOG(INFO) << "compute: replayed (" << c.compute.label << "), "
                   << DescribeReplay(replay->step())
                   << "; the gradients pushed every step are the first step's, nothing is learned";
  if (metrics != nullptr) metrics->replayed_step.Set(replay->step_seconds());
  return replay;
}

// LocalUpdate when there is no ps task, else a client of the ps tasks.
// Alone, the update runs where the model computes (on its GPU; towers: on the first) unless
// --update_on_device=false; replayed steps update on the host.
absl::StatusOr<std::unique_ptr<ParameterSync>> MakeSync(const WorkerConfig& c,
                                                        const TransportSecurity& security,
                                                        TrainableModel& trainable) {
  nn::ParameterSet& params = trainable.model->params();
  if (c.ps_hosts.empty()) {
    const bool device = c.gpu && c.update_on_device && !c.compute.replay();
    PSFLOW_LOG(INFO) << "no ps task: training in process, the update on the "
                     << (device ? "GPU" : "host");
    return LocalUpdate::Create(c.training, device ? trainable.trainable : nullptr);
  }
  PsClient::Options options = MakePsClientOptions(c, security);
  options.stop = &ProcessStopRequest();
  PSFLOW_LOG(INFO) << "ps connections: " << security.Describe();
  ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client, PsClient::Create(options, params));
  return std::unique_ptr<ParameterSync>(std::move(client));
}

// What the worker is told, resolved and checked before anything starts (--check_config stops
// here): the config, and the flags of main() itself.
struct StartSettings {
  WorkerConfig config;
  int metrics_port = -1;
  std::chrono::seconds stop_grace{0};
  double final_scrape_wait_s = 0;
  double export_wait_s = 0;
};

absl::StatusOr<StartSettings> ResolveStartSettings() {
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
  StartSettings s;
  ASSIGN_OR_RETURN(s.config, MakeWorkerConfig(FlagsGiven(), spec, standalone));
  ASSIGN_OR_RETURN(s.metrics_port, ResolveMetricsPort());
  const int stop_grace_s = absl::GetFlag(FLAGS_stop_grace_s);
  if (stop_grace_s < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stop_grace_s must be >= 0, got ", stop_grace_s));
  }
  s.stop_grace = std::chrono::seconds(stop_grace_s);
  s.final_scrape_wait_s = absl::GetFlag(FLAGS_final_scrape_wait_s);
  if (!(s.final_scrape_wait_s >= 0 && s.final_scrape_wait_s <= 3600)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--final_scrape_wait_s must be seconds in [0, 3600], got ", s.final_scrape_wait_s));
  }
  s.export_wait_s = absl::GetFlag(FLAGS_export_wait_s);
  if (!(s.export_wait_s >= 0 && s.export_wait_s <= 86400)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--export_wait_s must be seconds in [0, 86400], got ", s.export_wait_s));
  }
  return s;
}

// --check_config: the task and what it would train, as one line.
absl::StatusOr<std::string> CheckConfig() {
  ASSIGN_OR_RETURN(const StartSettings s, ResolveStartSettings());
  const WorkerConfig& c = s.config;
  return absl::StrCat("valid: ", c.spec.task.type, " ", c.spec.task.index, " of a cluster with ",
                      c.num_trainers, c.num_trainers == 1 ? " trainer and " : " trainers and ",
                      c.ps_hosts.size(), c.ps_hosts.size() == 1 ? " ps task; " : " ps tasks; ",
                      DescribeTraining(c, c.gpu ? "the GPU" : "the CPU"));
}

absl::Status Main(const TransportSecurity& security) {
  ASSIGN_OR_RETURN(const StartSettings settings, ResolveStartSettings());
  const WorkerConfig& config = settings.config;
  const ClusterSpec& spec = config.spec;
  const int metrics_port = settings.metrics_port;
  const double final_scrape_wait_s = settings.final_scrape_wait_s;
  const double export_wait_s = settings.export_wait_s;
  if (config.is_chief && !config.export_dir.empty() && !config.is_evaluator) {
    if (absl::Status s = CheckExportDir(config.export_dir); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("--export_dir: ", s.message()));
    }
  }
  // A training worker stops cleanly on SIGTERM; the rest keep the signal's default action.
  // Before any thread starts (the backends' and the input's below).
  if (!config.eval_only && !config.is_evaluator) InstallStopSignal(settings.stop_grace);

  ASSIGN_OR_RETURN(const Backends backends, MakeBackends(config));
  const InputOptions input_options{.synthetic = config.synthetic,
                                   .data_path = config.data_path,
                                   .batch_size = config.batch_size,
                                   .shard_index = config.shard_index,
                                   .num_shards = config.num_trainers,
                                   .seed = config.seed,
                                   .eval_only = config.eval_only};
  ASSIGN_OR_RETURN(std::unique_ptr<WorkerInput> input,
                   LoadWorkerInput(config.model, input_options));
  PSFLOW_LOG(INFO) << Describe(config, backends);
  ASSIGN_OR_RETURN(TrainableModel trainable, MakeTrainable(config, backends));
  if (config.eval_only) return EvaluateWeights(config, *trainable.model, *backends.all[0], *input);

  std::unique_ptr<MetricsEndpoint> endpoint;
  std::unique_ptr<WorkerMetrics> metrics;
  std::unique_ptr<GpuMonitor> gpu_monitor;
  std::unique_ptr<GpuMetricsExporter> gpu_metrics;
  if (metrics_port >= 0) {
    ASSIGN_OR_RETURN(endpoint, MetricsEndpoint::Start("0.0.0.0", metrics_port));
    metrics = std::make_unique<WorkerMetrics>(endpoint->registry(),
                                              StandardLabels(spec.task.type, spec.task.index),
                                              &endpoint->collect_mutex());
    PSFLOW_LOG(INFO) << "metrics on :" << endpoint->port() << "/metrics";
    if (config.gpu) gpu_metrics = ExportGpuMetrics(config, *endpoint, gpu_monitor);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ParameterSync> direct, MakeSync(config, security, trainable));

  if (config.is_evaluator) {
    const EvaluatorOptions evaluator{.interval = config.eval_interval,
                                     .eval_steps = config.eval_steps,
                                     .name = absl::StrCat("evaluator ", spec.task.index)};
    if (config.compute.replay()) {
      PSFLOW_LOG(WARNING) << "--compute=" << config.compute.label
                          << ": if the workers replay too, the parameters evaluated were trained "
                             "with replayed gradients and their accuracy means nothing";
    }
    return RunEvaluator(*trainable.model, *direct, *input, evaluator, metrics.get());
  }
  std::unique_ptr<ParameterSync> overlapped;
  if (config.overlap) {
    const HandOver hand_over = HandOverFor(config);
    overlapped = std::make_unique<OverlappedSync>(*direct, trainable.model->params(), hand_over);
    PSFLOW_LOG(INFO) << "push and pull overlapped with the next step (the hand-over "
                     << (hand_over == HandOver::kSwap ? "swaps buffers" : "copies the model")
                     << ")";
  }
  TrainerOptions options;
  options.train_steps = config.train_steps;
  options.train_epochs = config.train_epochs;
  options.train_seconds = config.train_seconds;
  options.is_chief = config.is_chief;
  options.seed = config.seed;
  options.log_every_steps = config.log_every_steps;
  options.max_grad_norm = config.max_grad_norm;
  options.learning_rate = config.learning_rate;
  options.schedule = config.model.recipe.schedule;
  options.loss_scale = config.loss_scale;
  options.stream_gradients = config.stream_gradients;
  options.sparse_pulls = config.sparse_pulls;
  options.stop = &ProcessStopRequest();
  if (config.is_chief && !config.export_dir.empty()) {
    options.await_others = std::chrono::milliseconds(std::llround(export_wait_s * 1e3));
  }
  std::unique_ptr<ReplayTrainable> replay;
  if (config.compute.replay()) {
    ASSIGN_OR_RETURN(replay, MakeReplay(config, *trainable.model, metrics.get()));
  }
  data::Prefetcher prefetcher(std::move(input->train));
  Trainer trainer(replay != nullptr ? *replay : *trainable.trainable,
                  overlapped != nullptr ? *overlapped : *direct, prefetcher, options,
                  metrics.get());
  ASSIGN_OR_RETURN(const TrainResult r, trainer.Run());
  // Stopped (SIGTERM): no evaluation or export; main exits 143.
  if (r.stopped || ProcessStopRequest().requested()) return absl::OkStatus();
  // Tower 0 evaluates here, on this thread (bound to its GPU): its Model uploads the final
  // parameters as the evaluation starts where they were pulled from a ps (updated on the device,
  // they are there already).
  RETURN_IF_ERROR(
      EvaluateAndReport(config, *trainable.model, *backends.all[0], *input, r, metrics.get()));
  if (config.is_chief && !config.export_dir.empty()) {
    nn::Model& model = *trainable.model;
    RETURN_IF_ERROR(model.backend().DownloadParameters(model.params()));
    RETURN_IF_ERROR(ExportModel(config.model, model.params(), r.global_step, config.export_dir));
    PSFLOW_LOG(INFO) << "exported the trained model (global step " << r.global_step << ") to "
                     << config.export_dir << "/" << kWeightsFile << " and " << kModelFile;
  }
  // The final figures are in the registry now; a Prometheus that scrapes this worker gets one
  // look at them before the process (and, on Kubernetes, the pod's scrape target) goes.
  if (endpoint != nullptr && final_scrape_wait_s > 0) {
    const int64_t seen = endpoint->MonitoringScrapes();
    if (seen > 0) {
      const auto wait = std::chrono::milliseconds(std::llround(final_scrape_wait_s * 1e3));
      if (!endpoint->AwaitMonitoringScrape(seen, wait)) {
        PSFLOW_LOG(WARNING) << "no scrape of the final metrics within --final_scrape_wait_s="
                            << final_scrape_wait_s << "; exiting without it";
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  const int code = psflow::RunTaskMain(
      argc, argv, "psflow-worker",
      "trains one replica of a model against the ps tasks of its cluster.\n"
      "  psflow-worker [--model=NAME] [flags]  with $TF_CONFIG set, or with --job_name=worker\n"
      "      --task_index=N --ps_hosts=H:P,... --worker_hosts=H:P,...; with neither, trains "
      "alone.\n"
      "      Mutual TLS to the ps tasks: --tls_ca=F --tls_cert=F --tls_key=F",
      psflow::Main, psflow::CheckConfig);
  // Stopped by SIGTERM: 143, even when the stop found a ps task gone (the job's end).
  return psflow::ProcessStopRequest().requested() ? psflow::kStoppedExitCode : code;
}
