// Flags shared by psflow-ps and psflow-worker, named as in the seed scripts, and the rule that
// turns them plus $TF_CONFIG into this process's ClusterSpec.
#ifndef PSFLOW_CORE_TASK_FLAGS_H_
#define PSFLOW_CORE_TASK_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "core/cluster_spec.h"
#include "core/transport_security.h"

ABSL_DECLARE_FLAG(bool, check_config);
ABSL_DECLARE_FLAG(std::string, job_name);
ABSL_DECLARE_FLAG(int, task_index);
ABSL_DECLARE_FLAG(std::string, ps_hosts);
ABSL_DECLARE_FLAG(std::string, worker_hosts);
ABSL_DECLARE_FLAG(int, metrics_port);
ABSL_DECLARE_FLAG(std::string, tls_ca);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);

namespace psflow {

// $TF_CONFIG when set, with any of --job_name/--task_index/--ps_hosts/--worker_hosts given on the
// command line overriding its fields; the flags alone when TF_CONFIG is unset. INVALID_ARGUMENT
// naming the problem when neither gives a valid spec. (TF_CONFIG must be valid on its own: the
// flags override a valid spec, they do not repair an invalid one.)
absl::StatusOr<ClusterSpec> ResolveClusterSpec();

// --metrics_port when >= 0, else $PSFLOW_METRICS_PORT, else -1 (no endpoint).
// INVALID_ARGUMENT when the port is above 65535 or the variable is not a port number.
absl::StatusOr<int> ResolveMetricsPort();

// The files --tls_ca, --tls_cert and --tls_key name, unread: all empty (plaintext) or all given.
// INVALID_ARGUMENT when only some are given.
absl::StatusOr<TlsFiles> TlsFilesGiven();

// Mutual TLS from the files --tls_ca, --tls_cert and --tls_key name (LoadTlsFiles checks them),
// plaintext when none is given. INVALID_ARGUMENT when only some are given, or for a bad file.
absl::StatusOr<TransportSecurity> ResolveTransportSecurity();

}  // namespace psflow

#endif  // PSFLOW_CORE_TASK_FLAGS_H_
