#include "worker/worker_config.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status_macros.h"
#include "worker/models/model_file.h"
#include "worker/models/model_zoo.h"
#include "worker/nn/backend.h"

namespace psflow {
namespace {

// The flag's value unless it is `unset` (its default), else the model's seed value.
template <class T>
T Or(T value, T unset, T recipe_value) {
  return value == unset ? recipe_value : value;
}

// --dtype, with the older spellings --use_fp16 and --tf32 folded in.
absl::StatusOr<nn::Precision> ResolvePrecision(const WorkerFlags& flags) {
  absl::StatusOr<nn::Precision> parsed = nn::ParsePrecision(flags.dtype);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--dtype ", parsed.status().message()));
  }
  nn::Precision p = *parsed;
  for (const auto& [set, implied, flag] :
       {std::tuple{flags.use_fp16, nn::Precision::kFp16, "--use_fp16"},
        std::tuple{flags.tf32, nn::Precision::kTf32, "--tf32"}}) {
    if (!set) continue;
    if (p != nn::Precision::kFp32 && p != implied) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " contradicts --dtype=", nn::PrecisionName(p)));
    }
    p = implied;
  }
  if (p != nn::Precision::kFp32 && flags.device != "gpu") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dtype=", nn::PrecisionName(p), " needs --device=gpu: the CPU backend computes in fp32"));
  }
  return p;
}

// --loss_scale; "auto" is dynamic for fp16 products.
absl::StatusOr<nn::LossScaleOptions> ResolveLossScale(const std::string& flag,
                                                      nn::Precision precision) {
  std::string text = flag;
  if (text == "auto") text = precision == nn::Precision::kFp16 ? "dynamic" : "none";
  absl::StatusOr<nn::LossScaleOptions> o = nn::ParseLossScale(text);
  if (!o.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--loss_scale ", o.status().message()));
  }
  return o;
}

// --compute=real|replay:MS|replay:measured.
absl::StatusOr<ComputeMode> ParseComputeMode(const std::string& flag) {
  if (flag == "real") return ComputeMode{};
  if (flag == "replay:measured") {
    return ComputeMode{ComputeMode::Kind::kReplayMeasured, 0, flag};
  }
  if (!absl::StartsWith(flag, "replay:")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--compute must be real, replay:MS or replay:measured, got \"", flag, "\""));
  }
  const std::string ms_text = flag.substr(std::string("replay:").size());
  double ms = 0;
  if (!absl::SimpleAtod(ms_text, &ms) || !std::isfinite(ms) || !(ms > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--compute=replay:MS needs MS, the milliseconds of a step, to be a positive number, got \"",
        ms_text, "\""));
  }
  return ComputeMode{ComputeMode::Kind::kReplay, ms, flag};
}

// The task's place in the cluster, and what a cluster must have for it.
absl::Status PlaceInCluster(const ClusterSpec& spec, bool standalone, double eval_interval_s,
                            WorkerConfig& c) {
  if (spec.task.type != "worker" && spec.task.type != "chief" && spec.task.type != "evaluator") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "psflow-worker runs worker, chief or evaluator tasks, but the cluster spec says task type "
        "\"%s\"",
        spec.task.type));
  }
  c.spec = spec;
  c.is_evaluator = spec.task.type == "evaluator";
  const bool has_chief = !spec.Tasks("chief").empty();
  const int trainers = static_cast<int>(spec.Tasks("worker").size()) + (has_chief ? 1 : 0);
  c.num_trainers = std::max(trainers, 1);
  c.shard_index =
      spec.task.type == "chief" || c.is_evaluator ? 0 : spec.task.index + (has_chief ? 1 : 0);
  c.is_chief = standalone || spec.IsChief();
  c.ps_hosts = spec.Tasks("ps");
  if (c.ps_hosts.empty() && trainers > 1) {
    return absl::InvalidArgumentError("several workers need at least one ps task to share with");
  }
  if (c.ps_hosts.empty() && c.is_evaluator) {
    return absl::InvalidArgumentError(
        "an evaluator follows the ps tasks, and the cluster has none");
  }
  if (!(eval_interval_s > 0)) return absl::InvalidArgumentError("--eval_interval_s must be > 0");
  c.eval_interval = absl::Seconds(eval_interval_s);
  return absl::OkStatus();
}

// The model, its hyper-parameters (flags over the recipe) and the optimizer and sync settings.
absl::Status ResolveTraining(const WorkerFlags& f, WorkerConfig& c) {
  if (!f.model_file.empty()) {
    if (!f.model.empty() || !f.model_config.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--model_file=", f.model_file, " and --model",
                                                     f.model.empty() ? "_config" : "",
                                                     " name two models: give one"));
    }
    ASSIGN_OR_RETURN(c.model, models::ReadModelFile(f.model_file));
  } else {
    ASSIGN_OR_RETURN(c.model,
                     models::FindModel(f.model.empty() ? "mnist_mlp" : f.model, f.model_config));
  }
  const models::Recipe& recipe = c.model.recipe;
  c.batch_size = Or<int64_t>(f.batch_size, 0, recipe.batch_size);
  c.learning_rate = Or(f.learning_rate, 0.0f, recipe.learning_rate);
  c.max_grad_norm = f.max_grad_norm < 0 ? recipe.max_grad_norm : f.max_grad_norm;
  c.train_epochs = Or(f.train_epochs, 0, recipe.epochs);
  c.train_steps = f.train_steps;
  c.train_seconds = f.train_seconds;
  if (c.batch_size < 1) return absl::InvalidArgumentError("--batch_size must be >= 1");
  if (!(c.learning_rate > 0)) return absl::InvalidArgumentError("--learning_rate must be > 0");
  // Checked before anything else, also where no ps is used, so a typo never passes silently.
  ASSIGN_OR_RETURN(c.wire_type, ParseWireType(f.wire_dtype));
  auto placement = ParsePlacementStrategy(f.placement);
  if (!placement.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--placement: ", placement.status().message()));
  }
  c.placement = *placement;
  ASSIGN_OR_RETURN(c.transport, ParseTransport(f.transport));
  if (std::isnan(c.max_grad_norm)) return absl::InvalidArgumentError("--max_grad_norm is NaN");
  if (f.replicas_to_aggregate < 0 || f.replicas_to_aggregate > c.num_trainers) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--replicas_to_aggregate must be in [0, %d] (the number of workers), got %d",
        c.num_trainers, f.replicas_to_aggregate));
  }
  TrainingConfig& t = c.training;
  t.optimizer.set_name(Or(f.optimizer, std::string(), recipe.optimizer));
  t.optimizer.set_learning_rate(c.learning_rate);
  t.optimizer.set_momentum(Or(f.momentum, 0.0f, recipe.momentum));
  t.optimizer.set_use_nesterov(f.use_nesterov);
  t.sync.set_sync_replicas(f.sync_replicas);
  t.sync.set_replicas_to_aggregate(f.replicas_to_aggregate);
  t.sync.set_total_workers(c.num_trainers);
  t.worker_index = c.shard_index;
  // The optimizer checked here, in one line, rather than on the ps.
  RETURN_IF_ERROR(LocalUpdate::Create(t).status());
  if (c.train_steps < 0 || (c.train_steps == 0 && c.train_epochs < 1)) {
    return absl::InvalidArgumentError("--train_epochs must be >= 1 (or --train_steps >= 1)");
  }
  if (!(c.train_seconds >= 0) || std::isinf(c.train_seconds)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--train_seconds must be a number of seconds >= 0, got ", c.train_seconds));
  }
  c.overlap = f.overlap && !c.ps_hosts.empty() && !f.sync_replicas;
  c.stream_gradients = f.stream_gradients;
  c.sparse_pulls = f.sparse_pulls;
  c.update_on_device = f.update_on_device;
  return absl::OkStatus();
}

absl::Status ResolveData(const WorkerFlags& f, WorkerConfig& c) {
  if (f.data_source != "real" && f.data_source != "synthetic") {
    return absl::InvalidArgumentError(
        absl::StrCat("--data_source must be real or synthetic, got \"", f.data_source, "\""));
  }
  c.synthetic = f.data_source == "synthetic";
  if (c.is_evaluator && c.synthetic) {
    return absl::InvalidArgumentError(
        "an evaluator needs a test split: --data_source=synthetic has none");
  }
  if (f.eval_steps < 0) return absl::InvalidArgumentError("--eval_steps must be >= 0");
  c.data_path = f.data_path;
  c.eval_steps = f.eval_steps;
  c.seed = f.seed;
  c.log_every_steps = f.log_every_steps;
  return absl::OkStatus();
}

// --export_dir, --weights, --eval_only.
absl::Status ResolveWeights(const WorkerFlags& f, WorkerConfig& c) {
  c.export_dir = f.export_dir;
  c.weights = f.weights;
  c.eval_only = f.eval_only;
  if (c.eval_only && c.weights.empty()) {
    return absl::InvalidArgumentError("--eval_only needs --weights=FILE, the model to evaluate");
  }
  if (!c.weights.empty() && !c.eval_only) {
    return absl::InvalidArgumentError(
        "--weights is for --eval_only: training does not start from saved weights");
  }
  if (c.eval_only && (!c.ps_hosts.empty() || c.is_evaluator)) {
    return absl::InvalidArgumentError("--eval_only runs alone, without a cluster");
  }
  if (c.eval_only && c.synthetic) {
    return absl::InvalidArgumentError(
        "--eval_only evaluates on real data: --data_source=synthetic has none");
  }
  if (c.eval_only && !c.export_dir.empty()) {
    return absl::InvalidArgumentError("--eval_only trains nothing to --export_dir");
  }
  return absl::OkStatus();
}

absl::Status ResolveDevice(const WorkerFlags& f, WorkerConfig& c) {
  if (f.compute_threads < 0 || f.compute_threads > nn::kMaxCpuThreads) {
    return absl::InvalidArgumentError(absl::StrCat("--compute_threads must be between 0 and ",
                                                   nn::kMaxCpuThreads, " (0: one per core)"));
  }
  if (f.device != "cpu" && f.device != "gpu") {
    return absl::InvalidArgumentError(
        absl::StrCat("--device must be cpu or gpu, got \"", f.device, "\""));
  }
  c.gpu = f.device == "gpu";
  if (f.gpu < 0) return absl::InvalidArgumentError("--gpu must be >= 0");
  if (f.num_gpus < 1) return absl::InvalidArgumentError("--num_gpus must be >= 1");
  if (f.num_gpus > 1 && !c.gpu) {
    return absl::InvalidArgumentError("--num_gpus > 1 needs --device=gpu");
  }
  if (f.cuda_graphs && !c.gpu) {
    return absl::InvalidArgumentError("--cuda_graphs needs --device=gpu");
  }
  if (f.ps_timeout_s < 1) return absl::InvalidArgumentError("--ps_timeout_s must be >= 1");
  if (f.startup_timeout_s < 0) {
    return absl::InvalidArgumentError("--startup_timeout_s must be >= 0 (0: no limit)");
  }
  RETURN_IF_ERROR(PsClient::CheckConnectionsPerTask(f.ps_connections, "--ps_connections"));
  c.ps_connections = f.ps_connections;
  ASSIGN_OR_RETURN(c.compute, ParseComputeMode(f.compute));
  // The profile a replay spends is the CPU backend's, and its gradients are the CPU backend's:
  // a GPU would be named and never used.
  if (c.compute.replay() && c.gpu) {
    return absl::InvalidArgumentError(
        "--compute=replay runs on the CPU backend (its per-layer times and first-step gradients "
        "are the CPU's): drop --device=gpu");
  }
  c.compute_threads = f.compute_threads;
  c.first_gpu = f.gpu;
  c.num_gpus = f.num_gpus;
  c.cuda_graphs = f.cuda_graphs;
  c.ps_timeout = std::chrono::seconds(f.ps_timeout_s);
  c.startup_timeout = std::chrono::seconds(f.startup_timeout_s);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WorkerConfig> MakeWorkerConfig(const WorkerFlags& flags, const ClusterSpec& spec,
                                              bool standalone) {
  WorkerConfig c;
  RETURN_IF_ERROR(PlaceInCluster(spec, standalone, flags.eval_interval_s, c));
  RETURN_IF_ERROR(ResolveTraining(flags, c));
  RETURN_IF_ERROR(ResolveData(flags, c));
  RETURN_IF_ERROR(ResolveDevice(flags, c));
  RETURN_IF_ERROR(ResolveWeights(flags, c));
  ASSIGN_OR_RETURN(c.precision, ResolvePrecision(flags));
  ASSIGN_OR_RETURN(c.loss_scale, ResolveLossScale(flags.loss_scale, c.precision));
  return c;
}

HandOver HandOverFor(const WorkerConfig& c) {
  const bool streams =
      c.max_grad_norm <= 0 && c.loss_scale.mode == nn::LossScaleOptions::Mode::kNone;
  return c.cuda_graphs && c.num_gpus == 1 && streams ? HandOver::kCopy : HandOver::kSwap;
}

PsClient::Options MakePsClientOptions(const WorkerConfig& c, const TransportSecurity& security) {
  PsClient::Options options;
  options.ps_addresses = c.ps_hosts;
  options.training = c.training;
  options.wire_type = c.wire_type;
  options.placement = c.placement;
  options.transport = c.transport;
  options.connect_timeout = c.ps_timeout;
  options.rpc_timeout = c.ps_timeout;
  options.startup_timeout = c.startup_timeout;
  options.connections_per_task = c.ps_connections;
  options.security = security;
  options.pushes = !c.is_evaluator;
  return options;
}

}  // namespace psflow
