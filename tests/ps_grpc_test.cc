// The ps service and the worker's PsClient over real gRPC on loopback, in one process: exact
// values through placement on several ps tasks, chunked transfer of a variable bigger than the
// gRPC message limit, sync aggregation with parked pulls and backup workers, the run-time
// learning rate, chief/non-chief start-up and refused mismatches.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/chunk_plan.h"
#include "core/free_ports.h"
#include "core/wire_type.h"
#include "ps/loopback_ps.h"
#include "worker/ps_client.h"

namespace psflow {
namespace {

using std::chrono::milliseconds;

std::unique_ptr<nn::ParameterSet> MakeParams(int64_t big_rows = 100) {
  auto p = std::make_unique<nn::ParameterSet>();
  p->Declare("big", {big_rows, 10}, nn::Initializer::Uniform(1.0f));
  p->Declare("mid", {500}, nn::Initializer::Uniform(1.0f));
  p->Declare("small", {3}, nn::Initializer::Zeros());
  p->Finalize();
  return p;
}

PsClient::Options Options(std::vector<std::string> addresses, int timeout_ms = 5000, int worker = 0,
                          int workers = 1, bool sync = false, int aggregate = 0, float lr = 0.5f) {
  PsClient::Options o;
  o.ps_addresses = std::move(addresses);
  o.connect_timeout = milliseconds(timeout_ms);
  o.rpc_timeout = milliseconds(timeout_ms);
  o.startup_timeout = milliseconds(timeout_ms);
  o.training.optimizer.set_name("sgd");
  o.training.optimizer.set_learning_rate(lr);
  o.training.sync.set_total_workers(workers);
  o.training.sync.set_sync_replicas(sync);
  o.training.sync.set_replicas_to_aggregate(aggregate);
  o.training.worker_index = worker;
  return o;
}

// Every parameter's values, back to back (without the alignment padding between them).
std::vector<float> Values(const nn::ParameterSet& params) {
  std::vector<float> out;
  for (size_t h = 0; h < params.descs().size(); ++h) {
    const auto v = params.value(static_cast<nn::ParameterSet::Handle>(h));
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Sets gradient element i (counted as Values() counts) to fn(i).
template <class Fn>
void SetGrads(nn::ParameterSet& params, Fn fn) {
  size_t i = 0;
  for (size_t h = 0; h < params.descs().size(); ++h) {
    for (float& g : params.grad(static_cast<nn::ParameterSet::Handle>(h))) g = fn(i++);
  }
}

TEST(PsGrpc, ChiefInitialisesOthersPullAndPushesApplySgdOnEveryTask) {
  LoopbackPs ps0, ps1;
  ASSERT_TRUE(ps0.started() && ps1.started());
  auto chief_params = MakeParams();
  chief_params->Initialize(3);
  auto chief = PsClient::Create(Options({ps0.address(), ps1.address()}, 5000, 0, 2), *chief_params);
  ASSERT_TRUE(chief.ok()) << chief.status();
  // 6012 bytes, all variables under the 4 KiB minimum partition: "big" (4000 B) on task 0,
  // "mid" (2000 B) and "small" (12 B) on task 1.
  EXPECT_EQ((*chief)->placement().bytes_per_task, (std::vector<int64_t>{4000, 2012}));

  // The other worker starts first and waits for the chief without failing.
  auto other_params = MakeParams();
  absl::Status waited;
  std::jthread other([&] {  // joined also when an assertion returns early
    auto client =
        PsClient::Create(Options({ps0.address(), ps1.address()}, 5000, 1, 2), *other_params);
    waited = client.ok() ? (*client)->Prepare(*other_params, /*is_chief=*/false) : client.status();
    if (waited.ok()) waited = (*client)->Pull(*other_params).status();
  });
  std::this_thread::sleep_for(milliseconds(200));
  ASSERT_TRUE((*chief)->Prepare(*chief_params, /*is_chief=*/true).ok());
  other.join();
  ASSERT_TRUE(waited.ok()) << waited;
  EXPECT_EQ(Values(*chief_params), Values(*other_params));

  // Push gradients of 2.0 everywhere: every value drops by lr * 2 = 1.0, on both tasks.
  const std::vector<float> before = Values(*chief_params);
  SetGrads(*chief_params, [](size_t) { return 2.0f; });
  ASSERT_TRUE((*chief)->Pull(*chief_params).ok());
  auto pushed = (*chief)->Push(*chief_params, 10);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->global_step, 1);
  EXPECT_FALSE(pushed->dropped);
  EXPECT_EQ(pushed->bytes, (1000 + 500 + 3) * 4);
  auto pulled = (*chief)->Pull(*chief_params);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->global_step, 1);
  EXPECT_EQ(pulled->bytes, (1000 + 500 + 3) * 4);
  const std::vector<float> after = Values(*chief_params);
  for (size_t i = 0; i < before.size(); ++i) ASSERT_EQ(after[i], before[i] - 1.0f) << i;
  EXPECT_EQ(ps0.state().global_step(), 1);
  EXPECT_EQ(ps1.state().global_step(), 1);
  EXPECT_EQ(ps0.state().bytes() + ps1.state().bytes(), 6012);

  // A restarted chief finds the variables and leaves them alone.
  auto again = MakeParams();
  again->Initialize(99);
  auto chief2 = PsClient::Create(Options({ps0.address(), ps1.address()}, 5000, 0, 2), *again);
  ASSERT_TRUE((*chief2)->Prepare(*again, true).ok());
  ASSERT_TRUE((*chief2)->Pull(*again).ok());
  EXPECT_EQ(Values(*again), Values(*chief_params));
}

TEST(PsGrpc, VariableLargerThanTheMessageLimitMovesInChunks) {
  // 3M floats = 12 MiB in one variable: more than kMaxBulkMessageBytes, so at least 3 chunks.
  LoopbackPs ps;
  ASSERT_TRUE(ps.started());
  auto params = MakeParams(300000);
  params->Initialize(5);
  ASSERT_GT(params->total_size() * 4, kMaxBulkMessageBytes);
  auto chief = PsClient::Create(Options({ps.address()}, 20000), *params);
  ASSERT_TRUE(chief.ok());
  ASSERT_TRUE((*chief)->Prepare(*params, true).ok());
  auto reader_params = MakeParams(300000);
  auto reader = PsClient::Create(Options({ps.address()}, 20000), *reader_params);
  ASSERT_TRUE((*reader)->Prepare(*reader_params, false).ok());
  ASSERT_TRUE((*reader)->Pull(*reader_params).ok());
  EXPECT_EQ(Values(*params), Values(*reader_params));
  // A gradient of i % 7 for element i comes back applied element by element.
  SetGrads(*params, [](size_t i) { return static_cast<float>(i % 7); });
  const std::vector<float> before = Values(*params);
  ASSERT_TRUE((*chief)->Push(*params, 1).ok());
  ASSERT_TRUE((*reader)->Pull(*reader_params).ok());
  const std::vector<float> after = Values(*reader_params);
  for (size_t i = 0; i < before.size(); ++i) {
    ASSERT_EQ(after[i], before[i] - 0.5f * static_cast<float>(i % 7)) << i;
  }
}

TEST(PsGrpc, SyncStepWaitsForTheAggregateAndIgnoresTheBackupWorker) {
  // 3 workers, 2 gradients per step: the third to push is a backup and is dropped.
  LoopbackPs ps0, ps1;
  const std::vector<std::string> addresses = {ps0.address(), ps1.address()};
  std::vector<std::unique_ptr<nn::ParameterSet>> params;
  std::vector<std::unique_ptr<PsClient>> clients;
  for (int w = 0; w < 3; ++w) {
    params.push_back(MakeParams());
    if (w == 0) params[0]->Initialize(7);
    auto c = PsClient::Create(Options(addresses, 5000, w, 3, true, 2, 1.0f), *params.back());
    ASSERT_TRUE(c.ok());
    clients.push_back(std::move(*c));
  }
  ASSERT_TRUE(clients[0]->Prepare(*params[0], true).ok());
  for (int w = 1; w < 3; ++w) ASSERT_TRUE(clients[w]->Prepare(*params[w], false).ok());
  for (int w = 0; w < 3; ++w) ASSERT_TRUE(clients[w]->Pull(*params[w]).ok());
  const std::vector<float> init = Values(*params[0]);

  SetGrads(*params[0], [](size_t) { return 1.0f; });
  SetGrads(*params[1], [](size_t) { return 3.0f; });
  SetGrads(*params[2], [](size_t) { return 100.0f; });
  auto p0 = clients[0]->Push(*params[0], 1);
  ASSERT_TRUE(p0.ok() && !p0->dropped);
  // Worker 0's next pull is parked until a second gradient arrives.
  std::atomic<bool> pulled{false};
  std::jthread waiter([&] {  // joined also when an assertion returns early
    ASSERT_TRUE(clients[0]->Pull(*params[0]).ok());
    pulled = true;
  });
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_FALSE(pulled) << "the pull did not wait for the step to be aggregated";
  auto p1 = clients[1]->Push(*params[1], 1);
  ASSERT_TRUE(p1.ok() && !p1->dropped);
  waiter.join();
  EXPECT_TRUE(pulled);
  // The backup's gradients for the same step are dropped.
  auto p2 = clients[2]->Push(*params[2], 1);
  ASSERT_TRUE(p2.ok());
  EXPECT_TRUE(p2->dropped);
  ASSERT_TRUE(clients[2]->Pull(*params[2]).ok());
  // lr 1 * mean(1, 3) = 2 off every value, on both ps tasks.
  const std::vector<float> v0 = Values(*params[0]), v2 = Values(*params[2]);
  for (size_t i = 0; i < init.size(); ++i) {
    ASSERT_EQ(v0[i], init[i] - 2.0f) << i;
    ASSERT_EQ(v2[i], init[i] - 2.0f) << i;
  }
  EXPECT_EQ(ps0.state().global_step(), 1);
  EXPECT_EQ(ps1.state().global_step(), 1);
}

TEST(PsGrpc, SparseGradientsPushOnlyTheTouchedRows) {
  // An embedding of 1000 rows x 8, split across 2 ps tasks; a step touches rows 3, 500 and 999.
  LoopbackPs ps0, ps1;
  auto make = [] {
    auto p = std::make_unique<nn::ParameterSet>();
    const auto emb = p->Declare("embedding", {1000, 8}, nn::Initializer::Uniform(1.0f));
    p->Declare("bias", {8}, nn::Initializer::Zeros());
    p->MarkSparse(emb);
    p->Finalize();
    return p;
  };
  auto params = make();
  params->Initialize(2);
  auto chief = PsClient::Create(Options({ps0.address(), ps1.address()}, 5000, 0, 1), *params);
  ASSERT_TRUE(chief.ok());
  ASSERT_GT((*chief)->placement().partitions.size(), 2u) << "the embedding was not split";
  ASSERT_TRUE((*chief)->Prepare(*params, true).ok());
  ASSERT_TRUE((*chief)->Pull(*params).ok());
  const std::vector<float> before = Values(*params);
  SetGrads(*params, [](size_t) { return 2.0f; });  // untouched rows must not be sent
  params->SetTouchedRows(0, {3, 500, 999});
  auto pushed = (*chief)->Push(*params, 1);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->bytes, (3 * 8 + 8) * 4);
  ASSERT_TRUE((*chief)->Pull(*params).ok());
  const std::vector<float> after = Values(*params);
  for (size_t i = 0; i < before.size(); ++i) {
    const int64_t row = static_cast<int64_t>(i) / 8;
    const bool touched = i >= 8000 || row == 3 || row == 500 || row == 999;  // bias: dense
    ASSERT_EQ(after[i], touched ? before[i] - 1.0f : before[i]) << i;
  }
  // A step that touches no row held by a task still counts on that task.
  params->SetTouchedRows(0, {});
  ASSERT_TRUE((*chief)->Push(*params, 1).ok());
  EXPECT_EQ(ps0.state().global_step(), 2);
  EXPECT_EQ(ps1.state().global_step(), 2);
}

TEST(PsGrpc, SixteenBitWireTypesHalveTheBytesAndKeepFloat32OnThePs) {
  for (WireType type : {WireType::kBfloat16, WireType::kFloat16}) {
    LoopbackPs ps;
    auto params = MakeParams();  // big, mid: uniform values a 16-bit type cannot hold exactly
    params->Initialize(4);
    PsClient::Options o = Options({ps.address()});
    o.wire_type = type;
    auto chief = PsClient::Create(o, *params);
    ASSERT_TRUE((*chief)->Prepare(*params, true).ok());
    // The initial values went as float32: a float32 reader sees them exactly.
    auto exact_params = MakeParams();
    auto exact = PsClient::Create(Options({ps.address()}), *exact_params);
    ASSERT_TRUE((*exact)->Prepare(*exact_params, false).ok());
    ASSERT_TRUE((*exact)->Pull(*exact_params).ok());
    EXPECT_EQ(Values(*exact_params), Values(*params));
    // Gradients of 2 (exact in 16 bits) take lr 0.5 * 2 = 1 off the float32 master values.
    auto pulled = (*chief)->Pull(*params);
    ASSERT_TRUE(pulled.ok());
    EXPECT_EQ(pulled->bytes, (1000 + 500 + 3) * 2);
    SetGrads(*params, [](size_t) { return 2.0f; });
    auto pushed = (*chief)->Push(*params, 1);
    ASSERT_TRUE(pushed.ok());
    EXPECT_EQ(pushed->bytes, (1000 + 500 + 3) * 2);
    const std::vector<float> before = Values(*exact_params);
    ASSERT_TRUE((*exact)->Pull(*exact_params).ok());
    const std::vector<float> after = Values(*exact_params);
    for (size_t i = 0; i < before.size(); ++i) ASSERT_EQ(after[i], before[i] - 1.0f) << i;
    // And the 16-bit pull is the master values rounded.
    ASSERT_TRUE((*chief)->Pull(*params).ok());
    const std::vector<float> rounded = Values(*params);
    for (size_t i = 0; i < after.size(); ++i) {
      const float expected = type == WireType::kBfloat16 ? FromBfloat16(ToBfloat16(after[i]))
                                                         : FromFloat16(ToFloat16(after[i]));
      ASSERT_EQ(rounded[i], expected) << i;
    }
  }
}

TEST(PsGrpc, ChiefChangesTheLearningRateAtRunTime) {
  LoopbackPs ps;
  auto params = MakeParams();
  params->Initialize(1);
  auto chief = PsClient::Create(Options({ps.address()}), *params);
  ASSERT_TRUE((*chief)->Prepare(*params, true).ok());
  ASSERT_TRUE((*chief)->Pull(*params).ok());
  const std::vector<float> before = Values(*params);
  ASSERT_TRUE((*chief)->SetLearningRate(0.25f).ok());
  SetGrads(*params, [](size_t) { return 4.0f; });
  ASSERT_TRUE((*chief)->Push(*params, 1).ok());
  ASSERT_TRUE((*chief)->Pull(*params).ok());
  const std::vector<float> after = Values(*params);
  for (size_t i = 0; i < before.size(); ++i) ASSERT_EQ(after[i], before[i] - 1.0f);
  EXPECT_EQ((*chief)->SetLearningRate(-1.0f).code(), absl::StatusCode::kInvalidArgument);
}

// A rate the chief sets while a ps task is gone (restarting) is not lost: the next Pull waits for
// the task (the chief re-creates it: no checkpoint here) and the rate reaches it.
TEST(PsGrpc, ALearningRateSetWhileTheTaskIsGoneReachesItOnceItIsBack) {
  const int port = FreeLocalPorts(1).value()[0];
  const std::string address = absl::StrCat("127.0.0.1:", port);
  auto params = MakeParams();
  params->Initialize(1);
  auto chief = PsClient::Create(Options({address}), *params);  // learning rate 0.5
  ASSERT_TRUE(chief.ok()) << chief.status();
  {
    LoopbackPs ps(TransportSecurity(), port);
    ASSERT_TRUE(ps.started());
    ASSERT_TRUE((*chief)->Prepare(*params, true).ok());
    ASSERT_TRUE((*chief)->Pull(*params).ok());
  }
  const absl::Status set = (*chief)->SetLearningRate(0.25f);
  EXPECT_TRUE(set.ok()) << set;
  LoopbackPs back(TransportSecurity(), port);
  ASSERT_TRUE(back.started());
  ASSERT_TRUE((*chief)->Pull(*params).ok());
  const std::vector<float> before = Values(*params);
  SetGrads(*params, [](size_t) { return 4.0f; });
  ASSERT_TRUE((*chief)->Push(*params, 1).ok());
  ASSERT_TRUE((*chief)->Pull(*params).ok());
  const std::vector<float> after = Values(*params);
  for (size_t i = 0; i < before.size(); ++i) ASSERT_EQ(after[i], before[i] - 1.0f) << i;
}

// A worker that leaves while a ps task is gone leaves again once it is back: a sync step of
// the task that came back completes without it.
TEST(PsGrpc, ALeaveWhileTheTaskIsGoneIsMadeAgainOnceItIsBack) {
  const int port = FreeLocalPorts(1).value()[0];
  const std::string address = absl::StrCat("127.0.0.1:", port);
  std::vector<std::unique_ptr<nn::ParameterSet>> params;
  std::vector<std::unique_ptr<PsClient>> clients;
  for (int w = 0; w < 2; ++w) {
    params.push_back(MakeParams());
    if (w == 0) params[0]->Initialize(7);
    auto c = PsClient::Create(Options({address}, 5000, w, 2, /*sync=*/true), *params.back());
    ASSERT_TRUE(c.ok()) << c.status();
    clients.push_back(std::move(*c));
  }
  {
    LoopbackPs ps(TransportSecurity(), port);
    ASSERT_TRUE(ps.started());
    ASSERT_TRUE(clients[0]->Prepare(*params[0], true).ok());
    ASSERT_TRUE(clients[1]->Prepare(*params[1], false).ok());
  }
  const absl::Status left = clients[0]->Leave();
  EXPECT_TRUE(left.ok()) << left;
  LoopbackPs back(TransportSecurity(), port);
  ASSERT_TRUE(back.started());
  ASSERT_TRUE(clients[0]->Pull(*params[0]).ok());  // re-creates the task, leaves again
  ASSERT_TRUE(clients[1]->Pull(*params[1]).ok());
  SetGrads(*params[1], [](size_t) { return 1.0f; });
  auto pushed = clients[1]->Push(*params[1], 1);
  ASSERT_TRUE(pushed.ok() && !pushed->dropped);
  const absl::StatusOr<SyncResult> pulled = clients[1]->Pull(*params[1]);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(back.state().global_step(), 1);
}

// Calls WaitReady with a 20 s timeout on another thread; `done` flips when it answers.
struct ParkedWait {
  explicit ParkedWait(const std::string& address) {
    thread = std::thread([this, address] {
      auto stub = proto::ParameterServer::NewStub(
          OpenPsChannel(address, TransportSecurity(), grpc::ChannelArguments()));
      grpc::ClientContext ctx;
      proto::WaitReadyRequest req;
      req.set_timeout_ms(20000);
      status = stub->WaitReady(&ctx, req, &response);
      done = true;
    });
  }
  ~ParkedWait() { thread.join(); }
  std::thread thread;
  std::atomic<bool> done{false};
  grpc::Status status;
  proto::WaitReadyResponse response;
};

TEST(PsGrpc, WaitReadyIsParkedUntilInitialiseThenAnswered) {
  LoopbackPs ps;
  ASSERT_TRUE(ps.started());
  const auto start = std::chrono::steady_clock::now();
  {
    ParkedWait wait(ps.address());
    std::this_thread::sleep_for(milliseconds(300));
    EXPECT_FALSE(wait.done) << "answered before the variables existed";
    auto params = MakeParams();
    auto chief = PsClient::Create(Options({ps.address()}), *params);
    ASSERT_TRUE((*chief)->Prepare(*params, true).ok());
  }  // joins the waiter
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15))
      << "the waiter sat out its timeout instead of being released by Initialize";
}

TEST(PsGrpc, StopReleasesParkedWaitersNotReady) {
  LoopbackPs ps;
  ASSERT_TRUE(ps.started());
  ParkedWait wait(ps.address());
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_FALSE(wait.done);
  ps.Stop();
  wait.thread.join();
  wait.thread = std::thread([] {});  // the destructor joins again
  // UNAVAILABLE, as a lost connection: the worker waits for the task to come back.
  EXPECT_EQ(wait.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(wait.status.error_message(), "the ps task is stopping");
}

TEST(PsGrpc, NonChiefGivesUpWhenNoChiefComes) {
  LoopbackPs ps;
  auto params = MakeParams();
  auto client = PsClient::Create(Options({ps.address()}, 500), *params);
  const absl::Status s = (*client)->Prepare(*params, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(s.message(), "is the chief running?")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), ps.address())) << s;
}

// Issue 29: a worker started before its chief (a chief pod the scheduler has not placed yet)
// waits for it, attempt after attempt, instead of exiting after one connect_timeout.
TEST(PsGrpc, NonChiefWaitsPastItsAttemptsForALateChief) {
  LoopbackPs ps;
  auto chief_params = MakeParams();
  auto other_params = MakeParams();
  PsClient::Options waiting = Options({ps.address()}, 200, /*worker=*/1, /*workers=*/2);
  waiting.startup_timeout = milliseconds(20000);  // far beyond one attempt; bounded, so a
                                                  // failure below cannot hang the test
  auto other = PsClient::Create(waiting, *other_params);
  ASSERT_TRUE(other.ok()) << other.status();
  absl::Status prepared = absl::UnknownError("not returned");
  std::thread wait([&] { prepared = (*other)->Prepare(*other_params, false); });
  std::this_thread::sleep_for(milliseconds(1000));  // five attempts of 200 ms
  auto chief = PsClient::Create(Options({ps.address()}, 5000, 0, 2), *chief_params);
  const absl::Status initialised =
      chief.ok() ? (*chief)->Prepare(*chief_params, true) : chief.status();
  wait.join();
  ASSERT_TRUE(initialised.ok()) << initialised;
  EXPECT_TRUE(prepared.ok()) << prepared;
}

// A chief started before its ps task (a ps pod still being scheduled) waits for it to listen.
TEST(PsGrpc, ChiefWaitsForAPsThatStartsLate) {
  const int port = FreeLocalPorts(1).value()[0];
  auto params = MakeParams();
  PsClient::Options options = Options({absl::StrCat("127.0.0.1:", port)}, 200);
  options.startup_timeout = milliseconds(20000);
  auto chief = PsClient::Create(options, *params);
  ASSERT_TRUE(chief.ok()) << chief.status();
  absl::Status prepared = absl::UnknownError("not returned");
  std::thread wait([&] { prepared = (*chief)->Prepare(*params, true); });
  std::this_thread::sleep_for(milliseconds(1000));
  LoopbackPs ps(TransportSecurity(), port);
  wait.join();
  ASSERT_TRUE(ps.started());
  EXPECT_TRUE(prepared.ok()) << prepared;
}

TEST(PsGrpc, MismatchedModelIsRefused) {
  LoopbackPs ps;
  auto params = MakeParams();
  auto chief = PsClient::Create(Options({ps.address()}), *params);
  ASSERT_TRUE((*chief)->Prepare(*params, true).ok());
  nn::ParameterSet other;
  other.Declare("big", {10, 100}, nn::Initializer::Zeros());  // same name and size, other shape
  other.Declare("mid", {500}, nn::Initializer::Zeros());
  other.Declare("small", {3}, nn::Initializer::Zeros());
  other.Finalize();
  auto client = PsClient::Create(Options({ps.address()}), other);
  const absl::Status waited = (*client)->Prepare(other, false);
  EXPECT_EQ(waited.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(waited.message(), "different model")) << waited;
  // Its pulls and pushes are refused and change nothing on the ps.
  auto pulled = (*client)->Pull(other);
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kInvalidArgument);
  auto pushed = (*client)->Push(other, 1);
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ps.state().global_step(), 0);
  // A chief with the other model is refused too.
  auto other_chief = PsClient::Create(Options({ps.address()}), other);
  EXPECT_EQ((*other_chief)->Prepare(other, true).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace psflow
