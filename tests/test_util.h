// Helpers for tests that run psflow's binaries as real processes.
#ifndef PSFLOW_TESTS_TEST_UTIL_H_
#define PSFLOW_TESTS_TEST_UTIL_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "operator/local/child_process.h"

namespace psflow::testing {

// Directory of the built binaries (psflow, psflow-ps, psflow-worker).
std::string BinDir();
std::string SourceDir();

// CIFAR-10's binary version (data_batch_1..5.bin with `train_records` records each,
// test_batch.bin with `test_records`) in `dir`, of generated images whose class shows in ways the
// tutorial's distortions keep: the brightest channel (class % 3) and a stripe pattern of period 4
// (class / 3: none, horizontal, vertical, checkered), under uniform noise drawn from `seed`.
// False when a file cannot be written.
bool WriteCifarLikeData(const std::string& dir, int train_records, int test_records, uint64_t seed);
std::string Binary(const std::string& name);  // BinDir() + "/" + name

struct CommandResult {
  local::ExitStatus status;
  std::string output;  // stdout and stderr, interleaved as written
  bool timed_out = false;
};

// The current environment with `extra` ("NAME=value") entries replacing same-named ones and
// `remove` names dropped.
std::vector<std::string> Environment(const std::vector<std::string>& extra,
                                     const std::vector<std::string>& remove = {});

// Runs argv to completion; after `timeout` the process group is killed and timed_out is set.
CommandResult RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         std::chrono::seconds timeout);

// A worker run while a monitoring system scrapes it: its exit (nullopt when `timeout` passed; it
// is then killed), its output, and every /metrics answer, oldest first.
struct ScrapedRun {
  std::optional<local::ExitStatus> exit;
  std::string output;
  std::vector<std::string> scrapes;
};

// Runs argv (psflow-worker with --metrics_port=0) and, from its "metrics on :PORT/metrics" line
// until it exits, scrapes its /metrics every 100 ms with Prometheus's User-Agent, as Prometheus
// would.
ScrapedRun RunScrapedByPrometheus(const std::vector<std::string>& argv,
                                  const std::vector<std::string>& env,
                                  std::chrono::seconds timeout);

// A TrainingJob manifest named `name` with one ps and `workers` workers, each running
// psflow-worker with `worker_args` (e.g. "--model=mnist_mlp"), written to `path`; returns path.
std::string WriteJob(const std::string& path, const std::string& name, int workers,
                     const std::vector<std::string>& worker_args);

// Lines of `text` that contain `needle`.
std::vector<std::string> LinesWith(const std::string& text, const std::string& needle);

// The value of "key=<number>" in `line`; NaN when absent.
double Field(const std::string& line, const std::string& key);

}  // namespace psflow::testing

#endif  // PSFLOW_TESTS_TEST_UTIL_H_
