#include "operator/controller/lease_record.h"

#include "absl/strings/str_cat.h"

namespace psflow::controller {
namespace {

const nlohmann::json* SpecField(const nlohmann::json& lease, const char* field) {
  if (!lease.is_object()) return nullptr;
  auto spec = lease.find("spec");
  if (spec == lease.end() || !spec->is_object()) return nullptr;
  auto it = spec->find(field);
  return it == spec->end() ? nullptr : &*it;
}

int64_t SpecInt(const nlohmann::json& lease, const char* field) {
  const nlohmann::json* value = SpecField(lease, field);
  return value != nullptr && value->is_number_integer() ? value->get<int64_t>() : 0;
}

std::optional<absl::Time> SpecTime(const nlohmann::json& lease, const char* field) {
  const nlohmann::json* value = SpecField(lease, field);
  if (value == nullptr || !value->is_string()) return std::nullopt;
  absl::StatusOr<absl::Time> t = ParseMicroTime(value->get_ref<const std::string&>());
  if (!t.ok()) return std::nullopt;
  return *t;
}

}  // namespace

bool LeaseRecord::FreeAt(absl::Time now, LeaseSighting& seen) const {
  if (holder_identity.empty()) return true;
  if (!renew_time.has_value()) return true;
  if (seen.holder_identity != holder_identity || seen.renew_time != renew_time) {
    seen = {holder_identity, renew_time, now};
  }
  return seen.seen_at + absl::Seconds(lease_duration_seconds) < now;
}

LeaseRecord ReadLeaseRecord(const nlohmann::json& lease) {
  LeaseRecord record;
  const nlohmann::json* holder = SpecField(lease, "holderIdentity");
  if (holder != nullptr && holder->is_string()) record.holder_identity = holder->get<std::string>();
  record.lease_duration_seconds = SpecInt(lease, "leaseDurationSeconds");
  record.acquire_time = SpecTime(lease, "acquireTime");
  record.renew_time = SpecTime(lease, "renewTime");
  record.lease_transitions = SpecInt(lease, "leaseTransitions");
  return record;
}

void WriteLeaseRecord(const LeaseRecord& record, nlohmann::json& lease) {
  if (!lease.is_object()) lease = nlohmann::json::object();
  nlohmann::json& spec = lease["spec"];
  if (!spec.is_object()) spec = nlohmann::json::object();
  spec["holderIdentity"] = record.holder_identity;
  spec["leaseDurationSeconds"] = record.lease_duration_seconds;
  spec["leaseTransitions"] = record.lease_transitions;
  const std::pair<const char*, const std::optional<absl::Time>*> times[] = {
      {"acquireTime", &record.acquire_time}, {"renewTime", &record.renew_time}};
  for (const auto& [field, t] : times) {
    if (t->has_value()) {
      spec[field] = FormatMicroTime(**t);
    } else {
      spec.erase(field);
    }
  }
}

std::string FormatMicroTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%E6SZ", t, absl::UTCTimeZone());
}

absl::StatusOr<absl::Time> ParseMicroTime(absl::string_view text) {
  absl::Time t;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, text, &t, &error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("time \"", text, "\" is not RFC 3339 (", error, ")"));
  }
  return t;
}

}  // namespace psflow::controller
