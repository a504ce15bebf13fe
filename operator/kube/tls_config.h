// The TLS side of a ClusterConfig, as an OpenSSL context setup for cpprestsdk's connections.
#ifndef PSFLOW_OPERATOR_KUBE_TLS_CONFIG_H_
#define PSFLOW_OPERATOR_KUBE_TLS_CONFIG_H_

#include <functional>

#include "absl/status/statusor.h"
#include "operator/kube/kubeconfig.h"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace psflow::kube {

using SslContextSetup = std::function<void(boost::asio::ssl::context&)>;

// Checks the config's PEMs now (INVALID_ARGUMENT naming the certificate authority, client
// certificate or client key that OpenSSL rejects, a key not the certificate's included)
// and returns the setup each new connection's context gets: when ca_pem is set, its CAs are the
// only ones trusted; the client certificate chain and key when set. The setup never throws.
// Server certificate and host name verification (and SNI) are cpprestsdk's, on unless
// insecure_skip_tls_verify.
absl::StatusOr<SslContextSetup> MakeSslContextSetup(const ClusterConfig& config);

}  // namespace psflow::kube

#endif  // PSFLOW_OPERATOR_KUBE_TLS_CONFIG_H_
