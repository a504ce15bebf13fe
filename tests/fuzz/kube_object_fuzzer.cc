// libFuzzer target: arbitrary bytes as an object the Kubernetes API server sends the operator,
// read by everything in operator/kube and operator/controller that reads one: the metadata
// accessors (object_meta.h), a pod's state (pod_state.h), a Lease's record (lease_record.h), a
// TrainingJob's status (job_status.h) and spec (parsed as the reconciler parses it: the object
// dumped and read by api::ParseTrainingJob), and an error answer's body (api_status.h). The
// client only hands on JSON objects (rest_client.cc ParseObject): that is the "accepted" verdict.
// Every reader must tolerate any object; what is written back must read back the same.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "operator/api/training_job.h"
#include "operator/controller/checkpoint_life.h"
#include "operator/controller/job_status.h"
#include "operator/controller/lease_record.h"
#include "operator/controller/pod_state.h"
#include "operator/kube/api_status.h"
#include "operator/kube/object_meta.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using nlohmann::json;
using namespace psflow;

void ReadMeta(const json& object) {
  (void)kube::Key(object);
  (void)kube::Uid(object);
  (void)kube::ResourceVersion(object);
  (void)kube::Generation(object);
  (void)kube::BeingDeleted(object);
  (void)kube::Label(object, "psflow.io/replica-type");
  (void)kube::ControllerUid(object);
  (void)kube::StringAt(object, "metadata", "creationTimestamp");
}

void ReadPod(const json& object) {
  const controller::PodState pod = controller::ReadPodState(object);
  (void)pod.Active();
  (void)pod.DescribeEnd();
  // The main container's restarts are among the pod's.
  PSFLOW_FUZZ_CHECK(pod.main_restarts >= 0 && pod.main_restarts <= pod.restarts);
  const controller::PsCheckpoints checkpoints = controller::ReadPsCheckpoints(object);
  PSFLOW_FUZZ_CHECK(!checkpoints.where.empty());
}

// A record written into a Lease reads back as written (times to the microsecond: once written,
// a record is stable).
void ReadLease(const json& object) {
  const controller::LeaseRecord first = controller::ReadLeaseRecord(object);
  controller::LeaseSighting seen;
  (void)first.FreeAt(absl::FromUnixSeconds(1'700'000'000), seen);
  (void)first.FreeAt(absl::FromUnixSeconds(1'700'000'016), seen);
  json lease = object;
  controller::WriteLeaseRecord(first, lease);
  const controller::LeaseRecord second = controller::ReadLeaseRecord(lease);
  PSFLOW_FUZZ_CHECK(second.holder_identity == first.holder_identity);
  PSFLOW_FUZZ_CHECK(second.lease_duration_seconds == first.lease_duration_seconds);
  PSFLOW_FUZZ_CHECK(second.lease_transitions == first.lease_transitions);
  PSFLOW_FUZZ_CHECK(second.acquire_time.has_value() == first.acquire_time.has_value());
  PSFLOW_FUZZ_CHECK(second.renew_time.has_value() == first.renew_time.has_value());
  controller::WriteLeaseRecord(second, lease);
  const controller::LeaseRecord third = controller::ReadLeaseRecord(lease);
  PSFLOW_FUZZ_CHECK(third.acquire_time == second.acquire_time);
  PSFLOW_FUZZ_CHECK(third.renew_time == second.renew_time);
}

// A status the operator writes back reads back the same (throughput is stored rounded).
void ReadJobStatus(const json& object) {
  const auto status = object.find("status");
  controller::JobStatus first =
      controller::JobStatus::FromJson(status != object.end() ? *status : json());
  (void)first.State();
  (void)first.Finished();
  for (const auto& [type, replica] : first.replica_statuses) (void)replica.ReplacedRestarts();
  controller::JobStatus second = controller::JobStatus::FromJson(first.ToJson());
  PSFLOW_FUZZ_CHECK(second.words_per_second.has_value() == first.words_per_second.has_value());
  PSFLOW_FUZZ_CHECK(second.examples_per_second.has_value() ==
                    first.examples_per_second.has_value());
  first.words_per_second = second.words_per_second;
  first.examples_per_second = second.examples_per_second;
  PSFLOW_FUZZ_CHECK(second == first);
}

// The reconciler's reading of the spec (operator/controller/reconciler.cc ReconcileActive).
void ReadJobSpec(const json& object) {
  json manifest = object;
  manifest["apiVersion"] = api::kApiVersion;
  manifest["kind"] = api::kKind;
  if (manifest["metadata"].is_object()) manifest["metadata"]["namespace"] = "fuzz";
  const absl::StatusOr<api::TrainingJob> job =
      api::ParseTrainingJob(manifest.dump(), "TrainingJob fuzz/job");
  PSFLOW_FUZZ_CHECK(job.ok() || job.status().code() == absl::StatusCode::kInvalidArgument);
}

// An error answer: its code follows the HTTP code whatever the body says.
void ReadErrorAnswer(absl::string_view body) {
  PSFLOW_FUZZ_CHECK(kube::StatusFromHttp(404, body, "GET /x").code() ==
                    absl::StatusCode::kNotFound);
  PSFLOW_FUZZ_CHECK(kube::StatusFromHttp(410, body, "GET /x").code() ==
                    absl::StatusCode::kOutOfRange);
  PSFLOW_FUZZ_CHECK(kube::StatusFromHttp(503, body, "GET /x").code() ==
                    absl::StatusCode::kUnavailable);
  const absl::StatusCode conflict = kube::StatusFromHttp(409, body, "PUT /x").code();
  PSFLOW_FUZZ_CHECK(conflict == absl::StatusCode::kAborted ||
                    conflict == absl::StatusCode::kAlreadyExists);
  PSFLOW_FUZZ_CHECK(kube::StatusFromHttp(200, body, "GET /x").ok());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text = fuzz::AsText(data, size);
  ReadErrorAnswer(text);
  const json object = json::parse(text, nullptr, /*allow_exceptions=*/false);
  fuzz::RecordOutcome(object.is_object());
  if (!object.is_object()) return 0;
  ReadMeta(object);
  ReadPod(object);
  ReadLease(object);
  ReadJobStatus(object);
  ReadJobSpec(object);
  return 0;
}
