#include "core/transport_security.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/read_file.h"
#include "core/status_macros.h"

namespace psflow {
namespace {

// "--tls_cert <path>: <reason>"
absl::Status FileError(const char* flag, const std::string& path, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": ", reason));
}

absl::StatusOr<std::string> Read(const char* flag, const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    // ReadFile says "cannot read <path>: <why>"; the flag goes first here.
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", text.status().message()));
  }
  return text;
}

}  // namespace

TransportSecurity TransportSecurity::MutualTls(std::string ca, PemCertificate own) {
  TransportSecurity s;
  s.tls_ = true;
  s.ca_ = std::move(ca);
  s.own_ = std::move(own);
  return s;
}

std::shared_ptr<grpc::ServerCredentials> TransportSecurity::ServerCredentials() const {
  if (!tls_) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = ca_;
  options.pem_key_cert_pairs.push_back({own_.private_key, own_.certificate});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> TransportSecurity::ChannelCredentials() const {
  if (!tls_) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ca_;
  options.pem_private_key = own_.private_key;
  options.pem_cert_chain = own_.certificate;
  return grpc::SslCredentials(options);
}

absl::StatusOr<TransportSecurity> LoadTlsFiles(const TlsFiles& files, absl::Time now) {
  ASSIGN_OR_RETURN(std::string ca, Read("--tls_ca", files.ca));
  ASSIGN_OR_RETURN(std::string certificate, Read("--tls_cert", files.certificate));
  ASSIGN_OR_RETURN(std::string key, Read("--tls_key", files.private_key));
  if (absl::Status s = CheckCertificatePem(ca); !s.ok()) {
    return FileError("--tls_ca", files.ca, s.message());
  }
  if (absl::Status s = CheckCertificatePem(certificate); !s.ok()) {
    return FileError("--tls_cert", files.certificate, s.message());
  }
  if (absl::Status s = CheckPrivateKeyPem(key); !s.ok()) {
    return FileError("--tls_key", files.private_key, s.message());
  }
  if (absl::Status s = CheckKeyMatchesCertificate(certificate, key); !s.ok()) {
    return FileError("--tls_key", files.private_key,
                     absl::StrCat(s.message(), " in ", files.certificate));
  }
  if (absl::Status s = VerifyCertificate(ca, certificate, now); !s.ok()) {
    return FileError("--tls_cert", files.certificate,
                     absl::StrCat(s.message(), " (--tls_ca ", files.ca, ")"));
  }
  return TransportSecurity::MutualTls(std::move(ca), {std::move(certificate), std::move(key)});
}

std::shared_ptr<grpc::Channel> OpenPsChannel(const std::string& address,
                                             const TransportSecurity& security,
                                             const grpc::ChannelArguments& args) {
  return grpc::CreateCustomChannel(address, security.ChannelCredentials(), args);
}

}  // namespace psflow
