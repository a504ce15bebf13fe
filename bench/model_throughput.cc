// What does each seed model train at on this machine, and what does the ps cost it? For each
// model (and PTB config), examples/s (words/s for PTB) three ways, on synthetic data of the
// model's shape with the seed's batch size and optimizer:
//   local   : in this process, no ps (Trainer + LocalUpdate): the baseline
//   1ps+1w  : a psflow-ps process and one psflow-worker process over gRPC on loopback
//   1ps+2w  : a psflow-ps process and two psflow-worker processes (aggregate rate)
// Each configuration runs --repeats times; the median is reported with ratios to the baseline.
//
//   build/bin/bench_model_throughput [--models=mnist_mlp,mnist_cnn,cifar10_cnn,ptb_lstm:small]
//       [--seconds=10] [--repeats=1] [--compute_threads=1] [--workers=1,2]
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/free_ports.h"
#include "operator/local/child_process.h"
#include "worker/models/model_zoo.h"
#include "worker/trainer.h"
#include "worker/worker_input.h"

ABSL_FLAG(std::string, models, "mnist_mlp,mnist_cnn,cifar10_cnn,ptb_lstm:small,ptb_lstm:medium",
          "Comma-separated models; ptb_lstm:CONFIG for a PTB configuration");
ABSL_FLAG(double, seconds, 10, "Approximate training time per run (steps are sized to it)");
ABSL_FLAG(int, compute_threads, 1, "OpenBLAS threads per worker (0: one per core)");
ABSL_FLAG(int, repeats, 1, "Runs per configuration (median reported)");
ABSL_FLAG(std::string, workers, "1,2", "Worker counts to run through one ps");

namespace psflow {
namespace {

struct Figures {
  double rate = 0;  // examples/s, or words/s for language models
  double pull_ms = 0, compute_ms = 0, push_ms = 0;
};

Figures Median(std::vector<Figures> runs) {
  auto median = [&](double Figures::*field) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(r.*field);
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(&Figures::rate), median(&Figures::pull_ms), median(&Figures::compute_ms),
          median(&Figures::push_ms)};
}

double Field(const std::string& text, const std::string& key) {
  const size_t at = text.find(" " + key + "=");
  return at == std::string::npos ? -1 : std::strtod(text.c_str() + at + key.size() + 2, nullptr);
}

struct Subject {
  std::string name, config;
  models::ZooModel zoo;
  bool language_model() const { return zoo.data == models::DataKind::kPtb; }
};

// In-process training for `steps` steps; also the calibration run.
absl::StatusOr<Figures> RunLocal(const Subject& s, int64_t steps) {
  InputOptions in;
  in.synthetic = true;
  in.batch_size = s.zoo.recipe.batch_size;
  auto input = LoadWorkerInput(s.zoo, in);
  if (!input.ok()) return input.status();
  auto backend = nn::MakeCpuBackend(absl::GetFlag(FLAGS_compute_threads));
  auto model = nn::Model::Create(s.zoo.spec, *backend, in.batch_size);
  if (!model.ok()) return model.status();
  TrainingConfig config;
  config.optimizer.set_name(s.zoo.recipe.optimizer);
  config.optimizer.set_learning_rate(s.zoo.recipe.learning_rate);
  auto sync = LocalUpdate::Create(config);
  if (!sync.ok()) return sync.status();
  TrainerOptions o;
  o.train_steps = steps;
  o.log_every_steps = 0;
  o.max_grad_norm = s.zoo.recipe.max_grad_norm;
  o.learning_rate = s.zoo.recipe.learning_rate;
  data::Prefetcher prefetcher(std::move((*input)->train));
  Trainer trainer(**model, **sync, prefetcher, o, nullptr);
  auto r = trainer.Run();
  if (!r.ok()) return r.status();
  const double per_step = 1e3 / static_cast<double>(r->steps);
  return Figures{s.language_model() ? r->words_per_second() : r->examples_per_second(),
                 r->pull_seconds * per_step, r->compute_seconds * per_step,
                 r->push_seconds * per_step};
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
absl::StatusOr<Figures> RunThroughPs(const Subject& s, int workers, int64_t steps) {
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
  auto ps_process =
      local::ChildProcess::Spawn({BinDir() + "/psflow-ps", "--job_name=ps", "--task_index=0",
                                  "--ps_hosts=" + ps, "--worker_hosts=" + hosts},
                                 env);
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
        absl::StrCat("--compute_threads=", absl::GetFlag(FLAGS_compute_threads))};
    if (!s.config.empty()) argv.push_back("--model_config=" + s.config);
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
    total.rate += rate;
    total.pull_ms += Field(out, "pull_ms") / workers;
    total.compute_ms += Field(out, "compute_ms") / workers;
    total.push_ms += Field(out, "push_ms") / workers;
  }
  (*ps_process)->Signal(SIGTERM);
  Collect(**ps_process);
  return total;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "bench: %s\n", std::string(s.message()).c_str());
  return 1;
}

int Main() {
  std::vector<int> worker_counts;
  for (absl::string_view w : absl::StrSplit(absl::GetFlag(FLAGS_workers), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(w, &n) || n < 1) return Fail(absl::InvalidArgumentError("--workers"));
    worker_counts.push_back(n);
  }
  std::printf(
      "synthetic data, seed batch sizes and optimizers, %d CPU cores, "
      "--compute_threads=%d, median of %d\n",
      static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)), absl::GetFlag(FLAGS_compute_threads),
      absl::GetFlag(FLAGS_repeats));
  std::printf("%-22s %-24s %7s %12s %9s %8s %10s %8s\n", "model", "configuration", "steps", "rate",
              "vs local", "pull ms", "compute ms", "push ms");
  for (absl::string_view item : absl::StrSplit(absl::GetFlag(FLAGS_models), ',')) {
    const std::vector<std::string> parts = absl::StrSplit(item, ':');
    Subject s{parts[0], parts.size() > 1 ? parts[1] : "", {}};
    auto zoo = models::FindModel(s.name, s.config);
    if (!zoo.ok()) return Fail(zoo.status());
    s.zoo = *zoo;
    // Size the runs to --seconds from a short calibration.
    auto calibration = RunLocal(s, 5);
    if (!calibration.ok()) return Fail(calibration.status());
    const double units_per_step =
        static_cast<double>(s.zoo.recipe.batch_size) * (s.language_model() ? s.zoo.num_steps : 1);
    const auto steps = std::max<int64_t>(
        20,
        static_cast<int64_t>(absl::GetFlag(FLAGS_seconds) * calibration->rate / units_per_step));
    std::vector<Figures> local;
    std::vector<std::vector<Figures>> through(worker_counts.size());
    for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
      auto a = RunLocal(s, steps);
      if (!a.ok()) return Fail(a.status());
      local.push_back(*a);
      for (size_t i = 0; i < worker_counts.size(); ++i) {
        auto b = RunThroughPs(s, worker_counts[i], steps);
        if (!b.ok()) return Fail(b.status());
        through[i].push_back(*b);
      }
    }
    const Figures base = Median(local);
    const std::string label = s.config.empty() ? s.name : absl::StrCat(s.name, " ", s.config);
    const char* unit = s.language_model() ? "words/s" : "examples/s";
    auto row = [&](const std::string& configuration, const Figures& f) {
      std::printf("%-22s %-24s %7ld %8.0f %-3s %9.2f %8.2f %10.2f %8.2f\n", label.c_str(),
                  configuration.c_str(), static_cast<long>(steps), f.rate,
                  s.language_model() ? "wps" : "eps", f.rate / base.rate, f.pull_ms, f.compute_ms,
                  f.push_ms);
    };
    row(absl::StrCat("local (", unit, ")"), base);
    for (size_t i = 0; i < worker_counts.size(); ++i) {
      row(absl::StrCat("1 ps + ", worker_counts[i], " worker(s)"), Median(through[i]));
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return psflow::Main();
}
