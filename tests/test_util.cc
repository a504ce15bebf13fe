#include "tests/test_util.h"

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

std::string WriteJob(const std::string& path, const std::string& name, int workers,
                     const std::vector<std::string>& worker_args) {
  std::ofstream(path) << absl::StrCat(
      "apiVersion: psflow.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: ", name,
      "}\nspec:\n  replicaSpecs:\n"
      "    PS: {replicas: 1, template: {spec: {containers: [{command: [psflow-ps]}]}}}\n"
      "    Worker:\n      replicas: ",
      workers,
      "\n      template:\n        spec:\n          containers:\n"
      "            - command: [psflow-worker]\n              args: [",
      absl::StrJoin(worker_args, ", "), "]\n");
  return path;
}

}  // namespace psflow::testing
