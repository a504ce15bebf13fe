// The spec of a coordination.k8s.io/v1 Lease, as leader election reads and writes it:
//
//   spec:
//     holderIdentity: "operator-7d9f-abcde"    # "" or missing: nobody holds it
//     leaseDurationSeconds: 15
//     acquireTime: "2024-05-01T12:00:00.123456Z"   # MicroTime: RFC 3339, microseconds, UTC
//     renewTime: "2024-05-01T12:00:10.654321Z"
//     leaseTransitions: 3                       # times the holder changed
//
// Reading tolerates a malformed Lease (missing or mistyped fields read as empty/zero).
#ifndef PSFLOW_OPERATOR_CONTROLLER_LEASE_RECORD_H_
#define PSFLOW_OPERATOR_CONTROLLER_LEASE_RECORD_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace psflow::controller {

// What a replica last saw of a lease (LeaseRecord::FreeAt), and when by its own clock.
struct LeaseSighting {
  std::string holder_identity;
  std::optional<absl::Time> renew_time;
  absl::Time seen_at = absl::InfinitePast();
};

struct LeaseRecord {
  std::string holder_identity;
  int64_t lease_duration_seconds = 0;
  std::optional<absl::Time> acquire_time;
  std::optional<absl::Time> renew_time;
  int64_t lease_transitions = 0;

  // Nobody holds it, or its holder has not renewed it in time. A held lease without a readable
  // renewTime counts as expired: otherwise a corrupted lease would block every replica forever.
  // "In time" is timed by this replica's clock alone, as client-go does, so that replicas'
  // clocks need not agree: the lease is free once its holder and renewTime have stayed as
  // `seen` last saw them for more than leaseDurationSeconds since it first did (at
  // seen.seen_at). `seen` is set to this record, seen at `now`, when either changed.
  bool FreeAt(absl::Time now, LeaseSighting& seen) const;
};

// The record in `lease`'s spec.
LeaseRecord ReadLeaseRecord(const nlohmann::json& lease);
// Writes `record` into `lease`'s spec, leaving every other field as it is. Unset times are
// removed.
void WriteLeaseRecord(const LeaseRecord& record, nlohmann::json& lease);

// "2024-05-01T12:00:00.123456Z": Kubernetes' MicroTime, always UTC with six fractional digits.
std::string FormatMicroTime(absl::Time t);
// Any RFC 3339 time ("Z" or a numeric offset, any number of fractional digits).
// INVALID_ARGUMENT naming the text otherwise.
absl::StatusOr<absl::Time> ParseMicroTime(absl::string_view text);

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_LEASE_RECORD_H_
