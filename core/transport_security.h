// How a job's ps tasks and their clients (workers, the chief, evaluators, benchmarks) secure
// their gRPC connections: plaintext, or mutual TLS with certificates of the job's own CA.
//
// Under mutual TLS a ps serves only clients whose certificate its CA signed
// (GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY), and a client trusts only a ps
// whose certificate the same CA signed and whose subjectAltName holds the host of the address it
// dials (the host in TF_CONFIG: a Service DNS name under the operator, 127.0.0.1 under `psflow
// run`); each presents its own certificate to the other.
//
// The files are checked once, at start-up (LoadTlsFiles), so that a bad one ends the process
// with one line naming it before anything serves or connects. Copyable; thread-safe.
#ifndef PSFLOW_CORE_TRANSPORT_SECURITY_H_
#define PSFLOW_CORE_TRANSPORT_SECURITY_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "core/certificates.h"

namespace psflow {

// Paths of a replica's PEM files (the --tls_ca, --tls_cert and --tls_key flags).
struct TlsFiles {
  std::string ca;           // the CA certificate(s) to trust
  std::string certificate;  // this replica's certificate
  std::string private_key;  // its private key
};

class TransportSecurity {
 public:
  // Plaintext: insecure credentials on both ends.
  TransportSecurity() = default;
  // Mutual TLS with `ca` trusted and `own` presented. The PEM text is taken as it is: check it
  // first (LoadTlsFiles does).
  static TransportSecurity MutualTls(std::string ca, PemCertificate own);

  bool tls() const { return tls_; }
  // "mutual TLS" or "plaintext", for start-up lines.
  const char* Describe() const { return tls_ ? "mutual TLS" : "plaintext"; }

  // The PEM text as given (for TLS outside gRPC: core/bulk_stream.h); empty in plaintext.
  const std::string& ca_pem() const { return ca_; }
  const PemCertificate& own_pem() const { return own_; }

  std::shared_ptr<grpc::ServerCredentials> ServerCredentials() const;
  std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() const;

 private:
  bool tls_ = false;
  std::string ca_;
  PemCertificate own_;
};

// Reads and checks the three files: each readable, the CA and certificate PEM certificates, the
// key a PEM private key and the certificate's, the certificate signed by the CA, and both valid
// at `now`. INVALID_ARGUMENT naming the flag, the file and the reason, e.g.
// "--tls_cert /etc/psflow/tls/tls.crt: has expired (notAfter 2026-01-02 03:04:05 UTC)".
absl::StatusOr<TransportSecurity> LoadTlsFiles(const TlsFiles& files, absl::Time now = absl::Now());

// The one way to open a channel to a ps task at `address` ("host:port"): its credentials come
// from `security`, and under TLS the host is what the ps's certificate must name.
std::shared_ptr<grpc::Channel> OpenPsChannel(const std::string& address,
                                             const TransportSecurity& security,
                                             const grpc::ChannelArguments& args);

}  // namespace psflow

#endif  // PSFLOW_CORE_TRANSPORT_SECURITY_H_
