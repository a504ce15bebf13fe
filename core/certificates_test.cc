#include "core/certificates.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"

namespace psflow {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'780'000'000);  // 2026-05-28

CertificateAuthority NewCa(absl::string_view name = "job-ca",
                           absl::Duration validity = kDefaultCertificateValidity) {
  absl::StatusOr<CertificateAuthority> ca = CertificateAuthority::Create(name, validity, kNow);
  EXPECT_TRUE(ca.ok()) << ca.status();
  return *std::move(ca);
}

CertificateSubject Replica() {
  return {.common_name = "mnist-ps-0",
          .dns_names = {"mnist-ps-0", "mnist-ps-0.team-a", "mnist-ps-0.team-a.svc",
                        "mnist-ps-0.team-a.svc.cluster.local", "localhost"},
          .ip_addresses = {"127.0.0.1", "::1"}};
}

TEST(Certificates, LeafChainsToItsCaWithExactlyTheSubjectAltNamesAsked) {
  const CertificateAuthority ca = NewCa();
  absl::StatusOr<PemCertificate> leaf = ca.Issue(Replica(), absl::Hours(24), kNow);
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  EXPECT_TRUE(absl::StartsWith(leaf->certificate, "-----BEGIN CERTIFICATE-----\n"));
  EXPECT_TRUE(absl::StartsWith(leaf->private_key, "-----BEGIN PRIVATE KEY-----\n"));
  EXPECT_TRUE(VerifyCertificate(ca.pem().certificate, leaf->certificate, kNow).ok());
  EXPECT_TRUE(CheckKeyMatchesCertificate(leaf->certificate, leaf->private_key).ok());
  absl::StatusOr<std::vector<std::string>> names = SubjectAltNames(leaf->certificate);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, (std::vector<std::string>{"DNS:mnist-ps-0", "DNS:mnist-ps-0.team-a",
                                              "DNS:mnist-ps-0.team-a.svc",
                                              "DNS:mnist-ps-0.team-a.svc.cluster.local",
                                              "DNS:localhost", "IP:127.0.0.1", "IP:::1"}));
  // The CA names nothing: it is trusted, never dialled.
  EXPECT_EQ(SubjectAltNames(ca.pem().certificate).value(), std::vector<std::string>{});
}

TEST(Certificates, CertificateOfAnotherCaIsRejected) {
  const CertificateAuthority ca = NewCa("job-a");
  const CertificateAuthority other = NewCa("job-b");
  const PemCertificate leaf = other.Issue(Replica(), absl::Hours(24), kNow).value();
  const absl::Status s = VerifyCertificate(ca.pem().certificate, leaf.certificate, kNow);
  EXPECT_EQ(s, absl::InvalidArgumentError("is not signed by the CA"));
  // ... even when the other CA has the same name: the signature decides, not the name.
  const CertificateAuthority same_name = NewCa("job-a");
  const PemCertificate impostor = same_name.Issue(Replica(), absl::Hours(24), kNow).value();
  EXPECT_EQ(VerifyCertificate(ca.pem().certificate, impostor.certificate, kNow),
            absl::InvalidArgumentError("is not signed by the CA"));
  // A CA is no leaf of another CA either.
  EXPECT_EQ(VerifyCertificate(ca.pem().certificate, other.pem().certificate, kNow),
            absl::InvalidArgumentError("is not signed by the CA"));
}

TEST(Certificates, ValidityIsBackdatedAndEndsWithTheLeafOrItsCa) {
  const CertificateAuthority ca = NewCa("job-ca", absl::Hours(48));
  const PemCertificate day = ca.Issue(Replica(), absl::Hours(24), kNow).value();
  EXPECT_TRUE(VerifyCertificate(ca.pem().certificate, day.certificate, kNow - kBackdate).ok());
  EXPECT_EQ(
      VerifyCertificate(ca.pem().certificate, day.certificate, kNow - kBackdate - absl::Seconds(1)),
      absl::InvalidArgumentError(
          "chains to a CA not valid yet (notBefore 2026-05-28 20:21:40 UTC)"));
  EXPECT_TRUE(VerifyCertificate(ca.pem().certificate, day.certificate,
                                kNow + absl::Hours(24) - absl::Seconds(1))
                  .ok());
  EXPECT_EQ(VerifyCertificate(ca.pem().certificate, day.certificate,
                              kNow + absl::Hours(24) + absl::Seconds(1)),
            absl::InvalidArgumentError("has expired (notAfter 2026-05-29 20:26:40 UTC)"));
  // Asked for a year, the leaf still ends with its CA (which OpenSSL reports first).
  const PemCertificate year = ca.Issue(Replica(), absl::Hours(24 * 365), kNow).value();
  EXPECT_TRUE(VerifyCertificate(ca.pem().certificate, year.certificate,
                                kNow + absl::Hours(48) - absl::Seconds(1))
                  .ok());
  EXPECT_EQ(VerifyCertificate(ca.pem().certificate, year.certificate,
                              kNow + absl::Hours(48) + absl::Seconds(1)),
            absl::InvalidArgumentError(
                "chains to a CA that has expired (notAfter 2026-05-30 20:26:40 UTC)"));
  EXPECT_EQ(ca.Issue(Replica(), absl::Hours(1), kNow + absl::Hours(49)).status(),
            absl::InvalidArgumentError("the CA has expired (notAfter 2026-05-30 20:26:40 UTC)"));
}

TEST(Certificates, KeyOfAnotherCertificateDoesNotMatch) {
  const CertificateAuthority ca = NewCa();
  const PemCertificate a = ca.Issue(Replica(), absl::Hours(24), kNow).value();
  const PemCertificate b = ca.Issue(Replica(), absl::Hours(24), kNow).value();
  EXPECT_EQ(CheckKeyMatchesCertificate(a.certificate, b.private_key),
            absl::InvalidArgumentError("is not the private key of the certificate"));
  EXPECT_EQ(CheckCertificatePem(a.private_key),
            absl::InvalidArgumentError("is not a PEM certificate"));
  EXPECT_EQ(CheckPrivateKeyPem(a.certificate),
            absl::InvalidArgumentError("is not a PEM private key"));
  EXPECT_EQ(CheckPrivateKeyPem(""), absl::InvalidArgumentError("is not a PEM private key"));
}

TEST(Certificates, CaRoundTripsThroughPemAndStillIssuesForItsChain) {
  const CertificateAuthority ca = NewCa();
  absl::StatusOr<CertificateAuthority> again = CertificateAuthority::FromPem(ca.pem());
  ASSERT_TRUE(again.ok()) << again.status();
  const PemCertificate leaf = again->Issue(Replica(), absl::Hours(1), kNow).value();
  EXPECT_TRUE(VerifyCertificate(ca.pem().certificate, leaf.certificate, kNow).ok());

  const CertificateAuthority other = NewCa();
  EXPECT_EQ(CertificateAuthority::FromPem({ca.pem().certificate, other.pem().private_key}).status(),
            absl::InvalidArgumentError("the CA key is not the CA certificate's"));
  EXPECT_EQ(CertificateAuthority::FromPem(leaf).status(),
            absl::InvalidArgumentError("the CA certificate is not a CA's (no CA:TRUE)"));
  EXPECT_EQ(CertificateAuthority::FromPem({"junk", ca.pem().private_key}).status(),
            absl::InvalidArgumentError("the CA certificate is not PEM"));
}

TEST(Certificates, BadRequestsAreRefused) {
  const CertificateAuthority ca = NewCa();
  EXPECT_EQ(CertificateAuthority::Create("", absl::Hours(1), kNow).status(),
            absl::InvalidArgumentError("a CA needs a common name"));
  EXPECT_EQ(CertificateAuthority::Create("x", absl::ZeroDuration(), kNow).status(),
            absl::InvalidArgumentError("a certificate's validity must be > 0"));
  EXPECT_EQ(
      ca.Issue({.common_name = "w", .dns_names = {}, .ip_addresses = {}}, absl::Hours(1), kNow)
          .status(),
      absl::InvalidArgumentError("certificate \"w\" names no DNS name or address"));
  EXPECT_EQ(ca.Issue({.common_name = "w", .dns_names = {"a,DNS:evil"}, .ip_addresses = {}},
                     absl::Hours(1), kNow)
                .status(),
            absl::InvalidArgumentError("\"a,DNS:evil\" is not a DNS name"));
  EXPECT_EQ(ca.Issue({.common_name = "w", .dns_names = {}, .ip_addresses = {"10.0.0.300"}},
                     absl::Hours(1), kNow)
                .status(),
            absl::InvalidArgumentError("\"10.0.0.300\" is not an IP address"));
}

// A server's certificate names the host a client reaches it at, as gRPC and OpenSSL check it.
TEST(Certificates, NamesHostAsATlsClientChecksIt) {
  const std::vector<std::string> sans = {"DNS:localhost",
                                         "DNS:mnist-ps-0.mnist.ml.svc",
                                         "DNS:*.mnist.example",
                                         "IP:127.0.0.1",
                                         "IP:::1",
                                         "other"};
  const std::vector<std::pair<std::string, bool>> rows = {
      {"localhost", true},
      {"LocalHost", true},
      {"mnist-ps-0.mnist.ml.svc", true},
      {"mnist-ps-1.mnist.ml.svc", false},
      {"mnist-ps-0.mnist.ml", false},
      {"ps-0.mnist.example", true},
      {"a.ps-0.mnist.example", false},  // a wildcard covers one label
      {"mnist.example", false},
      {"127.0.0.1", true},
      {"127.0.0.2", false},
      {"::1", true},
      {"[::1]", true},
      {"0:0:0:0:0:0:0:1", true},
      {"10.0.0.1", false},
      {"other", false},
      {"", false},
  };
  for (const auto& [host, named] : rows) EXPECT_EQ(NamesHost(sans, host), named) << host;
  // An address is named only by an IP entry: a DNS entry spelling it does not count.
  EXPECT_FALSE(NamesHost({"DNS:127.0.0.1"}, "127.0.0.1"));
}

}  // namespace
}  // namespace psflow
