#include "operator/controller/leader_election.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "operator/controller/lease_record.h"
#include "operator/kube/object_meta.h"

namespace psflow::controller {
namespace {

using kube::Json;
using std::chrono::milliseconds;

// How long a test waits for a replica to reach a state before failing (never reached when the
// code is right; not a timing assertion).
constexpr auto kFailsafe = std::chrono::seconds(60);

bool Eventually(const std::function<bool()>& condition) {
  const auto give_up = std::chrono::steady_clock::now() + kFailsafe;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

// Leases kept as the API server keeps them: every write bumps the resourceVersion; a write
// carrying a stale one is refused with ABORTED (409 Conflict).
class LeaseServer {
 public:
  absl::StatusOr<Json> Get(absl::string_view ns, absl::string_view name) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = leases_.find(kube::Key(std::string(ns), std::string(name)));
    if (it == leases_.end()) return absl::NotFoundError(absl::StrCat("lease ", name));
    return it->second;
  }
  absl::StatusOr<Json> Create(absl::string_view ns, Json lease) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string key = kube::Key(std::string(ns), kube::Name(lease));
    if (leases_.count(key) != 0) return absl::AlreadyExistsError(key);
    lease["metadata"]["resourceVersion"] = std::to_string(++version_);
    leases_[key] = lease;
    return lease;
  }
  absl::StatusOr<Json> Update(absl::string_view ns, Json lease) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string key = kube::Key(std::string(ns), kube::Name(lease));
    auto it = leases_.find(key);
    if (it == leases_.end()) return absl::NotFoundError(key);
    const std::string version = kube::ResourceVersion(lease);
    if (!version.empty() && version != kube::ResourceVersion(it->second)) {
      return absl::AbortedError(absl::StrCat(key, ": the object has been modified"));
    }
    lease["metadata"]["resourceVersion"] = std::to_string(++version_);
    it->second = lease;
    return lease;
  }
  // The stored lease's record (empty when there is none).
  LeaseRecord Record(const std::string& name = "psflow-operator") const {
    absl::StatusOr<Json> lease = Get("ops", name);
    return lease.ok() ? ReadLeaseRecord(*lease) : LeaseRecord();
  }
  // Stores `lease` as if another replica had written it.
  void Put(Json lease) {
    std::lock_guard<std::mutex> lock(mu_);
    lease["metadata"]["resourceVersion"] = std::to_string(++version_);
    leases_[kube::Key(lease)] = lease;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, Json> leases_;  // guarded by mu_
  int64_t version_ = 0;                 // guarded by mu_
};

// One replica's connection to the LeaseServer. Faults: writes can be made to fail (the replica
// is cut off from the API server), and a hook can run just before the next write (another
// replica writes first).
class ReplicaClient : public kube::KubeClient {
 public:
  explicit ReplicaClient(LeaseServer& server) : server_(server) {}

  void set_fail_writes(bool fail) { fail_writes_ = fail; }
  void BeforeNextWrite(std::function<void()> hook) {
    std::lock_guard<std::mutex> lock(mu_);
    before_next_write_ = std::move(hook);
  }
  int gets() const { return gets_; }
  int failed_writes() const { return failed_writes_; }

  absl::StatusOr<Json> Get(const kube::Resource& resource, absl::string_view ns,
                           absl::string_view name) override {
    EXPECT_EQ(resource.plural, "leases");
    ++gets_;
    return server_.Get(ns, name);
  }
  absl::StatusOr<Json> Create(const kube::Resource& resource, absl::string_view ns,
                              const Json& object) override {
    EXPECT_EQ(resource.plural, "leases");
    if (absl::Status status = BeforeWrite(); !status.ok()) return status;
    return server_.Create(ns, object);
  }
  absl::StatusOr<Json> Update(const kube::Resource& resource, absl::string_view ns,
                              const Json& object) override {
    EXPECT_EQ(resource.plural, "leases");
    if (absl::Status status = BeforeWrite(); !status.ok()) return status;
    return server_.Update(ns, object);
  }
  absl::StatusOr<kube::ObjectList> List(const kube::Resource&, absl::string_view,
                                        const kube::ListOptions&) override {
    return absl::UnimplementedError("leader election only gets, creates and updates");
  }
  absl::Status Watch(const kube::Resource&, absl::string_view, const kube::ListOptions&,
                     std::stop_token,
                     const std::function<void(const kube::WatchEvent&)>&) override {
    return absl::UnimplementedError("leader election only gets, creates and updates");
  }
  absl::StatusOr<Json> UpdateStatus(const kube::Resource&, absl::string_view,
                                    const Json&) override {
    return absl::UnimplementedError("leader election only gets, creates and updates");
  }
  absl::Status Delete(const kube::Resource&, absl::string_view, absl::string_view,
                      const kube::DeleteOptions&) override {
    return absl::UnimplementedError("leader election only gets, creates and updates");
  }

 private:
  absl::Status BeforeWrite() {
    std::function<void()> hook;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hook = std::move(before_next_write_);
      before_next_write_ = nullptr;
    }
    if (hook) hook();
    if (fail_writes_) {
      ++failed_writes_;
      return absl::UnavailableError("connection refused");
    }
    return absl::OkStatus();
  }

  LeaseServer& server_;
  std::atomic<bool> fail_writes_{false};
  std::atomic<int> gets_{0};
  std::atomic<int> failed_writes_{0};
  std::mutex mu_;
  std::function<void()> before_next_write_;  // guarded by mu_
};

// A clock that moves only when the test says so.
class FakeTime {
 public:
  absl::Time Now() const {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += d;
  }
  std::function<absl::Time()> AsFunction() const {
    return [this] { return Now(); };
  }

 private:
  mutable std::mutex mu_;
  absl::Time now_ = absl::FromUnixSeconds(1714564800);  // guarded by mu_
};

LeaderElectionOptions Options(const std::string& identity) {
  LeaderElectionOptions options;
  options.ns = "ops";
  options.identity = identity;
  options.retry_period = milliseconds(1);  // real sleeps; lease times follow the FakeTime
  return options;
}

Json LeaseHeldBy(const std::string& holder, absl::Time renewed) {
  Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"namespace", "ops"}, {"name", "psflow-operator"}}}};
  LeaseRecord record;
  record.holder_identity = holder;
  record.lease_duration_seconds = 15;
  record.acquire_time = renewed;
  record.renew_time = renewed;
  record.lease_transitions = 2;
  WriteLeaseRecord(record, lease);
  return lease;
}

TEST(LeaderElector, CreatesTheLeaseWhenThereIsNone) {
  LeaseServer server;
  ReplicaClient client(server);
  FakeTime time;
  LeaderElector elector(client, Options("op-a"), time.AsFunction());
  ASSERT_TRUE(elector.TryAcquireOrRenew().ok());

  absl::StatusOr<Json> lease = server.Get("ops", "psflow-operator");
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ((*lease)["apiVersion"], "coordination.k8s.io/v1");
  EXPECT_EQ((*lease)["kind"], "Lease");
  EXPECT_EQ((*lease)["metadata"]["namespace"], "ops");
  EXPECT_EQ((*lease)["spec"], (Json{{"holderIdentity", "op-a"},
                                    {"leaseDurationSeconds", 15},
                                    {"acquireTime", "2024-05-01T12:00:00.000000Z"},
                                    {"renewTime", "2024-05-01T12:00:00.000000Z"},
                                    {"leaseTransitions", 0}}));
  EXPECT_FALSE(elector.IsLeader());  // only Run leads
}

TEST(LeaderElector, RenewingMovesOnlyTheRenewTime) {
  LeaseServer server;
  ReplicaClient client(server);
  FakeTime time;
  LeaderElector elector(client, Options("op-a"), time.AsFunction());
  ASSERT_TRUE(elector.TryAcquireOrRenew().ok());
  time.Advance(absl::Microseconds(2500001));
  ASSERT_TRUE(elector.TryAcquireOrRenew().ok());

  const LeaseRecord record = server.Record();
  EXPECT_EQ(record.holder_identity, "op-a");
  EXPECT_EQ(record.acquire_time, absl::FromUnixSeconds(1714564800));
  EXPECT_EQ(FormatMicroTime(*record.renew_time), "2024-05-01T12:00:02.500001Z");
  EXPECT_EQ(record.lease_transitions, 0);
}

TEST(LeaderElector, ALeaseHeldByAnotherIsTakenOnlyOnceExpiredAndCountsATransition) {
  LeaseServer server;
  FakeTime time;
  server.Put(LeaseHeldBy("op-b", time.Now()));
  ReplicaClient client(server);
  LeaderElector elector(client, Options("op-a"), time.AsFunction());

  EXPECT_EQ(elector.TryAcquireOrRenew().code(), absl::StatusCode::kFailedPrecondition);
  time.Advance(absl::Seconds(15));  // renewTime + 15 s: not yet expired
  absl::Status held = elector.TryAcquireOrRenew();
  EXPECT_EQ(held.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(held.message().find("held by op-b"), absl::string_view::npos) << held;
  EXPECT_EQ(server.Record().holder_identity, "op-b");

  time.Advance(absl::Microseconds(1));
  ASSERT_TRUE(elector.TryAcquireOrRenew().ok());
  const LeaseRecord record = server.Record();
  EXPECT_EQ(record.holder_identity, "op-a");
  EXPECT_EQ(record.acquire_time, time.Now());
  EXPECT_EQ(record.renew_time, time.Now());
  EXPECT_EQ(record.lease_transitions, 3);
}

TEST(LeaderElector, AWriteAfterAnotherReplicasWriteLosesTheRace) {
  LeaseServer server;
  FakeTime time;
  server.Put(LeaseHeldBy("", time.Now()));  // free
  ReplicaClient client(server);
  // op-c takes the lease between op-a's read and op-a's write.
  client.BeforeNextWrite([&] { server.Put(LeaseHeldBy("op-c", time.Now())); });
  LeaderElector elector(client, Options("op-a"), time.AsFunction());

  EXPECT_EQ(elector.TryAcquireOrRenew().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(server.Record().holder_identity, "op-c");
  EXPECT_EQ(elector.TryAcquireOrRenew().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(LeaderElector, LosingTheRaceToCreateTheLeaseIsAborted) {
  LeaseServer server;
  FakeTime time;
  ReplicaClient client(server);
  client.BeforeNextWrite([&] { server.Put(LeaseHeldBy("op-c", time.Now())); });
  LeaderElector elector(client, Options("op-a"), time.AsFunction());

  EXPECT_EQ(elector.TryAcquireOrRenew().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(server.Record().holder_identity, "op-c");
}

TEST(LeaderElector, ReleaseLetsAnotherReplicaTakeOverAtOnce) {
  LeaseServer server;
  FakeTime time;
  ReplicaClient client_a(server);
  ReplicaClient client_b(server);
  LeaderElector a(client_a, Options("op-a"), time.AsFunction());
  LeaderElector b(client_b, Options("op-b"), time.AsFunction());
  ASSERT_TRUE(a.TryAcquireOrRenew().ok());
  EXPECT_EQ(b.TryAcquireOrRenew().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(b.Release().ok());  // not b's: nothing happens
  EXPECT_EQ(server.Record().holder_identity, "op-a");

  time.Advance(absl::Seconds(1));
  ASSERT_TRUE(a.Release().ok());
  LeaseRecord released = server.Record();
  EXPECT_EQ(released.holder_identity, "");
  EXPECT_EQ(released.lease_duration_seconds, 1);
  EXPECT_EQ(released.renew_time, time.Now());
  EXPECT_EQ(released.lease_transitions, 0);

  ASSERT_TRUE(b.TryAcquireOrRenew().ok());
  EXPECT_EQ(server.Record().holder_identity, "op-b");
  EXPECT_EQ(server.Record().lease_duration_seconds, 15);
  EXPECT_EQ(server.Record().lease_transitions, 1);
}

TEST(LeaderElector, ACorruptedLeaseIsTakenOver) {
  LeaseServer server;
  FakeTime time;
  Json lease = LeaseHeldBy("op-b", time.Now());
  lease["spec"]["renewTime"] = "not a time";
  lease["spec"]["leaseTransitions"] = "many";
  server.Put(lease);
  ReplicaClient client(server);
  LeaderElector elector(client, Options("op-a"), time.AsFunction());
  ASSERT_TRUE(elector.TryAcquireOrRenew().ok());
  EXPECT_EQ(server.Record().holder_identity, "op-a");
  EXPECT_EQ(server.Record().lease_transitions, 1);
}

TEST(LeaderElector, OptionsThatCannotWorkAreRejected) {
  auto code = [](const std::function<void(LeaderElectionOptions&)>& change) {
    LeaderElectionOptions options = Options("op-a");
    change(options);
    return LeaderElector::ValidateOptions(options).code();
  };
  EXPECT_EQ(code([](LeaderElectionOptions&) {}), absl::StatusCode::kOk);
  EXPECT_EQ(code([](LeaderElectionOptions& o) { o.identity = ""; }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](LeaderElectionOptions& o) { o.ns = ""; }), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](LeaderElectionOptions& o) { o.renew_deadline = o.lease_duration; }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](LeaderElectionOptions& o) { o.retry_period = o.renew_deadline; }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](LeaderElectionOptions& o) { o.retry_period = milliseconds(0); }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](LeaderElectionOptions& o) {
              o.lease_duration = milliseconds(900);
              o.renew_deadline = milliseconds(500);
            }),
            absl::StatusCode::kInvalidArgument);

  LeaseServer server;
  ReplicaClient client(server);
  LeaderElectionOptions options = Options("");
  LeaderElector elector(client, options);
  bool led = false;
  absl::Status status = elector.Run(std::stop_token(), [&](std::stop_token) { led = true; });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("identity"), absl::string_view::npos) << status;
  EXPECT_FALSE(led);
  EXPECT_EQ(client.gets(), 0);
}

// A lead function that works until told to stop, noting who held the lease when it was told.
class LeadProbe {
 public:
  explicit LeadProbe(const LeaseServer& server) : server_(server) {}

  std::function<void(std::stop_token)> Lead() {
    return [this](std::stop_token leading) {
      std::unique_lock<std::mutex> lock(mu_);
      started_ = true;
      cv_.wait(lock, leading, [] { return false; });
      holder_when_stopped_ = server_.Record().holder_identity;
      returned_ = true;
    };
  }
  bool started() const {
    std::lock_guard<std::mutex> lock(mu_);
    return started_;
  }
  bool returned() const {
    std::lock_guard<std::mutex> lock(mu_);
    return returned_;
  }
  std::string holder_when_stopped() const {
    std::lock_guard<std::mutex> lock(mu_);
    return holder_when_stopped_;
  }

 private:
  const LeaseServer& server_;
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  bool started_ = false;             // guarded by mu_
  bool returned_ = false;            // guarded by mu_
  std::string holder_when_stopped_;  // guarded by mu_
};

// Runs an elector's Run on its own thread.
class Replica {
 public:
  Replica(LeaseServer& server, const std::string& identity, const FakeTime& time)
      : client_(server), elector_(client_, Options(identity), time.AsFunction()), probe_(server) {}
  ~Replica() { Stop().IgnoreError(); }

  void Start() {
    thread_ = std::thread([this] { status_ = elector_.Run(stop_.get_token(), probe_.Lead()); });
  }
  // Requests the stop and waits for Run to return.
  absl::Status Stop() {
    stop_.request_stop();
    return Join();
  }
  // Waits for Run to return on its own.
  absl::Status Join() {
    if (thread_.joinable()) thread_.join();
    return status_;
  }

  ReplicaClient& client() { return client_; }
  LeaderElector& elector() { return elector_; }
  const LeadProbe& probe() const { return probe_; }

 private:
  ReplicaClient client_;
  LeaderElector elector_;
  LeadProbe probe_;
  std::stop_source stop_;
  std::thread thread_;
  absl::Status status_;  // written by thread_, read after joining it
};

TEST(LeaderElector, OneOfTwoLeadsAndTheOtherTakesOverWhenTheLeaderStops) {
  LeaseServer server;
  FakeTime time;  // never moves: only a release can free the lease
  Replica a(server, "op-a", time);
  Replica b(server, "op-b", time);
  a.Start();
  ASSERT_TRUE(Eventually([&] { return a.probe().started(); }));
  EXPECT_TRUE(a.elector().IsLeader());

  b.Start();
  const int b_gets = b.client().gets();
  ASSERT_TRUE(Eventually([&] { return b.client().gets() >= b_gets + 3; }));
  EXPECT_FALSE(b.elector().IsLeader());
  EXPECT_FALSE(b.probe().started());
  EXPECT_FALSE(a.probe().returned());

  EXPECT_TRUE(a.Stop().ok());
  EXPECT_TRUE(a.probe().returned());
  EXPECT_EQ(a.probe().holder_when_stopped(), "op-a");  // work stopped before the release
  EXPECT_FALSE(a.elector().IsLeader());

  ASSERT_TRUE(Eventually([&] { return b.probe().started(); }));
  EXPECT_TRUE(b.elector().IsLeader());
  EXPECT_EQ(server.Record().holder_identity, "op-b");
  EXPECT_EQ(server.Record().lease_transitions, 1);

  EXPECT_TRUE(b.Stop().ok());
  EXPECT_EQ(server.Record().holder_identity, "");
  EXPECT_EQ(server.Record().lease_transitions, 1);
}

TEST(LeaderElector, TheOtherTakesOverWhenTheLeaderCannotRenew) {
  LeaseServer server;
  FakeTime time;
  Replica a(server, "op-a", time);
  Replica b(server, "op-b", time);
  a.Start();
  ASSERT_TRUE(Eventually([&] { return a.probe().started(); }));

  // Cut off from the API server, the leader keeps leading until renew_deadline has passed.
  a.client().set_fail_writes(true);
  ASSERT_TRUE(Eventually([&] { return a.client().failed_writes() >= 3; }));
  time.Advance(absl::Seconds(9));
  const int failed = a.client().failed_writes();
  ASSERT_TRUE(Eventually([&] { return a.client().failed_writes() >= failed + 3; }));
  EXPECT_TRUE(a.elector().IsLeader());
  EXPECT_FALSE(a.probe().returned());

  b.Start();
  const int b_gets = b.client().gets();
  ASSERT_TRUE(Eventually([&] { return b.client().gets() >= b_gets + 3; }));
  EXPECT_FALSE(b.probe().started());  // the lease has not expired

  time.Advance(absl::Seconds(7));  // 16 s since the last renewal: past renew_deadline and expiry
  absl::Status lost = a.Join();
  EXPECT_EQ(lost.code(), absl::StatusCode::kAborted);
  EXPECT_NE(lost.message().find("lost leadership"), absl::string_view::npos) << lost;
  EXPECT_TRUE(a.probe().returned());
  EXPECT_FALSE(a.elector().IsLeader());

  // b first saw the lease 9 s after its last renewal: by b's clock it expires 15 s after that.
  const int gets = b.client().gets();
  ASSERT_TRUE(Eventually([&] { return b.client().gets() >= gets + 3; }));
  EXPECT_FALSE(b.probe().started());
  time.Advance(absl::Seconds(8) + absl::Milliseconds(1));  // 24.001 s: 15.001 s since b saw it
  ASSERT_TRUE(Eventually([&] { return b.probe().started(); }));
  EXPECT_TRUE(b.elector().IsLeader());
  EXPECT_EQ(server.Record().holder_identity, "op-b");
  EXPECT_EQ(server.Record().lease_transitions, 1);
  EXPECT_TRUE(b.Stop().ok());
}

// A renewal that hangs (an API server that stopped answering holds a call for its whole request
// timeout) does not keep the leader working past renew_deadline: the work stops while the call
// still hangs, and Run returns ABORTED once it comes back, even successful.
TEST(LeaderElector, ALeaderWhoseRenewalHangsStopsWorkingAtTheRenewDeadline) {
  LeaseServer server;
  FakeTime time;
  Replica a(server, "op-a", time);
  a.Start();
  ASSERT_TRUE(Eventually([&] { return a.probe().started(); }));
  std::mutex mu;
  std::condition_variable cv;
  bool hanging = false;  // guarded by mu
  bool release = false;  // guarded by mu
  a.client().BeforeNextWrite([&] {
    std::unique_lock<std::mutex> lock(mu);
    hanging = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kFailsafe, [&] { return hanging; }));
  }
  time.Advance(absl::Seconds(9));
  std::this_thread::sleep_for(milliseconds(20));  // the watchdog polls every millisecond here
  EXPECT_TRUE(a.elector().IsLeader());
  EXPECT_FALSE(a.probe().returned());
  time.Advance(absl::Seconds(1));  // renew_deadline (10 s) since the last renewal
  ASSERT_TRUE(Eventually([&] { return a.probe().returned(); }));
  EXPECT_FALSE(a.elector().IsLeader());
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  const absl::Status lost = a.Join();
  EXPECT_EQ(lost.code(), absl::StatusCode::kAborted) << lost;
  EXPECT_NE(lost.message().find("renewed only after the 10000 ms renew deadline"),
            absl::string_view::npos)
      << lost;
}

TEST(LeaderElector, ALeaderThatSeesAnotherHolderStepsDownAtOnce) {
  LeaseServer server;
  FakeTime time;
  Replica a(server, "op-a", time);
  a.Start();
  ASSERT_TRUE(Eventually([&] { return a.probe().started(); }));
  server.Put(LeaseHeldBy("op-z", time.Now()));  // e.g. after a long pause of op-a

  absl::Status lost = a.Join();
  EXPECT_EQ(lost.code(), absl::StatusCode::kAborted);
  EXPECT_NE(lost.message().find("op-z"), absl::string_view::npos) << lost;
  EXPECT_TRUE(a.probe().returned());
  EXPECT_EQ(server.Record().holder_identity, "op-z");
}

TEST(LeaderElector, StopBeforeLeadingReturnsOkAndLeavesTheLeaseAlone) {
  LeaseServer server;
  FakeTime time;
  server.Put(LeaseHeldBy("op-b", time.Now()));
  Replica a(server, "op-a", time);
  a.Start();
  ASSERT_TRUE(Eventually([&] { return a.client().gets() >= 3; }));
  EXPECT_TRUE(a.Stop().ok());
  EXPECT_FALSE(a.probe().started());
  EXPECT_EQ(server.Record().holder_identity, "op-b");
  EXPECT_EQ(server.Record().lease_transitions, 2);
}

TEST(LeaderElector, WhenLeadReturnsByItselfTheLeaseIsReleased) {
  LeaseServer server;
  FakeTime time;
  ReplicaClient client(server);
  LeaderElector elector(client, Options("op-a"), time.AsFunction());
  int runs = 0;
  absl::Status status = elector.Run(std::stop_token(), [&](std::stop_token) { ++runs; });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(runs, 1);
  EXPECT_FALSE(elector.IsLeader());
  EXPECT_EQ(server.Record().holder_identity, "");
  EXPECT_EQ(server.Record().lease_duration_seconds, 1);
}

}  // namespace
}  // namespace psflow::controller
