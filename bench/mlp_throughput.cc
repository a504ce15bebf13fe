// How much does training through the ps cost? Examples/s of the seed MLP (784-100-10, batch 100)
// trained three ways on this machine:
//   local   : in this process, no ps (Trainer + LocalUpdate): the baseline
//   1ps+1w  : psflow-ps and one psflow-worker process, async SGD over gRPC on loopback
//   1ps+2w  : psflow-ps and two psflow-worker processes (aggregate examples/s)
// Each configuration runs --repeats times; the median is reported with ratios to the baseline.
//
//   build/bin/bench_mlp_throughput [--steps=1000] [--repeats=3] [--compute_threads=1]
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
#include "core/free_ports.h"
#include "operator/local/child_process.h"
#include "worker/data/mnist.h"
#include "worker/models/model_zoo.h"
#include "worker/trainer.h"

ABSL_FLAG(int64_t, steps, 1000, "Training steps per worker in each run");
ABSL_FLAG(int, compute_threads, 1, "OpenBLAS threads per worker (0: one per core)");
ABSL_FLAG(int, repeats, 3, "Runs per configuration (median reported)");
ABSL_FLAG(std::string, data_path, "/usr/share/datasets/fashion-mnist", "MNIST-format data");

namespace psflow {
namespace {

constexpr float kLearningRate = 0.1f;

// Throughput and the mean time per step in each phase (averaged over the workers).
struct Figures {
  double examples_per_sec = 0;
  double pull_ms = 0, compute_ms = 0, push_ms = 0;
};

// Element-wise median over runs.
Figures Median(std::vector<Figures> runs) {
  auto median = [&](double Figures::*field) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(r.*field);
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(&Figures::examples_per_sec), median(&Figures::pull_ms),
          median(&Figures::compute_ms), median(&Figures::push_ms)};
}

double Field(const std::string& text, const std::string& key) {
  const size_t at = text.find(key + "=");
  return at == std::string::npos ? -1 : std::strtod(text.c_str() + at + key.size() + 1, nullptr);
}

absl::StatusOr<Figures> RunLocal(const data::Dataset& train, const data::Dataset& test) {
  auto backend = nn::MakeCpuBackend(absl::GetFlag(FLAGS_compute_threads));
  auto model = nn::Model::Create(models::MnistMlp(), *backend, 100);
  if (!model.ok()) return model.status();
  TrainingConfig config;
  config.optimizer.set_name("sgd");
  config.optimizer.set_learning_rate(kLearningRate);
  auto sync = LocalUpdate::Create(config);
  if (!sync.ok()) return sync.status();
  TrainerOptions o;
  o.train_steps = absl::GetFlag(FLAGS_steps);
  o.log_every_steps = 0;
  Trainer trainer(**model, **sync, train, test, o, nullptr);
  auto r = trainer.Run();
  if (!r.ok()) return r.status();
  const double per_step = 1e3 / static_cast<double>(r->steps);
  return Figures{r->examples_per_second(), r->pull_seconds * per_step,
                 r->compute_seconds * per_step, r->push_seconds * per_step};
}

std::string BinDir() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string path(self, n > 0 ? static_cast<size_t>(n) : 0);
  return path.substr(0, path.rfind('/'));
}

// Waits (at most 10 minutes) for the child to exit and returns its output.
std::string Collect(local::ChildProcess& p) {
  std::string out;
  if (!p.WaitWithOutput(std::chrono::minutes(10), &out)) p.Signal(SIGKILL);
  return out;
}

// Aggregate examples/s of `workers` worker processes training against one ps process.
absl::StatusOr<Figures> RunThroughPs(int workers) {
  auto ports = FreeLocalPorts(1 + workers);
  if (!ports.ok()) return ports.status();
  const std::string ps = absl::StrCat("127.0.0.1:", (*ports)[0]);
  std::vector<std::string> worker_hosts;
  for (int i = 0; i < workers; ++i)
    worker_hosts.push_back(absl::StrCat("127.0.0.1:", (*ports)[1 + i]));
  const std::string hosts = absl::StrJoin(worker_hosts, ",");
  const std::vector<std::string> env = {"PATH=/usr/bin:/bin"};
  auto ps_process =
      local::ChildProcess::Spawn({BinDir() + "/psflow-ps", "--job_name=ps", "--task_index=0",
                                  "--ps_hosts=" + ps, "--worker_hosts=" + hosts},
                                 env);
  if (!ps_process.ok()) return ps_process.status();
  std::vector<std::unique_ptr<local::ChildProcess>> procs;
  for (int i = 0; i < workers; ++i) {
    auto w = local::ChildProcess::Spawn(
        {BinDir() + "/psflow-worker", "--job_name=worker", absl::StrCat("--task_index=", i),
         "--ps_hosts=" + ps, "--worker_hosts=" + hosts,
         absl::StrCat("--train_steps=", absl::GetFlag(FLAGS_steps)),
         absl::StrCat("--learning_rate=", kLearningRate), "--log_every_steps=0",
         absl::StrCat("--compute_threads=", absl::GetFlag(FLAGS_compute_threads)),
         "--data_path=" + absl::GetFlag(FLAGS_data_path)},
        env);
    if (!w.ok()) return w.status();
    procs.push_back(*std::move(w));
  }
  Figures total;
  for (auto& p : procs) {
    const std::string out = Collect(*p);
    const double rate = Field(out, "examples_per_sec");
    if (!p->exit_status() || !p->exit_status()->ok() || rate < 0) {
      return absl::InternalError(absl::StrCat("worker failed:\n", out));
    }
    total.examples_per_sec += rate;
    total.pull_ms += Field(out, "pull_ms") / workers;
    total.compute_ms += Field(out, "compute_ms") / workers;
    total.push_ms += Field(out, "push_ms") / workers;
  }
  (*ps_process)->Signal(SIGTERM);
  Collect(**ps_process);
  return total;
}

int Main() {
  auto train = data::LoadMnist(absl::GetFlag(FLAGS_data_path), data::Split::kTrain);
  auto test = data::LoadMnist(absl::GetFlag(FLAGS_data_path), data::Split::kTest);
  if (!train.ok() || !test.ok()) {
    std::fprintf(stderr, "bench: %s\n",
                 std::string((train.ok() ? test.status() : train.status()).message()).c_str());
    return 1;
  }
  std::vector<Figures> local, one, two;
  for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
    auto a = RunLocal(*train, *test);
    auto b = RunThroughPs(1);
    auto c = RunThroughPs(2);
    for (const auto* s : {&a, &b, &c}) {
      if (!s->ok()) {
        std::fprintf(stderr, "bench: %s\n", std::string(s->status().message()).c_str());
        return 1;
      }
    }
    local.push_back(*a);
    one.push_back(*b);
    two.push_back(*c);
  }
  const Figures base = Median(local), m1 = Median(one), m2 = Median(two);
  std::printf(
      "mnist_mlp batch 100, %ld steps per worker, median of %d runs, %d CPU cores, "
      "--compute_threads=%d\n",
      static_cast<long>(absl::GetFlag(FLAGS_steps)), absl::GetFlag(FLAGS_repeats),
      static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)), absl::GetFlag(FLAGS_compute_threads));
  std::printf("%-28s %11s %9s %8s %10s %8s\n", "configuration", "examples/s", "vs local", "pull ms",
              "compute ms", "push ms");
  auto row = [&](const char* name, const Figures& f) {
    std::printf("%-28s %11.0f %9.2f %8.3f %10.3f %8.3f\n", name, f.examples_per_sec,
                f.examples_per_sec / base.examples_per_sec, f.pull_ms, f.compute_ms, f.push_ms);
  };
  row("local (in process, no ps)", base);
  row("1 ps + 1 worker", m1);
  row("1 ps + 2 workers (sum)", m2);
  std::printf("2 workers / 1 worker through the ps: %.2fx\n",
              m2.examples_per_sec / m1.examples_per_sec);
  return 0;
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return psflow::Main();
}
