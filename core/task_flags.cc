#include "core/task_flags.h"

#include <cstdlib>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

ABSL_FLAG(bool, check_config, false,
          "Check the flags and the cluster spec as the task would at its start, print one line "
          "and exit: 0 when valid, 1 otherwise. Nothing starts; of the files the flags name only "
          "--model_file is read (`psflow validate` and `psflow run` run this for each replica "
          "type of a TrainingJob)");
ABSL_FLAG(std::string, job_name, "", "Task type: ps or worker (overrides TF_CONFIG task.type)");
ABSL_FLAG(int, task_index, -1, "Index of this task within its type (overrides TF_CONFIG)");
ABSL_FLAG(std::string, ps_hosts, "", "Comma-separated host:port of the ps tasks");
ABSL_FLAG(std::string, worker_hosts, "", "Comma-separated host:port of the worker tasks");
ABSL_FLAG(int, metrics_port, -1,
          "Port of the /metrics endpoint (0 = any free port; default $PSFLOW_METRICS_PORT, "
          "else none)");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM file of the CA that signs the job's certificates. With --tls_cert and --tls_key "
          "(all three or none): the ps serves only clients with a certificate the CA signed, and "
          "a worker talks only to a ps whose certificate the CA signed for the host it dials; "
          "none: plaintext");
ABSL_FLAG(std::string, tls_cert, "", "PEM file of this replica's certificate (see --tls_ca)");
ABSL_FLAG(std::string, tls_key, "", "PEM file of this replica's private key (see --tls_ca)");

namespace psflow {
absl::StatusOr<ClusterSpec> ResolveClusterSpec() {
  ClusterSpec spec;
  const char* tf_config = std::getenv("TF_CONFIG");
  const bool have_tf_config = tf_config != nullptr && *tf_config != '\0';
  if (have_tf_config) {
    ASSIGN_OR_RETURN(spec, ParseTfConfig(tf_config));
  } else if (absl::GetFlag(FLAGS_job_name).empty()) {
    return absl::InvalidArgumentError(
        "no cluster spec: set TF_CONFIG or pass --job_name, --task_index, --ps_hosts and "
        "--worker_hosts");
  }
  if (!absl::GetFlag(FLAGS_ps_hosts).empty()) {
    spec.cluster["ps"] = SplitHostList(absl::GetFlag(FLAGS_ps_hosts));
  }
  if (!absl::GetFlag(FLAGS_worker_hosts).empty()) {
    spec.cluster["worker"] = SplitHostList(absl::GetFlag(FLAGS_worker_hosts));
  }
  if (!absl::GetFlag(FLAGS_job_name).empty()) spec.task.type = absl::GetFlag(FLAGS_job_name);
  if (absl::GetFlag(FLAGS_task_index) >= 0) {
    spec.task.index = absl::GetFlag(FLAGS_task_index);
  } else if (!have_tf_config) {
    return absl::InvalidArgumentError("--task_index is required when TF_CONFIG is unset");
  }
  RETURN_IF_ERROR(ValidateClusterSpec(spec));
  return spec;
}

absl::StatusOr<int> ResolveMetricsPort() {
  int port = absl::GetFlag(FLAGS_metrics_port);
  if (port < 0) {
    const char* env = std::getenv("PSFLOW_METRICS_PORT");
    if (env == nullptr || *env == '\0') return -1;
    if (!absl::SimpleAtoi(env, &port) || port < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("PSFLOW_METRICS_PORT=\"", env, "\" is not a port number"));
    }
  }
  if (port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics port ", port, " is above 65535"));
  }
  return port;
}

absl::StatusOr<TlsFiles> TlsFilesGiven() {
  TlsFiles files{.ca = absl::GetFlag(FLAGS_tls_ca),
                 .certificate = absl::GetFlag(FLAGS_tls_cert),
                 .private_key = absl::GetFlag(FLAGS_tls_key)};
  const int given = !files.ca.empty() + !files.certificate.empty() + !files.private_key.empty();
  if (given != 0 && given < 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_ca, --tls_cert and --tls_key go together (all three or none); missing:",
        files.ca.empty() ? " --tls_ca" : "", files.certificate.empty() ? " --tls_cert" : "",
        files.private_key.empty() ? " --tls_key" : ""));
  }
  return files;
}

absl::StatusOr<TransportSecurity> ResolveTransportSecurity() {
  ASSIGN_OR_RETURN(const TlsFiles files, TlsFilesGiven());
  if (files.ca.empty()) return TransportSecurity();
  return LoadTlsFiles(files);
}

}  // namespace psflow
