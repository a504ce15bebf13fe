#include "tests/test_util.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/http_get.h"

extern char** environ;

namespace psflow::testing {

std::string BinDir() { return PSFLOW_BIN_DIR; }
std::string SourceDir() { return PSFLOW_SOURCE_DIR; }
std::string Binary(const std::string& name) { return BinDir() + "/" + name; }

std::vector<std::string> Environment(const std::vector<std::string>& extra,
                                     const std::vector<std::string>& remove) {
  auto name_of = [](const std::string& e) { return e.substr(0, e.find('=')); };
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e), name = name_of(entry);
    bool drop = false;
    for (const auto& r : remove) drop |= name == r;
    for (const auto& x : extra) drop |= name == name_of(x);
    if (!drop) env.push_back(entry);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

CommandResult RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         std::chrono::seconds timeout) {
  CommandResult result;
  auto p = local::ChildProcess::Spawn(argv, env);
  if (!p.ok()) {
    result.status.code = 127;
    result.output = std::string(p.status().message());
    return result;
  }
  if (auto status = (*p)->WaitWithOutput(timeout, &result.output)) {
    result.status = *status;
  } else {
    result.timed_out = true;
    (*p)->Signal(SIGKILL);
    result.status =
        (*p)->WaitWithOutput(std::chrono::seconds(10), &result.output).value_or(result.status);
  }
  return result;
}

std::vector<std::string> LinesWith(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (absl::StrContains(line, needle)) out.push_back(line);
  }
  return out;
}

double Field(const std::string& line, const std::string& key) {
  const size_t at = line.find(key + "=");
  if (at == std::string::npos) return NAN;
  return std::strtod(line.c_str() + at + key.size() + 1, nullptr);
}

ScrapedRun RunScrapedByPrometheus(const std::vector<std::string>& argv,
                                  const std::vector<std::string>& env,
                                  std::chrono::seconds timeout) {
  ScrapedRun run;
  auto worker = local::ChildProcess::Spawn(argv, env);
  if (!worker.ok()) {
    run.output = std::string(worker.status().message());
    return run;
  }
  // Its port, from its log line "metrics on :PORT/metrics".
  int port = 0;
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  while (port == 0 && std::chrono::steady_clock::now() < give_up) {
    pollfd p{(*worker)->output_fd(), POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = read((*worker)->output_fd(), buf, sizeof(buf));
    if (n <= 0) break;
    run.output.append(buf, static_cast<size_t>(n));
    if (const size_t at = run.output.find("metrics on :"); at != std::string::npos) {
      std::sscanf(run.output.c_str() + at, "metrics on :%d/metrics", &port);
    }
  }
  std::atomic<bool> done{false};
  std::thread prometheus([&] {
    while (port > 0 && !done.load()) {
      auto text = HttpGet("127.0.0.1", port, "/metrics", std::chrono::milliseconds(2000),
                          "Prometheus/2.42.0");
      if (text.ok()) run.scrapes.push_back(*std::move(text));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      give_up - std::chrono::steady_clock::now());
  run.exit = (*worker)->WaitWithOutput(std::max(left, std::chrono::milliseconds(0)), &run.output);
  done = true;
  prometheus.join();
  return run;
}

std::string WriteJob(const std::string& path, const std::string& name, int workers,
                     const std::vector<std::string>& worker_args) {
  std::ofstream(path) << absl::StrCat(
      "apiVersion: psflow.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: ", name,
      "}\nspec:\n  replicaSpecs:\n"
      "    PS: {replicas: 1, template: {spec: {containers: [{name: psflow, command: "
      "[psflow-ps]}]}}}\n"
      "    Worker:\n      replicas: ",
      workers,
      "\n      template:\n        spec:\n          containers:\n"
      "            - name: psflow\n              command: [psflow-worker]\n              args: [",
      absl::StrJoin(worker_args, ", "), "]\n");
  return path;
}

namespace {

void WriteCifarLikeFile(std::ofstream& out, int records, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> noise(-40, 40);
  for (int r = 0; r < records; ++r) {
    const int label = r % 10;
    out.put(static_cast<char>(label));
    for (int channel = 0; channel < 3; ++channel) {  // the format is channel-major (CHW)
      for (int y = 0; y < 32; ++y) {
        for (int x = 0; x < 32; ++x) {
          const int pattern = label / 3;
          const bool on = pattern == 0   ? true
                          : pattern == 1 ? (y / 2) % 2 == 0
                          : pattern == 2 ? (x / 2) % 2 == 0
                                         : ((x / 2) + (y / 2)) % 2 == 0;
          int v = 60 + (channel == label % 3 ? 80 : 0) + (on ? 60 : 0) + noise(rng);
          out.put(static_cast<char>(std::clamp(v, 0, 255)));
        }
      }
    }
  }
}

}  // namespace

bool WriteCifarLikeData(const std::string& dir, int train_records, int test_records,
                        uint64_t seed) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::mt19937_64 rng(seed);
  for (int i = 1; i <= 6; ++i) {
    const std::string path = i <= 5 ? absl::StrCat(dir, "/data_batch_", i, ".bin")
                                    : absl::StrCat(dir, "/test_batch.bin");
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    WriteCifarLikeFile(out, i <= 5 ? train_records : test_records, rng);
    if (!out.good()) return false;
  }
  return true;
}

}  // namespace psflow::testing
