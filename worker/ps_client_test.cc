// PsClient's early sending (GradientsReady) against real ps tasks on loopback: chunks sent as
// their parameters become ready, then Push, leave exactly the ps state a plain Push leaves (async
// and sync, several tasks, chunks spanning variables, sparse rows), and an early send to a ps
// that went away is reported by Push the way recovery expects. Every test runs on both
// transports: the bulk channel and raw gRPC calls.
#include "worker/ps_client.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ps/loopback_ps.h"

namespace psflow {
namespace {

using Handle = nn::ParameterSet::Handle;

// Variables of 1.2, 3.2 and 2 MB (4 MiB chunks: some chunk holds the end of one and the start of
// the next), a sparse embedding and a bias.
std::unique_ptr<nn::ParameterSet> MakeParams() {
  auto p = std::make_unique<nn::ParameterSet>();
  p->Declare("a", {300, 1000}, nn::Initializer::Uniform(1.0f));
  p->Declare("b", {800, 1000}, nn::Initializer::Uniform(1.0f));
  p->Declare("c", {500, 1000}, nn::Initializer::Uniform(1.0f));
  const Handle emb = p->Declare("embedding", {1000, 8}, nn::Initializer::Uniform(1.0f));
  p->Declare("bias", {8}, nn::Initializer::Zeros());
  p->MarkSparse(emb);
  p->Finalize();
  return p;
}

PsClient::Options Options(Transport transport, std::vector<std::string> addresses, int worker,
                          int workers, bool sync, int timeout_ms = 5000) {
  PsClient::Options o;
  o.transport = transport;
  o.ps_addresses = std::move(addresses);
  o.connect_timeout = std::chrono::milliseconds(timeout_ms);
  o.rpc_timeout = std::chrono::milliseconds(timeout_ms);
  o.training.optimizer.set_name("sgd");
  o.training.optimizer.set_learning_rate(0.5f);
  o.training.sync.set_total_workers(workers);
  o.training.sync.set_sync_replicas(sync);
  o.training.worker_index = worker;
  return o;
}

// Gradients of step `step` for worker `worker`: distinct per element, exactly representable.
void SetStepGradients(nn::ParameterSet& params, int step, int worker) {
  for (size_t h = 0; h < params.descs().size(); ++h) {
    auto g = params.grad(static_cast<Handle>(h));
    for (size_t i = 0; i < g.size(); ++i) {
      g[i] = static_cast<float>((i * 7 + h * 3 + static_cast<size_t>(step + worker)) % 16) / 8.0f;
    }
  }
  params.SetTouchedRows(
      3, step % 2 == 0 ? std::vector<int64_t>{0, 17, 640, 999} : std::vector<int64_t>{5});
}

// Every parameter's values and the ps tasks' steps after `steps` steps of `workers` workers on
// 2 ps tasks; worker w sends early when early[w] (one GradientsReady per parameter, last first,
// as backward produces them).
struct Outcome {
  std::vector<float> values;
  std::vector<int64_t> steps;
};

// A Unix socket path for ps task `task`'s shared-memory channel in this test ("" when not
// `shared_memory`).
std::string LocalSocket(bool shared_memory, int task) {
  if (!shared_memory) return "";
  return (std::filesystem::path(::testing::TempDir()) /
          ("ps" + std::to_string(getpid()) + "-" + std::to_string(task) + ".sock"))
      .string();
}

// shared_memory: the tasks offer their bulk channel through shared memory too (the workers then
// use it).
Outcome Train(Transport transport, bool sync, int workers, std::vector<bool> early, int steps,
              bool shared_memory = false) {
  LoopbackPs ps0(TransportSecurity(), 0, true, LocalSocket(shared_memory, 0));
  LoopbackPs ps1(TransportSecurity(), 0, true, LocalSocket(shared_memory, 1));
  EXPECT_TRUE(ps0.started() && ps1.started());
  const std::vector<std::string> addresses = {ps0.address(), ps1.address()};
  std::vector<std::unique_ptr<nn::ParameterSet>> params;
  std::vector<std::unique_ptr<PsClient>> clients;
  for (int w = 0; w < workers; ++w) {
    params.push_back(MakeParams());
    if (w == 0) params[0]->Initialize(11);
    auto c = PsClient::Create(Options(transport, addresses, w, workers, sync), *params.back());
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return {};
    clients.push_back(std::move(*c));
    EXPECT_TRUE(clients[w]->Prepare(*params[w], w == 0).ok());
  }
  for (int w = 0; w < workers; ++w) EXPECT_TRUE(clients[w]->Pull(*params[w]).ok());
  for (int step = 0; step < steps; ++step) {
    for (int w = 0; w < workers; ++w) {
      nn::ParameterSet& p = *params[w];
      SetStepGradients(p, step, w);
      if (early[static_cast<size_t>(w)]) {
        for (auto h = static_cast<Handle>(p.descs().size()); h > 0; --h) {
          clients[w]->GradientsReady(p, h - 1, h, 2);
        }
      }
      auto pushed = clients[w]->Push(p, 2);
      EXPECT_TRUE(pushed.ok()) << pushed.status();
      EXPECT_FALSE(pushed.ok() && pushed->dropped);
    }
    for (int w = 0; w < workers; ++w) EXPECT_TRUE(clients[w]->Pull(*params[w]).ok());
  }
  Outcome out;
  const auto v = params[0]->values();
  out.values.assign(v.begin(), v.end());
  out.steps = {ps0.state().global_step(), ps1.state().global_step()};
  // Each worker's one connection per task went on the bulk channel, or none did.
  const int links = transport == Transport::kBulk ? workers : 0;
  EXPECT_EQ(ps0.bulk_connections(), links);
  EXPECT_EQ(ps1.bulk_connections(), links);
  EXPECT_EQ(ps0.local_bulk_connections(), shared_memory ? links : 0);
  EXPECT_EQ(ps1.local_bulk_connections(), shared_memory ? links : 0);
  return out;
}

class PsClientEarlySend : public ::testing::TestWithParam<Transport> {};
class PsClientTest : public ::testing::TestWithParam<Transport> {};

std::string TransportName(const ::testing::TestParamInfo<Transport>& info) {
  return info.param == Transport::kBulk ? "Bulk" : "Grpc";
}

TEST_P(PsClientEarlySend, AsyncEarlyChunksGiveThePlainPushState) {
  const Outcome plain = Train(GetParam(), false, 1, {false}, 3);
  const Outcome early = Train(GetParam(), false, 1, {true}, 3);
  ASSERT_FALSE(plain.values.empty());
  EXPECT_EQ(plain.steps, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(early.steps, plain.steps);
  ASSERT_EQ(early.values.size(), plain.values.size());
  for (size_t i = 0; i < plain.values.size(); ++i) ASSERT_EQ(early.values[i], plain.values[i]) << i;
}

TEST_P(PsClientEarlySend, SyncEarlyChunksGiveThePlainPushState) {
  const Outcome plain = Train(GetParam(), true, 2, {false, false}, 2);
  const Outcome early = Train(GetParam(), true, 2, {true, false}, 2);
  ASSERT_FALSE(plain.values.empty());
  EXPECT_EQ(plain.steps, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(early.steps, plain.steps);
  ASSERT_EQ(early.values.size(), plain.values.size());
  for (size_t i = 0; i < plain.values.size(); ++i) ASSERT_EQ(early.values[i], plain.values[i]) << i;
}

TEST_P(PsClientEarlySend, AllParametersReadyAtOnceAndRepeatedCallsAreHarmless) {
  // One GradientsReady for everything, then the same range again: each chunk goes once.
  LoopbackPs ps;
  auto params = MakeParams();
  params->Initialize(5);
  auto client = PsClient::Create(Options(GetParam(), {ps.address()}, 0, 1, false), *params);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Prepare(*params, true).ok());
  ASSERT_TRUE((*client)->Pull(*params).ok());
  SetStepGradients(*params, 0, 0);
  const auto n = static_cast<Handle>(params->descs().size());
  (*client)->GradientsReady(*params, 0, n, 1);
  (*client)->GradientsReady(*params, 0, n, 1);
  auto pushed = (*client)->Push(*params, 1);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->bytes, (300 + 800 + 500) * 1000 * 4 + (4 * 8 + 8) * 4);
  EXPECT_EQ(ps.state().global_step(), 1);
}

TEST_P(PsClientEarlySend, PullAfterGradientsReadyWithoutPushForgetsThem) {
  LoopbackPs ps;
  auto params = MakeParams();
  params->Initialize(5);
  auto client = PsClient::Create(Options(GetParam(), {ps.address()}, 0, 1, false), *params);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Prepare(*params, true).ok());
  ASSERT_TRUE((*client)->Pull(*params).ok());
  SetStepGradients(*params, 0, 0);
  (*client)->GradientsReady(*params, 0, 1, 1);
  ASSERT_TRUE((*client)->Pull(*params).ok());
  // The next step is a whole push of its own.
  auto pushed = (*client)->Push(*params, 1);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->bytes, (300 + 800 + 500) * 1000 * 4 + (4 * 8 + 8) * 4);
}

TEST_P(PsClientEarlySend, EarlySendToAPsThatWentAwayIsReportedByPush) {
  auto ps = std::make_unique<LoopbackPs>();
  auto params = MakeParams();
  params->Initialize(5);
  auto client = PsClient::Create(Options(GetParam(), {ps->address()}, 0, 1, false, 1000), *params);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Prepare(*params, true).ok());
  ASSERT_TRUE((*client)->Pull(*params).ok());
  ps.reset();
  SetStepGradients(*params, 0, 0);
  const auto n = static_cast<Handle>(params->descs().size());
  (*client)->GradientsReady(*params, 1, n, 1);
  // As a plain push to a lost task: the gradients are dropped and the next Pull recovers (here it
  // cannot: the task does not come back).
  auto pushed = (*client)->Push(*params, 1);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_TRUE(pushed->dropped);
  auto pulled = (*client)->Pull(*params);
  EXPECT_TRUE(absl::IsUnavailable(pulled.status())) << pulled.status();
}

// --placement reaches the placement the chief creates on the ps tasks: round robin puts
// variable i whole on task i mod n (nothing needs to run for that).
TEST_P(PsClientTest, UsesThePlacementStrategyItIsGiven) {
  auto params = MakeParams();
  PsClient::Options options = Options(GetParam(), {"127.0.0.1:1", "127.0.0.1:2"}, 0, 1, false);
  options.placement = PlacementStrategy::kRoundRobin;
  auto client = PsClient::Create(options, *params);
  ASSERT_TRUE(client.ok()) << client.status();
  const Placement& p = (*client)->placement();
  ASSERT_EQ(p.partitions.size(), params->descs().size());
  for (size_t i = 0; i < p.partitions.size(); ++i) {
    EXPECT_EQ(p.partitions[i].task, static_cast<int>(i % 2));
  }
  auto balanced =
      PsClient::Create(Options(GetParam(), {"127.0.0.1:1", "127.0.0.1:2"}, 0, 1, false), *params);
  ASSERT_TRUE(balanced.ok()) << balanced.status();
  EXPECT_NE((*balanced)->placement().fingerprint, p.fingerprint);
}

// A worker whose optimizer or step rules are not the ones the chief created the variables with
// is refused at Prepare, naming both (they would be silently ignored); an evaluator is not.
TEST_P(PsClientTest, AWorkerAskingForOtherTrainingThanTheTaskHoldsIsRefused) {
  LoopbackPs ps;
  ASSERT_TRUE(ps.started());
  auto chief_params = MakeParams();
  chief_params->Initialize(5);
  auto chief = PsClient::Create(Options(GetParam(), {ps.address()}, 0, 2, false), *chief_params);
  ASSERT_TRUE(chief.ok()) << chief.status();
  ASSERT_TRUE((*chief)->Prepare(*chief_params, true).ok());
  for (const bool sync : {false, true}) {
    PsClient::Options o = Options(GetParam(), {ps.address()}, 1, 2, sync, 2000);
    if (!sync) o.training.optimizer.set_name("adam");
    auto params = MakeParams();
    auto worker = PsClient::Create(o, *params);
    ASSERT_TRUE(worker.ok()) << worker.status();
    const absl::Status s = (*worker)->Prepare(*params, false);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    const std::string expected = sync ? "this worker asks for optimizer sgd, sync steps"
                                      : "this worker asks for optimizer adam, async steps";
    EXPECT_NE(std::string(s.message()).find(expected), std::string::npos) << s;
    // A client that only pulls (an evaluator) is not asked to agree.
    o.pushes = false;
    auto evaluator = PsClient::Create(o, *params);
    ASSERT_TRUE(evaluator.ok()) << evaluator.status();
    EXPECT_TRUE((*evaluator)->Prepare(*params, false).ok());
  }
}

// A ps task restarted without a checkpoint between two exchanges answers "not initialised": the
// chief takes it for a lost task, drops the push in flight and re-creates the variables from its
// latest parameters at the step it last saw, instead of exiting (and being restarted from its
// initial parameters at step 0).
TEST_P(PsClientTest, ChiefRecreatesATaskRestartedEmptyBetweenTwoExchanges) {
  auto ps = std::make_unique<LoopbackPs>();
  ASSERT_TRUE(ps->started());
  const std::string address = ps->address();
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  auto params = MakeParams();
  params->Initialize(5);
  auto client = PsClient::Create(Options(GetParam(), {address}, 0, 1, false), *params);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Prepare(*params, true).ok());
  ASSERT_TRUE((*client)->Pull(*params).ok());
  for (int step = 0; step < 3; ++step) {
    SetStepGradients(*params, step, 0);
    ASSERT_TRUE((*client)->Push(*params, 2).ok());
    ASSERT_TRUE((*client)->Pull(*params).ok());
  }
  const std::vector<float> latest(params->values().begin(), params->values().end());

  ps.reset();
  ps = std::make_unique<LoopbackPs>(TransportSecurity(), port);
  ASSERT_TRUE(ps->started()) << "could not listen on " << address << " again";
  SetStepGradients(*params, 3, 0);
  auto pushed = (*client)->Push(*params, 2);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_TRUE(pushed->dropped);
  auto pulled = (*client)->Pull(*params);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->global_step, 3);
  EXPECT_EQ(ps->state().global_step(), 3);
  EXPECT_TRUE(std::equal(latest.begin(), latest.end(), params->values().begin()))
      << "the task must hold the chief's latest parameters";
  // And training goes on.
  SetStepGradients(*params, 3, 0);
  auto again = (*client)->Push(*params, 2);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->dropped);
}

// A sparse embedding big enough that balanced placement splits it over three tasks, between two
// dense variables.
std::unique_ptr<nn::ParameterSet> MakeEmbeddingParams() {
  auto p = std::make_unique<nn::ParameterSet>();
  p->Declare("w", {64, 100}, nn::Initializer::Uniform(1.0f));
  const Handle emb = p->Declare("embedding", {30000, 16}, nn::Initializer::Uniform(1.0f));
  p->Declare("bias", {16}, nn::Initializer::Uniform(1.0f));
  p->MarkSparse(emb);
  p->Finalize();
  return p;
}

// Three ps tasks on loopback and two workers' clients of MakeEmbeddingParams, prepared: the chief
// created the variables from its values seeded 3, the other waited for them (Start: run it under
// ASSERT_NO_FATAL_FAILURE).
struct EmbeddingJob {
  LoopbackPs ps[3];
  std::vector<std::unique_ptr<nn::ParameterSet>> params;
  std::vector<std::unique_ptr<PsClient>> clients;

  void Start(Transport transport, bool sync, WireType wire = WireType::kFloat32) {
    std::vector<std::string> addresses;
    for (const LoopbackPs& task : ps) {
      ASSERT_TRUE(task.started());
      addresses.push_back(task.address());
    }
    for (int w = 0; w < 2; ++w) {
      params.push_back(MakeEmbeddingParams());
      PsClient::Options options = Options(transport, addresses, w, 2, sync);
      options.wire_type = wire;
      auto c = PsClient::Create(options, *params.back());
      ASSERT_TRUE(c.ok()) << c.status();
      clients.push_back(std::move(*c));
    }
    params[0]->Initialize(3);
    ASSERT_TRUE(clients[0]->Prepare(*params[0], true).ok());
    ASSERT_TRUE(clients[1]->Prepare(*params[1], false).ok());
  }
};

std::vector<float> RowOf(const nn::ParameterSet& p, int64_t row) {
  const auto v = p.value(1).subspan(static_cast<size_t>(row * 16), 16);
  return {v.begin(), v.end()};
}

// Sparse pulls (ParameterSet::pulls_rows): worker 1 updates some embedding rows and the dense
// variables; worker 0 then pulls only the rows its next step reads. Those rows and every dense
// value are the ps's, fresh (one of them updated by the other worker); the rows it did not ask
// for keep what it had; the bytes are the dense ones and the rows asked. A whole pull then
// brings everything. Float32 (read straight into the parameters) and bfloat16 on the wire.
TEST_P(PsClientTest, SparsePullsBringFreshTheRowsAStepReadsAndNoOthers) {
  for (const WireType wire : {WireType::kFloat32, WireType::kBfloat16}) {
    SCOPED_TRACE(wire == WireType::kFloat32 ? "float32" : "bfloat16");
    EmbeddingJob job;
    ASSERT_NO_FATAL_FAILURE(job.Start(GetParam(), /*sync=*/false, wire));
    auto& params = job.params;
    auto& clients = job.clients;
    int embedding_partitions = 0;
    for (const PartitionPlacement& part : clients[0]->placement().partitions) {
      embedding_partitions += part.variable == 1 ? 1 : 0;
    }
    ASSERT_GE(embedding_partitions, 2) << clients[0]->placement().Describe();
    for (int w = 0; w < 2; ++w) ASSERT_TRUE(clients[w]->Pull(*params[w]).ok());
    const std::vector<float> before(params[0]->values().begin(), params[0]->values().end());

    nn::ParameterSet& other = *params[1];
    for (float& g : other.grads()) g = 0.25f;
    other.SetTouchedRows(1, {4, 20000, 29999});
    auto pushed = clients[1]->Push(other, 2);
    ASSERT_TRUE(pushed.ok()) << pushed.status();

    nn::ParameterSet& mine = *params[0];
    mine.mutable_rows_to_pull(1) = {3, 4, 5, 15000, 29999};
    mine.set_pulls_rows(true);
    auto sparse = clients[0]->Pull(mine);
    ASSERT_TRUE(sparse.ok()) << sparse.status();
    EXPECT_EQ(sparse->global_step, 1);
    const int64_t wire_bytes = wire == WireType::kFloat32 ? 4 : 2;
    EXPECT_EQ(sparse->bytes, (64 * 100 + 5 * 16 + 16) * wire_bytes);

    auto reference = clients[1]->Pull(other);  // whole
    ASSERT_TRUE(reference.ok()) << reference.status();
    EXPECT_EQ(reference->bytes, (64 * 100 + 30000 * 16 + 16) * wire_bytes);
    for (const Handle dense : {0, 2}) {
      const auto a = mine.value(dense), b = other.value(dense);
      EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << "dense variable " << dense;
    }
    for (const int64_t row : {3, 4, 5, 15000, 29999}) {
      EXPECT_EQ(RowOf(mine, row), RowOf(other, row)) << "row " << row << " was pulled";
    }
    EXPECT_NE(RowOf(mine, 4), std::vector<float>(before.begin() + mine.descs()[1].offset + 4 * 16,
                                                 before.begin() + mine.descs()[1].offset + 5 * 16))
        << "row 4 was updated by the other worker: the pull must bring the new value";
    const auto old_row = [&](int64_t row) {
      const auto at = before.begin() + mine.descs()[1].offset + row * 16;
      return std::vector<float>(at, at + 16);
    };
    EXPECT_EQ(RowOf(mine, 20000), old_row(20000)) << "not asked for: left as it was";
    EXPECT_NE(RowOf(other, 20000), old_row(20000));

    mine.set_pulls_rows(false);
    ASSERT_TRUE(clients[0]->Pull(mine).ok());
    EXPECT_TRUE(std::equal(mine.values().begin(), mine.values().end(), other.values().begin()));
  }
}

// Sync mode: a pull of no rows at all still waits for the step its worker pushed, on every task
// (each sparse partition takes a call of no rows), and then brings the aggregated dense values.
TEST_P(PsClientTest, SyncSparsePullOfNoRowsWaitsForTheStepOnEveryTask) {
  EmbeddingJob job;
  ASSERT_NO_FATAL_FAILURE(job.Start(GetParam(), /*sync=*/true));
  auto& params = job.params;
  auto& clients = job.clients;
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(clients[w]->Pull(*params[w]).ok());
    for (float& g : params[w]->grads()) g = 0.5f;
    params[w]->SetTouchedRows(1, {7});
    auto pushed = clients[w]->Push(*params[w], 2);
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    EXPECT_FALSE(pushed->dropped);
  }
  params[0]->mutable_rows_to_pull(1).clear();
  params[0]->set_pulls_rows(true);
  auto sparse = clients[0]->Pull(*params[0]);
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  EXPECT_EQ(sparse->global_step, 1);
  EXPECT_EQ(sparse->bytes, (64 * 100 + 16) * 4);
  auto whole = clients[1]->Pull(*params[1]);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->global_step, 1);
  for (const Handle dense : {0, 2}) {
    const auto a = params[0]->value(dense), b = params[1]->value(dense);
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << "dense variable " << dense;
  }
  for (const LoopbackPs& task : job.ps) EXPECT_EQ(task.state().global_step(), 1);
  // The next step goes through on every task: each learnt the step its push is for.
  for (int w = 0; w < 2; ++w) {
    auto pushed = clients[w]->Push(*params[w], 2);
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    EXPECT_FALSE(pushed->dropped) << "worker " << w;
  }
  EXPECT_EQ(job.ps[0].state().global_step(), 2);
}

// The bulk channel through shared memory (core/shm_stream.h) carries the same calls as over TCP:
// the same values and steps, async and sync, early sends included.
TEST(PsClientSharedMemory, TrainsExactlyAsOverTcp) {
  for (bool sync : {false, true}) {
    const Outcome tcp = Train(Transport::kBulk, sync, 2, {false, true}, 3);
    const Outcome shm = Train(Transport::kBulk, sync, 2, {false, true}, 3, true);
    EXPECT_EQ(shm.steps, tcp.steps) << sync;
    EXPECT_EQ(shm.values, tcp.values) << sync;
  }
}

// A task whose socket this worker cannot reach (another host's path, or gone) is reached over TCP.
TEST(PsClientSharedMemory, ASocketOutOfReachFallsBackToTcp) {
  const std::string path = LocalSocket(true, 7);
  LoopbackPs ps(TransportSecurity(), 0, true, path);
  ASSERT_TRUE(ps.started());
  std::filesystem::remove(path);  // as if the ps were on another host
  auto params = MakeParams();
  params->Initialize(3);
  auto client = PsClient::Create(Options(Transport::kBulk, {ps.address()}, 0, 1, false), *params);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Prepare(*params, true).ok());
  ASSERT_TRUE((*client)->Pull(*params).ok());
  EXPECT_EQ(ps.bulk_connections(), 1);
  EXPECT_EQ(ps.local_bulk_connections(), 0);
}

INSTANTIATE_TEST_SUITE_P(Transports, PsClientEarlySend,
                         ::testing::Values(Transport::kBulk, Transport::kGrpc), TransportName);
INSTANTIATE_TEST_SUITE_P(Transports, PsClientTest,
                         ::testing::Values(Transport::kBulk, Transport::kGrpc), TransportName);

}  // namespace
}  // namespace psflow
