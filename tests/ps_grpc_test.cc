// The ps service and the worker's PsClient over real gRPC on loopback, in one process: values
// pulled and pushed exactly, placement across two ps tasks, chief/non-chief start-up, errors.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ps/ps_service.h"
#include "worker/ps_client.h"

namespace psflow {
namespace {

using std::chrono::milliseconds;

class PsTask {
 public:
  PsTask() : service_(nullptr) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~PsTask() {
    service_.Stop();
    server_->Shutdown();
  }
  bool started() const { return server_ != nullptr && port_ > 0; }
  void Stop() { service_.Stop(); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  const VariableStore& store() const { return service_.store(); }

 private:
  PsService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

std::unique_ptr<nn::ParameterSet> MakeParams() {
  auto p = std::make_unique<nn::ParameterSet>();
  p->Declare("big", {100, 10}, nn::Initializer::Uniform(1.0f));
  p->Declare("mid", {500}, nn::Initializer::Uniform(1.0f));
  p->Declare("small", {3}, nn::Initializer::Zeros());
  p->Finalize();
  return p;
}

PsClient::Options Options(std::vector<std::string> addresses, int timeout_ms = 5000) {
  PsClient::Options o;
  o.ps_addresses = std::move(addresses);
  o.connect_timeout = milliseconds(timeout_ms);
  o.rpc_timeout = milliseconds(timeout_ms);
  return o;
}

TEST(PsGrpc, ChiefInitialisesOthersPullAndPushesApplySgd) {
  PsTask ps0, ps1;
  ASSERT_TRUE(ps0.started() && ps1.started());
  auto chief_params = MakeParams();
  chief_params->Initialize(3);
  auto chief = PsClient::Create(Options({ps0.address(), ps1.address()}), *chief_params);
  ASSERT_TRUE(chief.ok()) << chief.status();
  // Balanced by bytes: "big" (4000 B) on task 0, "mid" (2000 B) and "small" (12 B) on task 1.
  EXPECT_EQ((*chief)->bytes_per_task(), (std::vector<int64_t>{4000, 2012}));

  // The other worker starts first and waits for the chief without failing.
  auto other_params = MakeParams();
  absl::Status waited;
  std::thread other([&] {
    auto client = PsClient::Create(Options({ps0.address(), ps1.address()}), *other_params);
    waited =
        client.ok() ? (*client)->Prepare(*other_params, /*is_chief=*/false, 0.5f) : client.status();
    if (waited.ok()) waited = (*client)->Pull(*other_params).status();
  });
  std::this_thread::sleep_for(milliseconds(200));
  ASSERT_TRUE((*chief)->Prepare(*chief_params, /*is_chief=*/true, 0.5f).ok());
  other.join();
  ASSERT_TRUE(waited.ok()) << waited;
  EXPECT_TRUE(std::equal(chief_params->values().begin(), chief_params->values().end(),
                         other_params->values().begin()));

  // Push gradients of 2.0 everywhere: every value drops by lr * 2 = 1.0, on both tasks.
  const std::vector<float> before(chief_params->values().begin(), chief_params->values().end());
  for (float& g : chief_params->grads()) g = 2.0f;
  auto pushed = (*chief)->Push(*chief_params, 0, 10);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->global_step, 1);
  EXPECT_EQ(pushed->bytes, (1000 + 500 + 3) * 4);
  auto pulled = (*chief)->Pull(*chief_params);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->global_step, 1);
  for (const auto& d : chief_params->descs()) {
    for (int64_t i = 0; i < d.size; ++i) {
      ASSERT_EQ(chief_params->values()[d.offset + i], before[d.offset + i] - 1.0f) << d.name;
    }
  }
  EXPECT_EQ(ps0.store().global_step(), 1);
  EXPECT_EQ(ps1.store().global_step(), 1);

  // A restarted chief finds the variables and leaves them alone.
  auto again = MakeParams();
  again->Initialize(99);
  auto chief2 = PsClient::Create(Options({ps0.address(), ps1.address()}), *again);
  ASSERT_TRUE((*chief2)->Prepare(*again, true, 0.5f).ok());
  ASSERT_TRUE((*chief2)->Pull(*again).ok());
  EXPECT_TRUE(
      std::equal(again->values().begin(), again->values().end(), chief_params->values().begin()));
}

// Calls WaitReady with a 20 s timeout on another thread; `done` flips when it answers.
struct ParkedWait {
  explicit ParkedWait(const std::string& address) {
    thread = std::thread([this, address] {
      auto stub = proto::ParameterServer::NewStub(
          grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
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
  PsTask ps;
  ASSERT_TRUE(ps.started());
  const auto start = std::chrono::steady_clock::now();
  {
    ParkedWait wait(ps.address());
    std::this_thread::sleep_for(milliseconds(300));
    EXPECT_FALSE(wait.done) << "answered before the variables existed";
    auto params = MakeParams();
    auto chief = PsClient::Create(Options({ps.address()}), *params);
    ASSERT_TRUE((*chief)->Prepare(*params, true, 0.1f).ok());
  }  // joins the waiter
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15))
      << "the waiter sat out its timeout instead of being released by Initialize";
}

TEST(PsGrpc, StopReleasesParkedWaitersNotReady) {
  PsTask ps;
  ASSERT_TRUE(ps.started());
  ParkedWait wait(ps.address());
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_FALSE(wait.done);
  ps.Stop();
  wait.thread.join();
  wait.thread = std::thread([] {});  // the destructor joins again
  EXPECT_TRUE(wait.status.ok()) << wait.status.error_message();
  EXPECT_FALSE(wait.response.ready());
}

TEST(PsGrpc, NonChiefGivesUpWhenNoChiefComes) {
  PsTask ps;
  auto params = MakeParams();
  auto client = PsClient::Create(Options({ps.address()}, 500), *params);
  const absl::Status s = (*client)->Prepare(*params, false, 0.1f);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(s.message(), "is the chief (worker 0) running?")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), ps.address())) << s;
}

TEST(PsGrpc, MismatchedModelIsRefusedByPull) {
  PsTask ps;
  auto params = MakeParams();
  auto chief = PsClient::Create(Options({ps.address()}), *params);
  ASSERT_TRUE((*chief)->Prepare(*params, true, 0.1f).ok());
  nn::ParameterSet other;
  other.Declare("big", {10, 100}, nn::Initializer::Zeros());  // same name and size, other shape
  other.Declare("mid", {500}, nn::Initializer::Zeros());
  other.Declare("small", {3}, nn::Initializer::Zeros());
  other.Finalize();
  auto client = PsClient::Create(Options({ps.address()}), other);
  auto pulled = (*client)->Pull(other);
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(pulled.status().message(), "big")) << pulled.status();
  // And its push changes nothing on the ps.
  auto pushed = (*client)->Push(other, 0, 1);
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ps.store().global_step(), 0);
}

}  // namespace
}  // namespace psflow
