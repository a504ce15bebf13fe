// A live ps + worker pair serves Prometheus text that `promtool check metrics` accepts, with the
// documented metric names and labels, and counters that rise while training runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/free_ports.h"
#include "core/http_get.h"
#include "core/prometheus_text.h"
#include "tests/test_util.h"

namespace psflow::testing {
namespace {

using std::chrono::milliseconds;

// Scrapes until `metric` is present and > `above` (bounded: 60 s).
std::string ScrapeUntil(int port, const std::string& metric, double above) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < give_up) {
    auto text = HttpGet("127.0.0.1", port, "/metrics", milliseconds(1000));
    if (text.ok() && SumSamples(*text, metric).value_or(-1) > above) return *text;
    std::this_thread::sleep_for(milliseconds(100));
  }
  ADD_FAILURE() << metric << " on :" << port << " never rose above " << above;
  return "";
}

void ExpectPromtoolAccepts(const std::string& exposition, const std::string& what) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            absl::StrCat("psflow_metrics_", getpid(), "_", what, ".txt"))
                               .string();
  std::ofstream(path) << exposition;
  const auto r = RunCommand({"sh", "-c", "promtool check metrics < " + path}, Environment({}),
                            std::chrono::seconds(60));
  std::filesystem::remove(path);
  EXPECT_TRUE(r.status.ok()) << what << ": promtool says:\n" << r.output;
}

TEST(Metrics, LivePsAndWorkerExposeValidRisingCounters) {
  const std::vector<int> ports = FreeLocalPorts(4).value();
  const std::string ps = absl::StrCat("127.0.0.1:", ports[0]);
  auto ps_process = local::ChildProcess::Spawn(
      {Binary("psflow-ps"), "--job_name=ps", "--task_index=0", "--ps_hosts=" + ps,
       absl::StrCat("--worker_hosts=127.0.0.1:", ports[1]),
       absl::StrCat("--metrics_port=", ports[2])},
      Environment({"PSFLOW_JOB_NAME=metrics-test"}, {"TF_CONFIG", "PSFLOW_METRICS_PORT"}));
  ASSERT_TRUE(ps_process.ok()) << ps_process.status();
  auto worker = local::ChildProcess::Spawn(
      {Binary("psflow-worker"), "--job_name=worker", "--task_index=0", "--ps_hosts=" + ps,
       absl::StrCat("--worker_hosts=127.0.0.1:", ports[1]), "--train_steps=100000",
       "--learning_rate=0.1", "--log_every_steps=0"},
      // The worker takes its metrics port from the environment, as under `psflow run`.
      Environment({"PSFLOW_JOB_NAME=metrics-test", absl::StrCat("PSFLOW_METRICS_PORT=", ports[3])},
                  {"TF_CONFIG"}));
  ASSERT_TRUE(worker.ok()) << worker.status();

  const std::string first = ScrapeUntil(ports[3], "psflow_worker_steps_total", 0);
  const double steps1 = SumSamples(first, "psflow_worker_steps_total").value_or(0);
  const std::string second = ScrapeUntil(ports[3], "psflow_worker_steps_total", steps1 + 10);
  const std::string ps_text = ScrapeUntil(ports[2], "psflow_ps_updates_applied_total", steps1);

  for (const char* counter :
       {"psflow_worker_examples_total", "psflow_worker_pushed_bytes_total",
        "psflow_worker_pulled_bytes_total", "psflow_worker_step_duration_seconds_count"}) {
    EXPECT_GT(SumSamples(second, counter).value_or(0), SumSamples(first, counter).value_or(0))
        << counter;
  }
  // Examples and bytes per step are exact (batch 100, 318,040 bytes of MLP parameters). A step's
  // counters are written together (WorkerMetrics::Together), so examples match steps exactly;
  // the pushed bytes a step reports are those of the exchange it finished (overlapped: the
  // previous step's), so they may trail by one push.
  const double steps2 = SumSamples(second, "psflow_worker_steps_total").value_or(0);
  const double examples2 = SumSamples(second, "psflow_worker_examples_total").value_or(0);
  const double pushed2 = SumSamples(second, "psflow_worker_pushed_bytes_total").value_or(0);
  EXPECT_EQ(examples2, steps2 * 100);
  EXPECT_TRUE(pushed2 == steps2 * 318040 || pushed2 == (steps2 - 1) * 318040) << pushed2;
  EXPECT_TRUE(SumSamples(second, "psflow_worker_loss").has_value());
  EXPECT_TRUE(absl::StrContains(
      second,
      R"(psflow_worker_steps_total{job="metrics-test",replica_index="0",replica_type="worker"})"))
      << second;
  EXPECT_EQ(SumSamples(ps_text, "psflow_ps_variable_bytes"), 318040);
  EXPECT_GE(SumSamples(ps_text, "psflow_ps_global_step").value_or(0), steps1);
  EXPECT_GT(SumSamples(ps_text, "psflow_ps_received_bytes_total").value_or(0), 0);
  EXPECT_GT(SumSamples(ps_text, "psflow_ps_sent_bytes_total").value_or(0), 0);
  EXPECT_TRUE(absl::StrContains(ps_text, R"(replica_type="ps")")) << ps_text;
  // The ps's own figures: pushes, staleness of every applied push, partitions, learning rate.
  EXPECT_GE(SumSamples(ps_text, "psflow_ps_pushes_total").value_or(0), steps1);
  EXPECT_GE(SumSamples(ps_text, "psflow_ps_staleness_steps_count").value_or(0), steps1);
  EXPECT_EQ(SumSamples(ps_text, "psflow_ps_partition_bytes"), 318040);
  EXPECT_EQ(SumSamples(ps_text, "psflow_ps_gradients_dropped_total"), 0);  // async: none
  EXPECT_NEAR(SumSamples(ps_text, "psflow_ps_learning_rate").value_or(0), 0.1, 1e-6);

  ExpectPromtoolAccepts(second, "worker");
  ExpectPromtoolAccepts(ps_text, "ps");
  auto health = HttpGet("127.0.0.1", ports[2], "/healthz", milliseconds(1000));
  EXPECT_TRUE(health.ok()) << health.status();
}

// --compute=replay:20 through a real ps: the real MLP's gradients (its 318,040 bytes) are pushed
// every step, the worker says it replays in its gauge, start-up line and done line, and no step
// is shorter than 20 ms (a lower bound: a replayed step sleeps at least its time).
TEST(Metrics, AReplayingWorkerPushesRealGradientsAndSaysItReplays) {
  constexpr int kSteps = 150;
  const std::vector<int> ports = FreeLocalPorts(4).value();
  const std::string ps = absl::StrCat("127.0.0.1:", ports[0]);
  auto ps_process = local::ChildProcess::Spawn(
      {Binary("psflow-ps"), "--job_name=ps", "--task_index=0", "--ps_hosts=" + ps,
       absl::StrCat("--worker_hosts=127.0.0.1:", ports[1]),
       absl::StrCat("--metrics_port=", ports[2])},
      Environment({"PSFLOW_JOB_NAME=replay-test"}, {"TF_CONFIG", "PSFLOW_METRICS_PORT"}));
  ASSERT_TRUE(ps_process.ok()) << ps_process.status();
  auto worker = local::ChildProcess::Spawn(
      {Binary("psflow-worker"), "--job_name=worker", "--task_index=0", "--ps_hosts=" + ps,
       absl::StrCat("--worker_hosts=127.0.0.1:", ports[1]), "--data_source=synthetic",
       absl::StrCat("--train_steps=", kSteps), "--log_every_steps=0", "--compute_threads=1",
       "--compute=replay:20"},
      Environment({"PSFLOW_JOB_NAME=replay-test", absl::StrCat("PSFLOW_METRICS_PORT=", ports[3])},
                  {"TF_CONFIG"}));
  ASSERT_TRUE(worker.ok()) << worker.status();
  const std::string worker_text = ScrapeUntil(ports[3], "psflow_worker_replayed_step_seconds", 0);
  EXPECT_NEAR(SumSamples(worker_text, "psflow_worker_replayed_step_seconds").value_or(0), 0.020,
              1e-9);

  std::string output;
  const std::optional<local::ExitStatus> exit =
      (*worker)->WaitWithOutput(std::chrono::seconds(120), &output);
  ASSERT_TRUE(exit.has_value()) << output;
  ASSERT_TRUE(exit->ok()) << exit->Describe() << "\n" << output;
  EXPECT_EQ(LinesWith(output, "compute: replayed (replay:20), 20.000 ms/step").size(), 1u)
      << output;
  const std::vector<std::string> done = LinesWith(output, "worker 0 done: ");
  ASSERT_EQ(done.size(), 1u) << output;
  EXPECT_TRUE(absl::StrContains(done[0], " compute=replay:20 ")) << done[0];
  EXPECT_TRUE(absl::StrContains(done[0], "not evaluated")) << done[0];
  EXPECT_EQ(Field(done[0], "steps"), kSteps) << done[0];
  // Every step but the first (real) one sleeps 20 ms at least.
  EXPECT_GE(Field(done[0], "seconds"), (kSteps - 1) * 0.020) << done[0];

  // Every step's push reached the ps, at the real model's size.
  const std::string ps_text = ScrapeUntil(ports[2], "psflow_ps_pushes_total", kSteps - 1);
  EXPECT_EQ(SumSamples(ps_text, "psflow_ps_pushes_total"), kSteps) << ps_text;
  EXPECT_EQ(SumSamples(ps_text, "psflow_ps_variable_bytes"), 318040);
}

}  // namespace
}  // namespace psflow::testing
