// What does each seed model train at on this machine, and what does the ps cost it? For each
// model (and PTB config), examples/s (words/s for PTB) three ways, on synthetic data of the
// model's shape with the seed's batch size and optimizer:
//   local   : in this process, no ps (Trainer + LocalUpdate): the baseline
//   1ps+1w  : a psflow-ps process and one psflow-worker process on this host, the tensor bytes on
//             the bulk channel: over TCP on loopback, or with --ps_channel=shm through shared
//             memory (psflow-ps --bulk_socket, what `psflow run` gives a ps and its workers on
//             one host); --wire_dtype: what the bytes travel as (the workers' flag)
//   1ps+2w  : a psflow-ps process and two psflow-worker processes (aggregate rate)
// The workers overlap push and pull with the next step (psflow-worker --overlap, the default);
// with --serial_too each ps configuration runs again with --overlap=false, so the overlap's gain
// shows as a ratio within one run.
// Each configuration runs --repeats times; the median is reported with ratios to the baseline.
//
// --device=gpu runs every configuration on the CUDA backend (the workers get --device=gpu, --gpu,
// --dtype and --cuda_graphs as given here; two workers share the GPU) and adds
//   compute : in this process, Model::ComputeGradients alone: forward, backward and clipping,
//             the gradients left on the device (as the update on the device reads them), no
//             update: psflow's share of a step, shown beside PyTorch's whole steps but never as a
//             ratio to them (not the same work)
//   local, host update : local with the update on the host (psflow-worker
//             --update_on_device=false): gradients down, the optimizer over host memory, values
//             up every step, as before the update moved to the GPU
//   PyTorch : with --pytorch=bench/torch_models.py, the same models in PyTorch on the same
//             GPU after psflow's runs, and a second table of psflow / PyTorch ratios with the
//             targets of issue 6 (bench/gpu/README.md)
// Where no GPU is usable, --device=gpu prints one line saying so and exits 0.
//
// On the CPU, --pytorch=bench/torch_models.py compares psflow with PyTorch on this CPU instead:
// for each model and each of --compare_threads, psflow's local rate and PyTorch's, each run
// --repeats times, interleaved (psflow, PyTorch, psflow, ...) so that a noisy machine hurts
// both alike, with the ratios, the targets of issue 15 and the speed-up from 1 to 2 threads. The
// header says what ran: the CPU, OpenBLAS's kernels and the OPENBLAS_*/OMP_* variables (the
// same for both; PyTorch also gets OMP/OPENBLAS/MKL_NUM_THREADS set to the thread count).
//
//   build/bin/bench_model_throughput [--models=mnist_mlp,mnist_cnn,cifar10_cnn,ptb_lstm:small]
//       [--seconds=10] [--repeats=1] [--compute_threads=1] [--workers=1,2] [--serial_too]
//       [--ps_channel=tcp|shm] [--wire_dtype=float32|bfloat16|float16] [--ps_connections=1]
//       [--pytorch=bench/torch_models.py [--compare_threads=1,2]]
//       [--device=gpu [--gpu=0] [--dtype=fp32|tf32|bf16|fp16] [--cuda_graphs]
//        [--pytorch=bench/torch_models.py]]
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/cpu_model.h"
#include "core/command_line.h"
#include "core/free_ports.h"
#include "core/wire_type.h"
#include "operator/local/child_process.h"
#include "worker/backend/cuda/devices.h"
#include "worker/models/model_zoo.h"
#include "worker/ps_client.h"
#include "worker/trainer.h"
#include "worker/worker_input.h"

ABSL_FLAG(std::string, models, "mnist_mlp,mnist_cnn,cifar10_cnn,ptb_lstm:small,ptb_lstm:medium",
          "Comma-separated models; ptb_lstm:CONFIG for a PTB configuration");
ABSL_FLAG(double, seconds, 10, "Approximate training time per run (steps are sized to it)");
ABSL_FLAG(int, compute_threads, 1, "OpenBLAS threads per worker (0: one per core)");
ABSL_FLAG(int, repeats, 1, "Runs per configuration (median reported)");
ABSL_FLAG(std::string, workers, "1,2",
          "Worker counts to run through one ps (empty: in-process runs only)");
ABSL_FLAG(std::string, ps_channel, "tcp",
          "How the workers reach the ps: tcp (the bulk channel on loopback) or shm (the bulk "
          "channel through shared memory, as psflow run sets it up)");
ABSL_FLAG(std::string, wire_dtype, "float32",
          "The workers' --wire_dtype through the ps: float32, bfloat16 or float16");
ABSL_FLAG(int, ps_connections, 1,
          "The workers' --ps_connections: connections to the ps, each served on threads of its "
          "own there");
ABSL_FLAG(bool, serial_too, true,
          "Also run every ps configuration with the workers' --overlap=false (pull, compute and "
          "push one after the other)");
ABSL_FLAG(std::string, device, "cpu",
          "cpu: the OpenBLAS backend; gpu: the CUDA backend on GPU --gpu, in this process and in "
          "the workers (which share the GPU)");
ABSL_FLAG(bool, profile, false,
          "Also print each model's per-layer forward and backward times (Model::ProfileLayers: "
          "the median of 10 steps, the device waited for after every layer)");
ABSL_FLAG(int, gpu, 0, "--device=gpu: index of the GPU among the visible ones");
ABSL_FLAG(std::string, dtype, "fp32",
          "--device=gpu: what products compute in, psflow and PyTorch alike: fp32, tf32, bf16 or "
          "fp16 (psflow's --dtype; PyTorch's autocast for bf16/fp16, with a dynamic loss scale "
          "for fp16 as psflow's workers)");
ABSL_FLAG(bool, cuda_graphs, false,
          "--device=gpu: psflow replays each full-batch step as a CUDA graph (the worker's "
          "--cuda_graphs), in this process and in the workers");
ABSL_FLAG(std::string, pytorch, "",
          "Path of bench/torch_models.py: after psflow's runs, the same models in PyTorch on the "
          "same GPU, or on this CPU at each --compare_threads, and psflow / PyTorch ratios "
          "(empty: no PyTorch run)");
ABSL_FLAG(std::string, compare_threads, "1,2",
          "CPU with --pytorch: the thread counts at which psflow and PyTorch are compared");
ABSL_FLAG(std::string, python, "python3",
          "--pytorch: the command (words split at spaces) that runs the Python with PyTorch, e.g. "
          "\"env -u LD_LIBRARY_PATH python3\"");

namespace psflow {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

bool OnGpu() { return absl::GetFlag(FLAGS_device) == "gpu"; }

// --dtype, checked in main.
nn::Precision BenchPrecision() {
  return nn::ParsePrecision(absl::GetFlag(FLAGS_dtype)).value_or(nn::Precision::kFp32);
}

// On the CPU, `threads` of them (0: one per core).
absl::StatusOr<std::unique_ptr<nn::Backend>> MakeBackend(int threads) {
  if (OnGpu()) return nn::MakeCudaBackend(absl::GetFlag(FLAGS_gpu), BenchPrecision());
  return nn::MakeCpuBackend(threads);
}

struct Figures {
  double rate = 0;  // examples/s, or words/s for language models
  double pull_ms = 0, compute_ms = 0, push_ms = 0;
  double exchange_ms = 0;  // overlap: the background push + pull per step
};

double MedianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Figures Median(const std::vector<Figures>& runs) {
  auto median = [&](double Figures::*field) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(r.*field);
    return MedianOf(std::move(v));
  };
  return {median(&Figures::rate), median(&Figures::pull_ms), median(&Figures::compute_ms),
          median(&Figures::push_ms), median(&Figures::exchange_ms)};
}

double Field(const std::string& text, const std::string& key) {
  const size_t at = text.find(" " + key + "=");
  return at == std::string::npos ? -1 : std::strtod(text.c_str() + at + key.size() + 2, nullptr);
}

struct Subject {
  std::string name, config;
  std::string item;  // as --models names it: "ptb_lstm:small"
  models::ModelDefinition zoo;
  bool language_model() const { return zoo.language_model(); }
};

// A --models item: "mnist_cnn", "ptb_lstm:small".
absl::StatusOr<Subject> ParseSubject(absl::string_view item) {
  const std::vector<std::string> parts = absl::StrSplit(item, ':');
  Subject s{parts[0], parts.size() > 1 ? parts[1] : "", std::string(item), {}};
  absl::StatusOr<models::ModelDefinition> zoo = models::FindModel(s.name, s.config);
  if (!zoo.ok()) return zoo.status();
  s.zoo = *std::move(zoo);
  return s;
}

// What an in-process run trains: the model on synthetic batches of its shape, on its own backend
// (`threads` CPU threads, or --gpu), recording CUDA graphs when --cuda_graphs and `graphs`.
struct InProcess {
  std::unique_ptr<WorkerInput> input;
  std::unique_ptr<nn::Backend> backend;
  std::unique_ptr<nn::Model> model;  // destroyed before its backend
};
absl::StatusOr<InProcess> MakeInProcess(const Subject& s, int threads, bool graphs) {
  InProcess p;
  InputOptions in;
  in.synthetic = true;
  in.batch_size = s.zoo.recipe.batch_size;
  auto input = LoadWorkerInput(s.zoo, in);
  if (!input.ok()) return input.status();
  p.input = *std::move(input);
  auto backend = MakeBackend(threads);
  if (!backend.ok()) return backend.status();
  p.backend = *std::move(backend);
  auto model = nn::Model::Create(s.zoo.spec, *p.backend, in.batch_size);
  if (!model.ok()) return model.status();
  p.model = *std::move(model);
  if (graphs && OnGpu() && absl::GetFlag(FLAGS_cuda_graphs)) p.model->EnableGraphs();
  return p;
}

// In-process training for `steps` steps on `threads` CPU threads; also the calibration run. On a
// GPU the update runs there (psflow-worker's default) unless `host_update`.
absl::StatusOr<Figures> RunLocal(const Subject& s, int64_t steps,
                                 int threads = absl::GetFlag(FLAGS_compute_threads),
                                 bool host_update = false) {
  auto run = MakeInProcess(s, threads, /*graphs=*/true);
  if (!run.ok()) return run.status();
  TrainingConfig config;
  config.optimizer.set_name(s.zoo.recipe.optimizer);
  config.optimizer.set_learning_rate(s.zoo.recipe.learning_rate);
  auto sync = LocalUpdate::Create(config, host_update ? nullptr : run->model.get());
  if (!sync.ok()) return sync.status();
  TrainerOptions o;
  o.train_steps = steps;
  o.log_every_steps = 0;
  o.max_grad_norm = s.zoo.recipe.max_grad_norm;
  o.learning_rate = s.zoo.recipe.learning_rate;
  // As psflow-worker's --loss_scale=auto.
  if (BenchPrecision() == nn::Precision::kFp16) {
    o.loss_scale.mode = nn::LossScaleOptions::Mode::kDynamic;
  }
  data::Prefetcher prefetcher(std::move(run->input->train));
  Trainer trainer(*run->model, **sync, prefetcher, o, nullptr);
  auto r = trainer.Run();
  if (!r.ok()) return r.status();
  const double per_step = 1e3 / static_cast<double>(r->steps);
  return Figures{s.language_model() ? r->words_per_second() : r->examples_per_second(),
                 r->pull_seconds * per_step, r->compute_seconds * per_step,
                 r->push_seconds * per_step};
}

// Model::ComputeGradients alone for `steps` steps, as the trainer calls it (clipping included) but
// with no update and no upload of parameters: on a GPU forward, backward and clipping, the
// gradients left there (Model::SetGradientsOnDevice, as a standalone worker's update on the GPU
// reads them). The input comes through a Prefetcher, as the trainer's does.
absl::StatusOr<Figures> RunCompute(const Subject& s, int64_t steps) {
  auto run = MakeInProcess(s, absl::GetFlag(FLAGS_compute_threads), /*graphs=*/true);
  if (!run.ok()) return run.status();
  nn::Model& model = *run->model;
  model.params().Initialize(1);
  model.SetGradientsOnDevice(true);
  // fp16 trains with a loss scale: the gradients are unscaled and measured on the device.
  if (BenchPrecision() == nn::Precision::kFp16) model.SetLossScale(65536.0f);
  data::Prefetcher prefetcher(std::move(run->input->train));
  double compute_seconds = 0;
  int64_t units = 0;  // examples, or words
  const auto start = Clock::now();
  for (int64_t step = 0; step < steps; ++step) {
    const nn::Batch batch = prefetcher.Next();
    const auto before = Clock::now();
    auto loss = model.ComputeGradients(batch, s.zoo.recipe.max_grad_norm);
    if (!loss.ok()) return loss.status();
    compute_seconds += Seconds(Clock::now() - before);
    units += batch.size * model.labels_per_example();
  }
  const double seconds = Seconds(Clock::now() - start);
  return Figures{static_cast<double>(units) / seconds, 0,
                 1e3 * compute_seconds / static_cast<double>(steps), 0};
}

// --profile: one line per layer of the model's step, as Model::ProfileLayers measures it.
absl::Status PrintProfile(const Subject& s) {
  auto run = MakeInProcess(s, absl::GetFlag(FLAGS_compute_threads), /*graphs=*/false);
  if (!run.ok()) return run.status();
  run->model->params().Initialize(1);
  data::Prefetcher prefetcher(std::move(run->input->train));
  auto times = run->model->ProfileLayers(prefetcher.Next(), 10);
  if (!times.ok()) return times.status();
  double forward = 0, backward = 0;
  for (const nn::LayerTime& t : *times) {
    std::printf("  profile %-18s %-14s forward %8.3f ms  backward %8.3f ms\n", s.item.c_str(),
                t.layer.c_str(), 1e3 * t.forward_seconds, 1e3 * t.backward_seconds);
    forward += t.forward_seconds;
    backward += t.backward_seconds;
  }
  std::printf("  profile %-18s %-14s forward %8.3f ms  backward %8.3f ms\n", s.item.c_str(),
              "(sum)", 1e3 * forward, 1e3 * backward);
  return absl::OkStatus();
}

std::string BinDir() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string path(self, n > 0 ? static_cast<size_t>(n) : 0);
  return path.substr(0, path.rfind('/'));
}

std::string Collect(local::ChildProcess& p) {
  std::string out;
  if (!p.WaitWithOutput(std::chrono::minutes(10), &out)) p.Signal(SIGKILL);
  return out;
}

// Aggregate rate of `workers` worker processes training against one ps process.
absl::StatusOr<Figures> RunThroughPs(const Subject& s, int workers, int64_t steps, bool overlap) {
  auto ports = FreeLocalPorts(1 + workers);
  if (!ports.ok()) return ports.status();
  const std::string ps = absl::StrCat("127.0.0.1:", (*ports)[0]);
  std::vector<std::string> worker_hosts;
  for (int i = 0; i < workers; ++i) {
    worker_hosts.push_back(absl::StrCat("127.0.0.1:", (*ports)[1 + i]));
  }
  const std::string hosts = absl::StrJoin(worker_hosts, ",");
  // The children see this process's environment, so settings such as OPENBLAS_CORETYPE apply
  // to every configuration alike.
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  // Only --ps_channel=shm's --bulk_socket offers shared memory (psflow run's variable is not
  // inherited).
  std::erase_if(env,
                [](const std::string& e) { return absl::StartsWith(e, "PSFLOW_BULK_SOCKET="); });
  const bool shm = absl::GetFlag(FLAGS_ps_channel) == "shm";
  std::vector<std::string> ps_argv = {BinDir() + "/psflow-ps", "--job_name=ps", "--task_index=0",
                                      "--ps_hosts=" + ps, "--worker_hosts=" + hosts};
  if (shm) {
    // An abstract socket name of this run's own (its port is free on this host).
    ps_argv.push_back(absl::StrCat("--bulk_socket=@psflow-bench-", getpid(), "-", (*ports)[0]));
  }
  auto ps_process = local::ChildProcess::Spawn(ps_argv, env);
  if (!ps_process.ok()) return ps_process.status();
  std::vector<std::unique_ptr<local::ChildProcess>> procs;
  for (int i = 0; i < workers; ++i) {
    std::vector<std::string> argv = {
        BinDir() + "/psflow-worker",
        "--job_name=worker",
        absl::StrCat("--task_index=", i),
        "--ps_hosts=" + ps,
        "--worker_hosts=" + hosts,
        "--model=" + s.name,
        "--data_source=synthetic",
        absl::StrCat("--train_steps=", steps),
        "--log_every_steps=0",
        absl::StrCat("--overlap=", overlap ? "true" : "false"),
        "--wire_dtype=" + absl::GetFlag(FLAGS_wire_dtype),
        absl::StrCat("--ps_connections=", absl::GetFlag(FLAGS_ps_connections)),
        absl::StrCat("--compute_threads=", absl::GetFlag(FLAGS_compute_threads))};
    if (!s.config.empty()) argv.push_back("--model_config=" + s.config);
    if (OnGpu()) {
      argv.push_back("--device=gpu");
      argv.push_back(absl::StrCat("--gpu=", absl::GetFlag(FLAGS_gpu)));
      argv.push_back("--dtype=" + absl::GetFlag(FLAGS_dtype));
      if (absl::GetFlag(FLAGS_cuda_graphs)) argv.push_back("--cuda_graphs");
    }
    auto w = local::ChildProcess::Spawn(argv, env);
    if (!w.ok()) return w.status();
    procs.push_back(*std::move(w));
  }
  Figures total;
  for (auto& p : procs) {
    const std::string out = Collect(*p);
    const double rate = Field(out, s.language_model() ? "words_per_sec" : "examples_per_sec");
    if (!p->exit_status() || !p->exit_status()->ok() || rate < 0) {
      return absl::InternalError(absl::StrCat("worker failed:\n", out));
    }
    if (shm != absl::StrContains(out, "through shared memory")) {
      return absl::InternalError(absl::StrCat("the worker's tensor bytes did not go ",
                                              shm ? "through shared memory" : "over TCP",
                                              " as --ps_channel asked:\n", out));
    }
    total.rate += rate;
    total.pull_ms += Field(out, "pull_ms") / workers;
    total.compute_ms += Field(out, "compute_ms") / workers;
    total.push_ms += Field(out, "push_ms") / workers;
    total.exchange_ms += Field(out, "exchange_ms") / workers;
  }
  (*ps_process)->Signal(SIGTERM);
  Collect(**ps_process);
  return total;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "bench: %s\n", std::string(s.message()).c_str());
  return 1;
}

// ---- PyTorch on the same GPU (--pytorch).

std::string RealPath(const std::string& path) {
  char* resolved = realpath(path.c_str(), nullptr);
  if (resolved == nullptr) return "";
  std::string out(resolved);
  free(resolved);
  return out;
}

// This process's environment less the device bundle's lib/ folder on LD_LIBRARY_PATH
// (tools/device-bundle puts it first; bin/ is this binary's folder): those are this machine's
// builds of libraries such as libz or libssl, which Python and PyTorch should not pick up in
// place of their system's own.
std::vector<std::string> PythonEnv() {
  const std::string bundled = RealPath(BinDir() + "/../lib");
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view entry(*e);
    if (bundled.empty() || !absl::ConsumePrefix(&entry, "LD_LIBRARY_PATH=")) {
      env.emplace_back(*e);
      continue;
    }
    std::vector<std::string> kept;
    for (absl::string_view dir : absl::StrSplit(entry, ':')) {
      if (RealPath(std::string(dir)) != bundled) kept.emplace_back(dir);
    }
    env.push_back(absl::StrCat("LD_LIBRARY_PATH=", absl::StrJoin(kept, ":")));
  }
  return env;
}

// The value of "key" in a line of Python's json.dumps (default separators): a string without
// escapes, or "" when absent.
std::string JsonString(absl::string_view line, absl::string_view key) {
  const std::string quoted = absl::StrCat("\"", key, "\": \"");
  const size_t at = line.find(quoted);
  if (at == absl::string_view::npos) return "";
  const size_t begin = at + quoted.size();
  const size_t end = line.find('"', begin);
  return end == absl::string_view::npos ? "" : std::string(line.substr(begin, end - begin));
}

// A number's value, or -1 when absent (or null).
double JsonNumber(absl::string_view line, absl::string_view key) {
  const std::string quoted = absl::StrCat("\"", key, "\": ");
  const size_t at = line.find(quoted);
  if (at == absl::string_view::npos) return -1;
  const std::string rest(line.substr(at + quoted.size()));
  char* end = nullptr;
  const double value = std::strtod(rest.c_str(), &end);
  return end == rest.c_str() ? -1 : value;
}

struct PytorchRun {
  std::map<std::string, double> rates;  // by --models item: examples/s, or words/s for PTB
  std::string about;                    // "PyTorch 2.11.0+cu130 on NVIDIA H100 80GB HBM3"
};

// `env` with NAME=value in place of any NAME=... it held.
void SetEnv(std::vector<std::string>& env, const std::string& name, const std::string& value) {
  std::erase_if(env, [&](const std::string& e) { return absl::StartsWith(e, name + "="); });
  env.push_back(absl::StrCat(name, "=", value));
}

// Runs torch_models.py once for every model, with this run's --seconds, --gpu and --dtype and
// `repeats` timed runs, and reads its JSON lines: on the GPU, or with cpu_threads > 0 on the CPU
// on that many threads (torch.set_num_threads, and the pools' variables).
absl::StatusOr<PytorchRun> RunPytorch(const std::vector<std::string>& items, int repeats,
                                      int cpu_threads = 0) {
  const double seconds = absl::GetFlag(FLAGS_seconds);
  std::vector<std::string> argv =
      absl::StrSplit(absl::GetFlag(FLAGS_python), ' ', absl::SkipEmpty());
  if (argv.empty()) return absl::InvalidArgumentError("--python is empty");
  for (std::string arg : {absl::GetFlag(FLAGS_pytorch), "--models=" + absl::StrJoin(items, ","),
                          absl::StrCat("--seconds=", seconds), absl::StrCat("--repeats=", repeats),
                          absl::StrCat("--gpu=", absl::GetFlag(FLAGS_gpu))}) {
    argv.push_back(std::move(arg));
  }
  argv.push_back("--dtype=" + absl::GetFlag(FLAGS_dtype));
  std::vector<std::string> env = PythonEnv();
  if (cpu_threads > 0) {
    argv.push_back("--cpu");
    argv.push_back(absl::StrCat("--threads=", cpu_threads));
    for (const char* pool : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"}) {
      SetEnv(env, pool, absl::StrCat(cpu_threads));
    }
  }
  const std::string command = absl::StrJoin(argv, " ");
  if (cpu_threads == 0) std::printf("\n%s\n", command.c_str());
  std::fflush(stdout);
  auto p = local::ChildProcess::Spawn(argv, env);
  if (!p.ok()) return p.status();
  // Each model: start-up, warm-up and calibration, then its timed runs; generously.
  const auto limit = std::chrono::seconds(static_cast<int64_t>(
      120 + static_cast<double>(items.size()) * (120 + 2 * seconds * repeats)));
  std::string out;
  if (!(*p)->WaitWithOutput(std::chrono::duration_cast<std::chrono::milliseconds>(limit), &out)) {
    (*p)->Signal(SIGKILL);
    return absl::DeadlineExceededError(
        absl::StrCat(command, ": still running after ", limit.count(), " s:\n", out));
  }
  if (!(*p)->exit_status()->ok()) {
    return absl::InternalError(
        absl::StrCat(command, ": ", (*p)->exit_status()->Describe(), ":\n", out));
  }
  PytorchRun run;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!absl::StartsWith(line, "{")) continue;
    const std::string model = JsonString(line, "model");
    if (model.empty()) continue;
    const bool language_model = absl::StartsWith(model, "ptb_lstm");
    run.rates[model] = JsonNumber(line, language_model ? "words_per_sec" : "examples_per_sec");
    if (run.about.empty()) {
      run.about =
          absl::StrCat("PyTorch ", JsonString(line, "torch"), " on ", JsonString(line, "device"));
    }
  }
  for (const std::string& item : items) {
    if (!run.rates.contains(item) || run.rates[item] <= 0) {
      return absl::InternalError(
          absl::StrCat(command, ": no figure for ", item, " in its output:\n", out));
    }
  }
  return run;
}

// One model's psflow figures (medians), for the comparison with PyTorch.
struct Measured {
  Subject subject;
  std::string label;
  Figures compute, local, local_host;  // local_host: the update on the host (GPU only)
  std::vector<Figures> through;        // by worker count
};

// psflow / PyTorch for every configuration, and the targets of issue 6: local >= 1.0x PyTorch
// (1.5x on PTB small), every 1 ps + N workers >= 0.9x local.
void PrintComparison(const std::vector<Measured>& measured, const std::vector<int>& worker_counts,
                     const PytorchRun& pytorch) {
  std::printf("\npsflow / PyTorch, same GPU, same run: %s, products in %s\n", pytorch.about.c_str(),
              absl::GetFlag(FLAGS_dtype).c_str());
  std::printf(
      "targets: local >= 1.0x PyTorch (1.5x on ptb_lstm small); "
      "every 1 ps + N worker(s) >= 0.9x local\n");
  std::printf(
      "(each ratio compares whole steps: forward, backward, clipping, update; 'compute' is "
      "psflow's forward, backward and clipping alone, a rate, no ratio; 'host-upd': psflow's "
      "update on the host)\n");
  std::printf("%-22s %-4s %10s %10s %8s %9s", "model", "unit", "PyTorch", "compute", "local",
              "host-upd");
  for (int n : worker_counts) std::printf(" %8s", absl::StrCat("1ps+", n, "w").c_str());
  std::printf("  %s\n", "targets");
  for (const Measured& m : measured) {
    const Subject& s = m.subject;
    const double torch = pytorch.rates.at(s.item);
    const bool small_ptb = s.name == "ptb_lstm" && (s.config.empty() || s.config == "small");
    const double need = small_ptb ? 1.5 : 1.0;
    std::vector<std::string> missed;
    if (m.local.rate / torch < need) {
      missed.push_back(absl::StrFormat("local %.2fx < %.1fx PyTorch", m.local.rate / torch, need));
    }
    std::printf("%-22s %-4s %10.0f %10.0f %7.2fx %8.2fx", m.label.c_str(),
                s.language_model() ? "wps" : "eps", torch, m.compute.rate, m.local.rate / torch,
                m.local_host.rate / torch);
    for (size_t i = 0; i < worker_counts.size(); ++i) {
      std::printf(" %7.2fx", m.through[i].rate / torch);
      if (m.through[i].rate < 0.9 * m.local.rate) {
        missed.push_back(absl::StrFormat("1ps+%dw %.2fx < 0.9x local", worker_counts[i],
                                         m.through[i].rate / m.local.rate));
      }
    }
    const std::string verdict =
        missed.empty() ? "met" : absl::StrCat("MISSED: ", absl::StrJoin(missed, "; "));
    std::printf("  %s\n", verdict.c_str());
  }
  std::fflush(stdout);
}

// ---- PyTorch on this CPU (--pytorch without --device=gpu).

// The variables that steer either side's kernels or pools, as this process has them.
std::string KernelEnvironment() {
  std::vector<std::string> set;
  for (char** e = environ; *e != nullptr; ++e) {
    for (const char* prefix : {"OPENBLAS_", "OMP_", "GOMP_", "MKL_", "BLIS_"}) {
      if (absl::StartsWith(*e, prefix)) set.emplace_back(*e);
    }
  }
  if (set.empty()) return "no OPENBLAS_*, OMP_*, MKL_*, BLIS_* variables (as on a fresh machine)";
  return absl::StrJoin(set, " ");
}

// psflow in this process (Trainer + LocalUpdate, as RunLocal) and PyTorch at each thread count,
// interleaved run by run, with the ratios and issue 15's targets.
absl::Status CompareOnCpu(const std::vector<Subject>& subjects) {
  std::vector<int> thread_counts;
  for (absl::string_view t : absl::StrSplit(absl::GetFlag(FLAGS_compare_threads), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(t, &n) || n < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--compare_threads: \"", t, "\" is not a thread count >= 1"));
    }
    thread_counts.push_back(n);
  }
  const int repeats = absl::GetFlag(FLAGS_repeats);
  // Without PyTorch there is nothing to compare with: say so, and measure nothing.
  std::vector<std::string> probe =
      absl::StrSplit(absl::GetFlag(FLAGS_python), ' ', absl::SkipEmpty());
  if (probe.empty()) return absl::InvalidArgumentError("--python is empty");
  probe.insert(probe.end(), {"-c", "import torch"});
  auto p = local::ChildProcess::Spawn(probe, PythonEnv());
  if (!p.ok()) return p.status();
  std::string out;
  const std::optional<local::ExitStatus> exit = (*p)->WaitWithOutput(std::chrono::minutes(1), &out);
  if (!exit.has_value()) (*p)->Signal(SIGKILL);
  if (!exit.has_value() || !exit->ok()) {
    std::printf(
        "bench_model_throughput: \"%s -c 'import torch'\" failed: no PyTorch to compare with "
        "(scripts/setup.sh --bench installs Debian's; --python picks the interpreter); nothing "
        "measured\n",
        absl::GetFlag(FLAGS_python).c_str());
    return absl::OkStatus();
  }
  std::printf(
      "psflow / PyTorch on this CPU, same run: %s, %d cores; psflow's products: %s; "
      "environment: %s; median of %d, runs interleaved\n",
      bench::CpuModelName().c_str(), static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)),
      nn::CpuKernels().c_str(), KernelEnvironment().c_str(), repeats);
  std::printf("targets: >= 1.0x PyTorch on every model, >= 1.5x on ptb_lstm small and medium\n");
  std::printf("%-22s %7s %7s %10s %10s %7s  %s\n", "model", "threads", "unit", "psflow", "PyTorch",
              "ratio", "targets");
  std::string about;
  for (const Subject& s : subjects) {
    const double units_per_step =
        static_cast<double>(s.zoo.recipe.batch_size) * (s.language_model() ? s.zoo.num_steps() : 1);
    auto calibration = RunLocal(s, 5, thread_counts.front());
    if (!calibration.ok()) return calibration.status();
    const auto steps = std::max<int64_t>(
        20,
        static_cast<int64_t>(absl::GetFlag(FLAGS_seconds) * calibration->rate / units_per_step));
    std::map<int, std::vector<double>> ours, theirs;
    for (int r = 0; r < repeats; ++r) {
      for (int threads : thread_counts) {
        auto local = RunLocal(s, steps, threads);
        if (!local.ok()) return local.status();
        ours[threads].push_back(local->rate);
        auto torch = RunPytorch({s.item}, 1, threads);
        if (!torch.ok()) return torch.status();
        theirs[threads].push_back(torch->rates.at(s.item));
        about = torch->about;
      }
    }
    const bool ptb_target =
        s.name == "ptb_lstm" && (s.config.empty() || s.config == "small" || s.config == "medium");
    const double need = ptb_target ? 1.5 : 1.0;
    const std::string label = s.config.empty() ? s.name : absl::StrCat(s.name, " ", s.config);
    for (int threads : thread_counts) {
      const double psflow = MedianOf(ours[threads]), torch = MedianOf(theirs[threads]);
      const double ratio = psflow / torch;
      std::printf(
          "%-22s %7d %7s %10.0f %10.0f %6.2fx  %s\n", label.c_str(), threads,
          s.language_model() ? "words/s" : "exam/s", psflow, torch, ratio,
          ratio >= need ? "met" : absl::StrFormat("MISSED: %.2fx < %.1fx", ratio, need).c_str());
    }
    if (ours.contains(1) && ours.contains(2)) {
      std::printf("%-22s   2 threads / 1: psflow %.2fx, PyTorch %.2fx\n", label.c_str(),
                  MedianOf(ours[2]) / MedianOf(ours[1]), MedianOf(theirs[2]) / MedianOf(theirs[1]));
    }
    std::fflush(stdout);
  }
  std::printf("PyTorch: %s\n", about.c_str());
  return absl::OkStatus();
}

int Main() {
  std::vector<int> worker_counts;
  for (absl::string_view w : absl::StrSplit(absl::GetFlag(FLAGS_workers), ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(w, &n) || n < 1) return Fail(absl::InvalidArgumentError("--workers"));
    worker_counts.push_back(n);
  }
  const std::string device = absl::GetFlag(FLAGS_device);
  if (device != "cpu" && device != "gpu") {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--device must be cpu or gpu, got \"", device, "\"")));
  }
  if (absl::GetFlag(FLAGS_gpu) < 0) return Fail(absl::InvalidArgumentError("--gpu must be >= 0"));
  if (absl::Status s = nn::ParsePrecision(absl::GetFlag(FLAGS_dtype)).status(); !s.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--dtype ", s.message())));
  }
  if (absl::Status s = ParseWireType(absl::GetFlag(FLAGS_wire_dtype)).status(); !s.ok()) {
    return Fail(s);
  }
  if (absl::Status s = PsClient::CheckConnectionsPerTask(absl::GetFlag(FLAGS_ps_connections),
                                                         "--ps_connections");
      !s.ok()) {
    return Fail(s);
  }
  const std::string channel = absl::GetFlag(FLAGS_ps_channel);
  if (channel != "tcp" && channel != "shm") {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--ps_channel must be tcp or shm, got \"", channel, "\"")));
  }
  const bool gpu = OnGpu();
  const bool with_pytorch = gpu && !absl::GetFlag(FLAGS_pytorch).empty();
  if (gpu) {
    // A machine without a GPU (CI, a laptop) measures nothing and is no failure.
    absl::StatusOr<std::unique_ptr<nn::Backend>> probe =
        nn::MakeCudaBackend(absl::GetFlag(FLAGS_gpu), BenchPrecision());
    if (absl::IsFailedPrecondition(probe.status())) {
      std::printf("bench_model_throughput: --device=gpu: %s; nothing measured\n",
                  std::string(probe.status().message()).c_str());
      return 0;
    }
    if (!probe.ok()) return Fail(probe.status());
    std::printf(
        "synthetic data, seed batch sizes and optimizers, GPU %d (PCI %s), products in %s, CUDA "
        "graphs %s, %s, %d CPU cores, median of %d\n",
        absl::GetFlag(FLAGS_gpu), cuda::PciBusId(absl::GetFlag(FLAGS_gpu)).c_str(),
        absl::GetFlag(FLAGS_dtype).c_str(), absl::GetFlag(FLAGS_cuda_graphs) ? "on" : "off",
        cuda::BuildInfo().c_str(), static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)),
        absl::GetFlag(FLAGS_repeats));
  } else {
    if (!absl::GetFlag(FLAGS_pytorch).empty()) {
      std::vector<Subject> subjects;
      for (absl::string_view item : absl::StrSplit(absl::GetFlag(FLAGS_models), ',')) {
        absl::StatusOr<Subject> s = ParseSubject(item);
        if (!s.ok()) return Fail(s.status());
        subjects.push_back(*std::move(s));
      }
      const absl::Status compared = CompareOnCpu(subjects);
      return compared.ok() ? 0 : Fail(compared);
    }
    std::printf(
        "synthetic data, seed batch sizes and optimizers, %d CPU cores, "
        "--compute_threads=%d, median of %d\n",
        static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)), absl::GetFlag(FLAGS_compute_threads),
        absl::GetFlag(FLAGS_repeats));
  }
  std::printf("through the ps: the bulk channel %s, --wire_dtype=%s, --ps_connections=%d\n",
              absl::GetFlag(FLAGS_ps_channel) == "shm" ? "through shared memory" : "over TCP",
              absl::GetFlag(FLAGS_wire_dtype).c_str(), absl::GetFlag(FLAGS_ps_connections));
  std::printf("%-22s %-30s %7s %12s %9s %8s %10s %8s %11s\n", "model", "configuration", "steps",
              "rate", "vs local", "pull ms", "compute ms", "push ms", "exchange ms");
  std::vector<Measured> measured;
  for (absl::string_view item : absl::StrSplit(absl::GetFlag(FLAGS_models), ',')) {
    absl::StatusOr<Subject> parsed = ParseSubject(item);
    if (!parsed.ok()) return Fail(parsed.status());
    Subject s = *std::move(parsed);
    // Size the runs to --seconds from a short calibration.
    const double units_per_step =
        static_cast<double>(s.zoo.recipe.batch_size) * (s.language_model() ? s.zoo.num_steps() : 1);
    auto calibration = RunLocal(s, 5);
    if (!calibration.ok()) return Fail(calibration.status());
    if (gpu) {
      // Five steps on a GPU are mostly first launches: a second calibration of about a second.
      calibration = RunLocal(
          s, std::max<int64_t>(20, static_cast<int64_t>(calibration->rate / units_per_step)));
      if (!calibration.ok()) return Fail(calibration.status());
    }
    const auto steps = std::max<int64_t>(
        20,
        static_cast<int64_t>(absl::GetFlag(FLAGS_seconds) * calibration->rate / units_per_step));
    std::vector<Figures> compute;
    std::vector<Figures> local;
    std::vector<Figures> local_host;
    std::vector<std::vector<Figures>> through(worker_counts.size());
    std::vector<std::vector<Figures>> serial(worker_counts.size());
    for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
      if (gpu) {
        auto c = RunCompute(s, steps);
        if (!c.ok()) return Fail(c.status());
        compute.push_back(*c);
      }
      auto a = RunLocal(s, steps);
      if (!a.ok()) return Fail(a.status());
      local.push_back(*a);
      if (gpu) {
        auto h = RunLocal(s, steps, absl::GetFlag(FLAGS_compute_threads), /*host_update=*/true);
        if (!h.ok()) return Fail(h.status());
        local_host.push_back(*h);
      }
      for (size_t i = 0; i < worker_counts.size(); ++i) {
        auto b = RunThroughPs(s, worker_counts[i], steps, /*overlap=*/true);
        if (!b.ok()) return Fail(b.status());
        through[i].push_back(*b);
        if (!absl::GetFlag(FLAGS_serial_too)) continue;
        auto c = RunThroughPs(s, worker_counts[i], steps, /*overlap=*/false);
        if (!c.ok()) return Fail(c.status());
        serial[i].push_back(*c);
      }
    }
    const Figures base = Median(local);
    const std::string label = s.config.empty() ? s.name : absl::StrCat(s.name, " ", s.config);
    const char* unit = s.language_model() ? "words/s" : "examples/s";
    auto row = [&](const std::string& configuration, const Figures& f) {
      std::printf("%-22s %-30s %7ld %8.0f %-3s %9.2f %8.2f %10.2f %8.2f %11.2f\n", label.c_str(),
                  configuration.c_str(), static_cast<long>(steps), f.rate,
                  s.language_model() ? "wps" : "eps", f.rate / base.rate, f.pull_ms, f.compute_ms,
                  f.push_ms, f.exchange_ms);
    };
    row(absl::StrCat("local (", unit, ")"), base);
    Measured m{s, label, {}, base, {}, {}};
    if (gpu) {
      m.local_host = Median(local_host);
      row("local, host update", m.local_host);
      m.compute = Median(compute);
      row("compute only (no update)", m.compute);
    }
    for (size_t i = 0; i < worker_counts.size(); ++i) {
      m.through.push_back(Median(through[i]));
      row(absl::StrCat("1 ps + ", worker_counts[i], " worker(s)"), m.through.back());
      if (!serial[i].empty()) {
        const Figures f = Median(serial[i]);
        row(absl::StrCat("1 ps + ", worker_counts[i], " worker(s), serial"), f);
        std::printf("%-22s %-30s %7s %8.2fx\n", label.c_str(), "  overlap / serial", "",
                    m.through.back().rate / f.rate);
      }
    }
    measured.push_back(std::move(m));
    if (absl::GetFlag(FLAGS_profile)) {
      if (absl::Status p = PrintProfile(s); !p.ok()) return Fail(p);
    }
    std::fflush(stdout);
  }
  if (with_pytorch) {
    std::vector<std::string> items;
    for (const Measured& m : measured) items.push_back(m.subject.item);
    auto pytorch = RunPytorch(items, absl::GetFlag(FLAGS_repeats));
    if (!pytorch.ok()) return Fail(pytorch.status());
    PrintComparison(measured, worker_counts, *pytorch);
  }
  return 0;
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  psflow::ParseFlags(argc, argv,
                     "trains each seed model in process and through a ps, or beside PyTorch with "
                     "--pytorch (docs/benchmarks.md)");
  return psflow::Main();
}
