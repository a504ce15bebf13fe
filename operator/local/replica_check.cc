#include "operator/local/replica_check.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/file_util.h"
#include "operator/api/cluster_spec_builder.h"
#include "operator/local/child_process.h"

extern char** environ;

namespace psflow::local {
namespace {

// spec.modelFile's text in a file of its own for as long as the checks run.
class TemporaryModelFile {
 public:
  static absl::StatusOr<std::unique_ptr<TemporaryModelFile>> Write(const std::string& dir,
                                                                   const std::string& text) {
    std::string path = absl::StrCat(dir, "/psflow-check-model-XXXXXX.yaml");
    const int fd = mkstemps(path.data(), 5);
    if (fd < 0) {
      return ErrnoError(errno, "cannot make a file in", dir);
    }
    auto file = std::unique_ptr<TemporaryModelFile>(new TemporaryModelFile(path));
    const absl::Status written = WriteFull(fd, text.data(), text.size(), path);
    close(fd);
    if (!written.ok()) return written;
    return file;
  }
  ~TemporaryModelFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  explicit TemporaryModelFile(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Why `args` cannot be checked here, or empty: a value the kubelet gives them.
std::string NotCheckableArgs(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (absl::StrContains(arg, "$(")) {
      return absl::StrCat("its args use $(VAR) (", arg, "), which only a kubelet expands");
    }
    const std::string flag = api::ParseFlagArgument(arg).name;
    if (flag == "flagfile" || flag == "fromenv" || flag == "tryfromenv") {
      return absl::StrCat("its args take flags from elsewhere (--", flag, ")");
    }
  }
  return "";
}

// The environment of the check: the replica's (ReplicaEnvironment), except that of the
// container's own entries only psflow's (PSFLOW_*) are kept, so that checking a manifest runs
// nothing it names (an LD_PRELOAD), and the metrics port is 0, as the runner and the operator
// always set it.
std::vector<std::string> CheckEnvironment(const api::TrainingJob& job, api::ReplicaType type,
                                          const ClusterSpec& cluster,
                                          const std::map<std::string, std::string>& inherited) {
  std::map<std::string, std::string> env = ReplicaEnvironment(inherited, job, type, 0, cluster);
  for (const api::EnvVar& e : job.replica_specs.at(type).MainContainer().env) {
    if (e.value_from || absl::StartsWith(e.name, "PSFLOW_") || e.name == "TF_CONFIG") continue;
    if (const auto own = inherited.find(e.name); own != inherited.end()) {
      env[e.name] = own->second;
    } else {
      env.erase(e.name);
    }
  }
  env["PSFLOW_METRICS_PORT"] = absl::StrCat(0);  // (a literal trips GCC 12's -Wrestrict)
  std::vector<std::string> entries;
  for (const auto& [name, value] : env) entries.push_back(absl::StrCat(name, "=", value));
  return entries;
}

ReplicaCheck CheckOne(const api::TrainingJob& job, api::ReplicaType type,
                      const ClusterSpec& cluster, const std::string& model_file,
                      const ReplicaCheckOptions& options) {
  const api::Container& c = job.replica_specs.at(type).MainContainer();
  ReplicaCheck check;
  check.type = type;
  check.program = CheckedProgram(c.command);
  if (check.program.empty()) {
    check.line = c.command.empty() ? std::string("it has no command")
                                   : absl::StrCat("its command \"", c.command[0],
                                                  "\" is not psflow-ps or psflow-worker");
    return check;
  }
  // psflow's own program of that name (PATH has psflow's folder first), never a path the
  // manifest names: checking a manifest runs nothing it chose.
  std::vector<std::string> argv = {check.program, "--check_config"};
  argv.insert(argv.end(), c.command.begin() + 1, c.command.end());
  argv.insert(argv.end(), c.args.begin(), c.args.end());
  if (!model_file.empty() && type != api::ReplicaType::kPS) {
    argv.push_back(absl::StrCat("--model_file=", model_file));
  }
  if (check.line = NotCheckableArgs(argv); !check.line.empty()) return check;
  for (const std::string& file : ModelFileArgs(argv)) {
    if (file != model_file && access(file.c_str(), R_OK) != 0) {
      check.line = absl::StrCat("its --model_file=", file,
                                " is not on this machine (a file the pod mounts?)");
      return check;
    }
  }
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Spawn(argv, CheckEnvironment(job, type, cluster, options.inherited));
  if (!child.ok()) {
    check.line = std::string(child.status().message());
    return check;
  }
  std::string output;
  const std::optional<ExitStatus> exit = (*child)->WaitWithOutput(options.timeout, &output);
  if (!exit.has_value()) {
    check.line = absl::StrCat(argv[0], " --check_config did not answer within ",
                              options.timeout.count() / 1000, " s");
    return check;
  }
  check.line = CheckOutputLine(output, check.program);
  if (!model_file.empty())
    check.line = absl::StrReplaceAll(check.line, {{model_file, "spec.modelFile"}});
  if (absl::StrContains(check.line, "Unknown command line flag 'check_config'")) {
    check.line = absl::StrCat("the ", argv[0], " found here predates --check_config");
    return check;
  }
  if (exit->ok()) {
    check.result = ReplicaCheck::Result::kValid;
  } else {
    check.result = ReplicaCheck::Result::kInvalid;
    if (check.line.empty()) {
      check.line = exit->Describe();
    } else if (exit->signal != 0) {
      absl::StrAppend(&check.line, " (", exit->Describe(), ")");
    }
  }
  return check;
}

}  // namespace

std::map<std::string, std::string> ReplicaEnvironment(
    const std::map<std::string, std::string>& inherited, const api::TrainingJob& job,
    api::ReplicaType type, int index, const ClusterSpec& cluster) {
  std::map<std::string, std::string> env = inherited;
  for (const api::EnvVar& e : job.replica_specs.at(type).MainContainer().env) {
    if (!e.value_from) env[e.name] = e.value;
  }
  env["TF_CONFIG"] = ToTfConfig(api::ForTask(cluster, type, index));
  env["PSFLOW_JOB_NAME"] = job.name;
  env["PSFLOW_REPLICA_TYPE"] = std::string(api::TaskTypeName(type));
  env["PSFLOW_REPLICA_INDEX"] = absl::StrCat(index);
  return env;
}

std::map<std::string, std::string> OwnEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const absl::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq != absl::string_view::npos) {
      env[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
    }
  }
  return env;
}

std::string CheckedProgram(const std::vector<std::string>& command) {
  if (command.empty()) return "";
  absl::string_view name = command[0];
  if (const size_t slash = name.rfind('/'); slash != absl::string_view::npos) {
    name.remove_prefix(slash + 1);
  }
  return name == "psflow-ps" || name == "psflow-worker" ? std::string(name) : "";
}

std::string CheckOutputLine(absl::string_view output, absl::string_view program) {
  const std::vector<absl::string_view> lines = absl::StrSplit(output, '\n', absl::SkipWhitespace());
  if (lines.empty()) return "";
  absl::string_view line = lines.back();
  for (absl::string_view l : lines) {
    if (absl::StartsWith(l, "ERROR: ")) {
      line = l;
      break;
    }
  }
  line = absl::StripAsciiWhitespace(line);
  absl::ConsumePrefix(&line, absl::StrCat(program, ": "));
  return std::string(line);
}

std::vector<std::string> ModelFileArgs(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  for (size_t i = 0; i < args.size(); ++i) {
    const api::FlagArgument flag = api::ParseFlagArgument(args[i]);
    if (flag.name != "model_file") continue;
    if (flag.value) {
      files.push_back(*flag.value);
    } else if (i + 1 < args.size()) {
      files.push_back(args[++i]);
    }
  }
  return files;
}

std::vector<ReplicaCheck> CheckReplicas(const api::TrainingJob& job,
                                        const ReplicaCheckOptions& options) {
  std::unique_ptr<TemporaryModelFile> model_file;
  if (!job.model_file.empty()) {
    absl::StatusOr<std::unique_ptr<TemporaryModelFile>> written =
        TemporaryModelFile::Write(options.temp_dir, job.model_file);
    if (!written.ok()) {
      std::vector<ReplicaCheck> none;
      for (const auto& [type, spec] : job.replica_specs) {
        if (spec.replicas == 0) continue;
        ReplicaCheck check;
        check.type = type;
        check.line = std::string(written.status().message());
        none.push_back(std::move(check));
      }
      return none;
    }
    model_file = *std::move(written);
  }
  // Every address in the cluster spec is the replica's name at its port: the checks read them,
  // nothing connects.
  const ClusterSpec cluster = api::BuildClusterSpec(job, [&job](api::ReplicaType t, int i) {
    return absl::StrCat(api::ReplicaName(job, t, i), ":", job.replica_specs.at(t).Port());
  });
  std::vector<ReplicaCheck> checks;
  for (const auto& [type, spec] : job.replica_specs) {
    if (spec.replicas == 0) continue;
    checks.push_back(
        CheckOne(job, type, cluster, model_file ? model_file->path() : std::string(), options));
  }
  return checks;
}

std::string FirstRefusal(const std::vector<ReplicaCheck>& checks) {
  for (const ReplicaCheck& c : checks) {
    if (c.result != ReplicaCheck::Result::kInvalid) continue;
    return absl::StrCat("spec.replicaSpecs.", api::ReplicaTypeName(c.type), ": ", c.program,
                        " refuses its args: ", c.line);
  }
  return "";
}

}  // namespace psflow::local
