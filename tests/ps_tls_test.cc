// Mutual TLS between PsClient and a ps task, over real gRPC on loopback with real certificates of
// a job CA: the same protocol as in plaintext, and no connection for a client or server the CA
// did not sign, or a ps whose certificate does not name the host dialled.
#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/certificates.h"
#include "core/transport_security.h"
#include "ps/loopback_ps.h"
#include "worker/bulk_link.h"
#include "worker/ps_client.h"

namespace psflow {
namespace {

using std::chrono::milliseconds;

struct Job {
  CertificateAuthority ca = CertificateAuthority::Create("job", absl::Hours(1)).value();

  // Security for a replica whose certificate names `dns` and `ips`, signed by `signer` (this
  // job's CA unless given).
  TransportSecurity Replica(std::vector<std::string> dns, std::vector<std::string> ips,
                            const CertificateAuthority* signer = nullptr) const {
    const PemCertificate own = (signer != nullptr ? signer : &ca)
                                   ->Issue({.common_name = "replica",
                                            .dns_names = std::move(dns),
                                            .ip_addresses = std::move(ips)},
                                           absl::Hours(1))
                                   .value();
    return TransportSecurity::MutualTls(ca.pem().certificate, own);
  }
};

std::unique_ptr<nn::ParameterSet> MakeTlsParams() {
  auto p = std::make_unique<nn::ParameterSet>();
  p->Declare("w", {64, 16}, nn::Initializer::Uniform(1.0f));
  p->Declare("b", {16}, nn::Initializer::Zeros());
  p->Finalize();
  return p;
}

PsClient::Options Options(const std::string& address, TransportSecurity security, int timeout_ms) {
  PsClient::Options o;
  o.ps_addresses = {address};
  o.connect_timeout = milliseconds(timeout_ms);
  o.rpc_timeout = milliseconds(timeout_ms);
  o.startup_timeout = milliseconds(timeout_ms);  // a refused handshake fails at once
  o.training.optimizer.set_name("sgd");
  o.training.optimizer.set_learning_rate(0.5f);
  o.training.sync.set_total_workers(1);
  o.security = std::move(security);
  return o;
}

// Prepare as the chief; the error, or OK.
absl::Status PrepareChief(const std::string& address, TransportSecurity security) {
  auto params = MakeTlsParams();
  auto client = PsClient::Create(Options(address, std::move(security), 700), *params);
  if (!client.ok()) return client.status();
  return (*client)->Prepare(*params, /*is_chief=*/true);
}

TEST(PsTls, PushAndPullOverMutualTlsApplySgdAsInPlaintext) {
  const Job job;
  LoopbackPs ps(job.Replica({"localhost"}, {"127.0.0.1"}));
  ASSERT_TRUE(ps.started());
  auto params = MakeTlsParams();
  params->Initialize(5);
  auto chief =
      PsClient::Create(Options(ps.address(), job.Replica({"worker-0"}, {}), 5000), *params);
  ASSERT_TRUE(chief.ok()) << chief.status();
  ASSERT_TRUE((*chief)->Prepare(*params, true).ok());
  std::vector<float> before(params->value(0).begin(), params->value(0).end());
  for (float& g : params->grad(0)) g = 2.0f;
  for (float& g : params->grad(1)) g = 2.0f;
  auto pushed = (*chief)->Push(*params, 1);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->bytes, (64 * 16 + 16) * 4);
  ASSERT_TRUE((*chief)->Pull(*params).ok());
  for (size_t i = 0; i < before.size(); ++i) ASSERT_EQ(params->value(0)[i], before[i] - 1.0f);
  EXPECT_EQ(ps.state().global_step(), 1);
  EXPECT_EQ(ps.state().bytes(), (64 * 16 + 16) * 4);
  // The tensor bytes went on the bulk channel, under TLS too.
  EXPECT_EQ(ps.bulk_connections(), 1);
}

// The other workers start first and wait (a parked WaitReady) for the chief to initialise the ps:
// the answer crosses from the chief's connection to theirs.
TEST(PsTls, WorkersWaitingForTheChiefAreAnsweredOverTls) {
  const Job job;
  LoopbackPs ps(job.Replica({"localhost"}, {"127.0.0.1"}));
  ASSERT_TRUE(ps.started());
  std::vector<absl::Status> waited(3);
  std::vector<std::jthread> others;  // after what they write; joined on any return
  for (int w = 0; w < 3; ++w) {
    others.emplace_back([&, w] {
      auto params = MakeTlsParams();
      auto client = PsClient::Create(
          Options(ps.address(), job.Replica({absl::StrCat("worker-", w + 1)}, {}), 20000), *params);
      waited[w] = client.ok() ? (*client)->Prepare(*params, false) : client.status();
    });
  }
  std::this_thread::sleep_for(milliseconds(300));
  ASSERT_TRUE(PrepareChief(ps.address(), job.Replica({"worker-0"}, {})).ok());
  for (std::jthread& t : others) t.join();
  for (const absl::Status& s : waited) EXPECT_TRUE(s.ok()) << s;
}

TEST(PsTls, NoConnectionWithoutACertificateOfTheJobsCa) {
  const Job job;
  const Job other;
  LoopbackPs ps(job.Replica({"localhost"}, {"127.0.0.1"}));
  ASSERT_TRUE(ps.started());
  // Plaintext to a TLS ps; a certificate another CA signed (it trusts the job CA, so only the
  // server can refuse it).
  for (const TransportSecurity& client :
       {TransportSecurity(), job.Replica({"worker-0"}, {}, &other.ca)}) {
    const absl::Status s = PrepareChief(ps.address(), client);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    // The ps ends the handshake: the client sees its connection closed; a plaintext one is told
    // what that likely means.
    EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat(ps.address(), ": Socket closed"))) << s;
    EXPECT_EQ(absl::StrContains(s.message(),
                                "a ps serving mutual TLS closes plaintext "
                                "connections so: give this task --tls_ca"),
              !client.tls())
        << s;
  }
  EXPECT_EQ(ps.state().bytes(), 0);  // never initialised
}

TEST(PsTls, NoConnectionToAPsWhoseCertificateDoesNotNameTheHostDialled) {
  const Job job;
  const Job other;
  // Signed by the job CA but for another host; a ps of another CA naming the right host.
  LoopbackPs wrong_host(job.Replica({"ps-1.team-a.svc"}, {"10.0.0.1"}));
  LoopbackPs wrong_ca(job.Replica({"localhost"}, {"127.0.0.1"}, &other.ca));
  ASSERT_TRUE(wrong_host.started() && wrong_ca.started());
  const absl::Status host = PrepareChief(wrong_host.address(), job.Replica({"worker-0"}, {}));
  EXPECT_EQ(host.code(), absl::StatusCode::kUnavailable) << host;
  EXPECT_TRUE(absl::StrContains(host.message(), "Peer name 127.0.0.1 is not in peer certificate"))
      << host;
  const absl::Status ca = PrepareChief(wrong_ca.address(), job.Replica({"worker-0"}, {}));
  EXPECT_EQ(ca.code(), absl::StatusCode::kUnavailable) << ca;
  EXPECT_TRUE(absl::StrContains(ca.message(), "certificate verify failed")) << ca;
  EXPECT_EQ(wrong_host.state().bytes(), 0);
  EXPECT_EQ(wrong_ca.state().bytes(), 0);
}

// The bulk channel trusts exactly what gRPC trusts: no link without a certificate of the job's CA
// on both sides, nor to a ps whose certificate does not name the host dialled.
TEST(PsTls, TheBulkChannelRefusesWhatGrpcRefuses) {
  const Job job;
  const Job other;
  LoopbackPs ps(job.Replica({"localhost"}, {"127.0.0.1"}));
  LoopbackPs wrong_host(job.Replica({"ps-1.team-a.svc"}, {"10.0.0.1"}));
  ASSERT_GT(ps.bulk_port(), 0);
  ASSERT_GT(wrong_host.bulk_port(), 0);
  const auto soon = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(10); };
  const auto client = [](const TransportSecurity& security) {
    return BulkTlsContext::Make(security, BulkTlsContext::Role::kClient).value();
  };
  // The job's worker: a link.
  auto good =
      BulkLink::Connect("127.0.0.1", ps.bulk_port(), soon(), client(job.Replica({"worker-0"}, {})));
  EXPECT_TRUE(good.ok()) << good.status();
  // Plaintext to the TLS port, a worker certificate of another CA, a ps naming another host.
  auto plain = BulkLink::Connect("127.0.0.1", ps.bulk_port(), soon());
  EXPECT_TRUE(absl::IsUnavailable(plain.status())) << plain.status();
  auto foreign = BulkLink::Connect("127.0.0.1", ps.bulk_port(), soon(),
                                   client(job.Replica({"worker-0"}, {}, &other.ca)));
  EXPECT_TRUE(absl::IsUnavailable(foreign.status())) << foreign.status();
  auto host = BulkLink::Connect("127.0.0.1", wrong_host.bulk_port(), soon(),
                                client(job.Replica({"worker-0"}, {})));
  EXPECT_TRUE(absl::IsUnavailable(host.status())) << host.status();
  EXPECT_TRUE(
      absl::StrContains(host.status().message(), "TLS handshake failed: the peer's certificate"))
      << host.status();
}

}  // namespace
}  // namespace psflow
