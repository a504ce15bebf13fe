#include "operator/kube/tls_config.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/ssl/context.hpp>
#include <string>

#include "absl/strings/str_cat.h"

namespace psflow::kube {
namespace {

struct Pems {
  std::string ca;
  std::string cert;
  std::string key;
};

// Applies `pems` to `context`; the first error, named, or "" when all went in.
std::string Apply(const Pems& pems, boost::asio::ssl::context& context) {
  boost::system::error_code error;
  if (!pems.ca.empty()) {
    // Trust exactly the configured CAs, as client-go does, not the system's as well.
    SSL_CTX_set_cert_store(context.native_handle(), X509_STORE_new());
    context.add_certificate_authority(boost::asio::buffer(pems.ca), error);
    if (error) return absl::StrCat("certificate authority: ", error.message());
  }
  if (!pems.cert.empty()) {
    context.use_certificate_chain(boost::asio::buffer(pems.cert), error);
    if (error) return absl::StrCat("client certificate: ", error.message());
    context.use_private_key(boost::asio::buffer(pems.key), boost::asio::ssl::context::pem, error);
    // OpenSSL also checks here that the key is the certificate's ("key values mismatch").
    if (error) return absl::StrCat("client key: ", error.message());
  }
  return "";
}

}  // namespace

absl::StatusOr<SslContextSetup> MakeSslContextSetup(const ClusterConfig& config) {
  auto pems = std::make_shared<const Pems>(
      Pems{config.ca_pem, config.client_cert_pem, config.client_key_pem});
  std::string problem;
  try {
    boost::asio::ssl::context scratch(boost::asio::ssl::context::tls_client);
    problem = Apply(*pems, scratch);
  } catch (const std::exception& e) {
    problem = absl::StrCat("OpenSSL: ", e.what());
  }
  if (!problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(config.source, ": ", problem));
  }
  return SslContextSetup([pems](boost::asio::ssl::context& context) {
    // Checked above; a failure here would fail the handshake, which reports it.
    Apply(*pems, context);
  });
}

}  // namespace psflow::kube
