#include "operator/controller/leader_election.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "operator/controller/lease_record.h"
#include "operator/kube/api_status.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"

namespace psflow::controller {
namespace {

int64_t Ms(std::chrono::milliseconds d) { return d.count(); }

}  // namespace

LeaderElector::LeaderElector(kube::KubeClient& client, LeaderElectionOptions options,
                             std::function<absl::Time()> now)
    : client_(client), options_(std::move(options)), now_(std::move(now)) {}

absl::Status LeaderElector::ValidateOptions(const LeaderElectionOptions& options) {
  if (options.ns.empty() || options.name.empty()) {
    return absl::InvalidArgumentError(
        "leader election: the lease's namespace and name must be set (--namespace, --lease_name)");
  }
  if (options.identity.empty()) {
    return absl::InvalidArgumentError(
        "leader election: the identity is empty; give each replica its own (its pod name)");
  }
  const bool ordered = options.lease_duration > options.renew_deadline &&
                       options.renew_deadline > options.retry_period &&
                       options.retry_period > std::chrono::milliseconds::zero();
  if (!ordered || options.lease_duration < std::chrono::seconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("leader election: need lease_duration (", Ms(options.lease_duration),
                     " ms) >= 1 s and > renew_deadline (", Ms(options.renew_deadline),
                     " ms) > retry_period (", Ms(options.retry_period), " ms) > 0"));
  }
  return absl::OkStatus();
}

std::string LeaderElector::LeaseKey() const { return kube::Key(options_.ns, options_.name); }

int64_t LeaderElector::LeaseDurationSeconds() const {
  return (options_.lease_duration.count() + 999) / 1000;
}

bool LeaderElector::IsLeader() const { return is_leader_.load(); }

absl::Status LeaderElector::TryAcquireOrRenew() {
  const absl::Time now = now_();
  absl::StatusOr<kube::Json> got = client_.Get(kube::Leases(), options_.ns, options_.name);
  if (absl::IsNotFound(got.status())) {
    LeaseRecord record;
    record.holder_identity = options_.identity;
    record.lease_duration_seconds = LeaseDurationSeconds();
    record.acquire_time = now;
    record.renew_time = now;
    kube::Json lease = {{"apiVersion", kube::Leases().ApiVersion()},
                        {"kind", kube::Leases().kind},
                        {"metadata", {{"name", options_.name}, {"namespace", options_.ns}}}};
    WriteLeaseRecord(record, lease);
    absl::StatusOr<kube::Json> created = client_.Create(kube::Leases(), options_.ns, lease);
    if (absl::IsAlreadyExists(created.status())) {
      return absl::AbortedError(
          absl::StrCat("lease ", LeaseKey(), ": another replica created it first"));
    }
    return created.status();
  }
  if (!got.ok()) return got.status();

  kube::Json lease = *std::move(got);
  LeaseRecord record = ReadLeaseRecord(lease);
  const bool ours = record.holder_identity == options_.identity;
  if (!ours && !record.FreeAt(now, seen_)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "lease ", LeaseKey(), " is held by ", record.holder_identity, " (renewed at ",
        record.renew_time.has_value() ? FormatMicroTime(*record.renew_time) : "?", ")"));
  }
  if (!ours) {
    record.holder_identity = options_.identity;
    record.acquire_time = now;
    ++record.lease_transitions;
  } else if (!record.acquire_time.has_value()) {
    record.acquire_time = now;
  }
  record.renew_time = now;
  record.lease_duration_seconds = LeaseDurationSeconds();
  WriteLeaseRecord(record, lease);
  // `lease` still carries the resourceVersion read above: a write by anyone since is a 409.
  return client_.Update(kube::Leases(), options_.ns, lease).status();
}

absl::Status LeaderElector::Release() {
  // A few tries: ABORTED here means the lease changed under us; read it again.
  absl::Status status;
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<kube::Json> got = client_.Get(kube::Leases(), options_.ns, options_.name);
    if (absl::IsNotFound(got.status())) return absl::OkStatus();
    if (!got.ok()) return got.status();
    kube::Json lease = *std::move(got);
    LeaseRecord record = ReadLeaseRecord(lease);
    if (record.holder_identity != options_.identity) return absl::OkStatus();
    const absl::Time now = now_();
    record.holder_identity.clear();
    record.lease_duration_seconds = 1;
    record.acquire_time = now;
    record.renew_time = now;
    WriteLeaseRecord(record, lease);
    status = client_.Update(kube::Leases(), options_.ns, lease).status();
    if (!kube::IsConflict(status)) return status;
  }
  return status;
}

absl::Status LeaderElector::Run(std::stop_token stop,
                                const std::function<void(std::stop_token)>& lead) {
  if (absl::Status valid = ValidateOptions(options_); !valid.ok()) return valid;

  std::mutex mu;
  std::condition_variable_any cv;
  bool lead_returned = false;  // guarded by mu
  // Sleeps retry_period; wakes early on `stop` or when lead returns.
  auto pause = [&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, stop, options_.retry_period, [&] { return lead_returned; });
  };

  bool told_waiting = false;
  bool told_error = false;
  absl::Time acquired = now_();  // before the call that acquired (see the renewals below)
  while (true) {
    if (stop.stop_requested()) return absl::OkStatus();
    acquired = now_();
    absl::Status status = TryAcquireOrRenew();
    if (status.ok()) break;
    if (status.code() == absl::StatusCode::kFailedPrecondition) {
      if (!told_waiting) PSFLOW_LOG(INFO) << status.message() << "; waiting for it";
      told_waiting = true;
      told_error = false;
    } else if (!kube::IsConflict(status)) {
      if (!told_error) {
        PSFLOW_LOG(WARNING) << "lease " << LeaseKey() << ": cannot acquire (retrying every "
                            << Ms(options_.retry_period) << " ms): " << status;
      }
      told_error = true;
    }
    pause();
  }

  if (stop.stop_requested()) {
    // Acquired just as we were told to stop: hand the lease straight back.
    if (absl::Status released = Release(); !released.ok()) {
      PSFLOW_LOG(WARNING) << "lease " << LeaseKey() << ": release failed: " << released;
    }
    return absl::OkStatus();
  }
  is_leader_ = true;
  PSFLOW_LOG(INFO) << "lease " << LeaseKey() << ": " << options_.identity << " became leader";
  std::jthread lead_thread([&](std::stop_token leading) {
    lead(leading);
    {
      std::lock_guard<std::mutex> lock(mu);
      lead_returned = true;
    }
    cv.notify_all();
  });

  const absl::Duration renew_deadline = absl::FromChrono(options_.renew_deadline);
  absl::Time last_renewal = acquired;  // guarded by mu
  bool overdue = false;                // guarded by mu: the watchdog stopped the work
  // The watchdog: a renewal call can hang far longer than renew_deadline (an API server that
  // stopped answering holds it for the request timeout, and more), so the deadline is watched
  // beside it. Once it passes, the work stops at once, whatever the call does later: another
  // replica may take the lease from lease_duration on.
  std::jthread watchdog([&](std::stop_token watching) {
    const auto poll =
        std::min<std::chrono::milliseconds>(options_.retry_period, std::chrono::milliseconds(500));
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, watching, poll, [&] { return lead_returned; })) {
      if (watching.stop_requested()) return;
      if (now_() - last_renewal < renew_deadline) continue;
      overdue = true;
      is_leader_ = false;
      PSFLOW_LOG(WARNING) << "lease " << LeaseKey() << ": not renewed for "
                          << Ms(options_.renew_deadline) << " ms: " << options_.identity
                          << " stops working now";
      lead_thread.request_stop();
      return;
    }
  });
  absl::Status failure;
  told_error = false;
  while (true) {
    pause();
    {
      std::lock_guard<std::mutex> lock(mu);
      if (overdue) {
        failure = absl::DeadlineExceededError(
            absl::StrCat("not renewed within ", Ms(options_.renew_deadline), " ms"));
        break;
      }
      if (lead_returned || stop.stop_requested()) break;
    }
    // Timed from before the call: the lease's renewTime is no later, and another replica times
    // its expiry from when it sees that renewTime, so the work never outlives the lease.
    const absl::Time attempt = now_();
    absl::Status status = TryAcquireOrRenew();
    {
      std::lock_guard<std::mutex> lock(mu);
      if (overdue) {  // the call came back after the watchdog had stopped the work
        failure =
            status.ok()
                ? absl::DeadlineExceededError(absl::StrCat(
                      "renewed only after the ", Ms(options_.renew_deadline), " ms renew deadline"))
                : status;
        break;
      }
      if (status.ok()) last_renewal = attempt;
    }
    if (status.ok()) {
      told_error = false;
      continue;
    }
    // Another holder means the lease expired in its eyes: stop working at once.
    const bool taken = status.code() == absl::StatusCode::kFailedPrecondition;
    if (taken || now_() - last_renewal >= renew_deadline) {
      failure = status;
      break;
    }
    if (!told_error) {
      PSFLOW_LOG(WARNING) << "lease " << LeaseKey() << ": renewal failed, retrying: " << status;
    }
    told_error = true;
  }

  watchdog.request_stop();
  watchdog.join();
  if (!failure.ok()) {
    is_leader_ = false;
    PSFLOW_LOG(WARNING) << "lease " << LeaseKey() << ": " << options_.identity
                        << " lost leadership: " << failure;
    lead_thread.request_stop();
    lead_thread.join();
    return absl::AbortedError(
        absl::StrCat("lost leadership of lease ", LeaseKey(), ": ", failure.ToString()));
  }
  // Stop working before letting anyone else start.
  lead_thread.request_stop();
  lead_thread.join();
  absl::Status released = Release();
  is_leader_ = false;
  if (released.ok()) {
    PSFLOW_LOG(INFO) << "lease " << LeaseKey() << ": " << options_.identity << " released it";
  } else {
    PSFLOW_LOG(WARNING) << "lease " << LeaseKey() << ": release failed (another replica takes "
                        << "over when it expires): " << released;
  }
  return absl::OkStatus();
}

}  // namespace psflow::controller
