// libFuzzer target: arbitrary bytes as a TrainingJob manifest, parsed as `psflow validate` and
// `psflow run` parse it (api::ParseTrainingJob). Any input must end in a job or an
// INVALID_ARGUMENT, never a crash or an exception. A job it accepts must keep the API's promises
// (replica counts within MaxReplicas, a Worker or a Chief, a container per replica spec, a port
// in 1..65535), so that the cluster spec built from it is one TF_CONFIG accepts and round-trips.
#include <cstddef>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "core/cluster_spec.h"
#include "operator/api/cluster_spec_builder.h"
#include "operator/api/training_job.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psflow;
  const absl::StatusOr<api::TrainingJob> job =
      api::ParseTrainingJob(fuzz::AsText(data, size), "fuzz.yaml");
  fuzz::RecordOutcome(job.ok());
  if (!job.ok()) {
    PSFLOW_FUZZ_CHECK(job.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  PSFLOW_FUZZ_CHECK(!job->name.empty());
  PSFLOW_FUZZ_CHECK(
      job->Replicas(api::ReplicaType::kWorker) + job->Replicas(api::ReplicaType::kChief) > 0);
  for (const auto& [type, spec] : job->replica_specs) {
    PSFLOW_FUZZ_CHECK(spec.replicas >= 0 && spec.replicas <= api::MaxReplicas(type));
    PSFLOW_FUZZ_CHECK(!spec.containers.empty());
    PSFLOW_FUZZ_CHECK(spec.Port() >= 1 && spec.Port() <= 65535);
  }
  const ClusterSpec cluster = api::BuildClusterSpec(*job, [&job](api::ReplicaType type, int index) {
    return absl::StrCat("host-", api::TaskTypeName(type), "-", index, ":",
                        job->replica_specs.at(type).Port());
  });
  const api::ReplicaType first = job->Replicas(api::ReplicaType::kChief) > 0
                                     ? api::ReplicaType::kChief
                                     : api::ReplicaType::kWorker;
  const ClusterSpec own = api::ForTask(cluster, first, 0);
  PSFLOW_FUZZ_CHECK(ValidateClusterSpec(own).ok());
  PSFLOW_FUZZ_CHECK(own.IsChief());
  const absl::StatusOr<ClusterSpec> parsed = ParseTfConfig(ToTfConfig(own));
  PSFLOW_FUZZ_CHECK(parsed.ok() && *parsed == own);
  return 0;
}
