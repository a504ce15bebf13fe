// X.509 certificates for mutual TLS between a job's replicas, made and checked with OpenSSL's
// libcrypto: a per-job certificate authority, one leaf per replica, and the checks a replica
// runs on its files before it serves or connects.
//
// Every key is EC P-256 and every signature ECDSA with SHA-256. The CA is self-signed with
// basicConstraints CA:TRUE (pathlen 0) and keyUsage keyCertSign, cRLSign; a leaf has CA:FALSE,
// keyUsage digitalSignature and extKeyUsage serverAuth + clientAuth (each replica both serves and
// connects), its subjectAltName the DNS names and IP addresses it is reached at, and a validity
// that never outlasts its CA's. Validity starts kBackdate before now (clocks of a cluster's
// nodes differ). Keys travel as unencrypted PKCS#8 PEM ("BEGIN PRIVATE KEY"): whoever holds the
// text holds the key, so files and Secrets that carry one must be readable by their owner only.
//
// Thread-safe: no state beyond the PEM text.
#ifndef PSFLOW_CORE_CERTIFICATES_H_
#define PSFLOW_CORE_CERTIFICATES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace psflow {

inline constexpr absl::Duration kBackdate = absl::Minutes(5);
// What the operator and `psflow run` give a job's CA and leaves: a year.
inline constexpr absl::Duration kDefaultCertificateValidity = absl::Hours(24 * 365);

// A certificate and its private key, both PEM.
struct PemCertificate {
  std::string certificate;
  std::string private_key;
};

// Who a leaf certificate names: subject common name and subjectAltName entries. Each DNS name is
// letters, digits, '-' and '.' (a wildcard is not made); each IP address IPv4 or IPv6 text.
struct CertificateSubject {
  std::string common_name;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
};

class CertificateAuthority {
 public:
  // A new CA with a fresh key, named `common_name`, valid from now - kBackdate to now + validity.
  // INVALID_ARGUMENT for an empty name or a validity not > 0; INTERNAL when OpenSSL fails.
  static absl::StatusOr<CertificateAuthority> Create(absl::string_view common_name,
                                                     absl::Duration validity,
                                                     absl::Time now = absl::Now());
  // The CA whose certificate and key these are (e.g. read back from where they were kept).
  // INVALID_ARGUMENT when either is not PEM, the key is not the certificate's, or the
  // certificate is not a CA's (basicConstraints CA:TRUE).
  static absl::StatusOr<CertificateAuthority> FromPem(PemCertificate pem);

  // The CA's certificate (what every replica trusts) and key (what only the issuer may read).
  const PemCertificate& pem() const { return pem_; }

  // A leaf with a fresh key, signed by this CA, valid from now - kBackdate until the earlier of
  // now + validity and the CA's own end. INVALID_ARGUMENT for an empty common name, no
  // subjectAltName at all, a DNS name or IP address as above, a validity not > 0 or a CA that
  // has expired by `now`.
  absl::StatusOr<PemCertificate> Issue(const CertificateSubject& subject, absl::Duration validity,
                                       absl::Time now = absl::Now()) const;

 private:
  explicit CertificateAuthority(PemCertificate pem) : pem_(std::move(pem)) {}
  PemCertificate pem_;
};

// What a replica checks in its three files before it serves or connects; each error is
// INVALID_ARGUMENT with a reason a user can act on ("is not a PEM certificate", "has expired
// (notAfter 2026-01-02 03:04:05 UTC)", "is not signed by the CA") and names no file: the caller
// knows which it read.
//
// The PEM text holds at least one certificate (the first is the one meant).
absl::Status CheckCertificatePem(absl::string_view pem);
// The PEM text holds a private key.
absl::Status CheckPrivateKeyPem(absl::string_view pem);
// `key_pem` is the private key of `certificate_pem`'s public key.
absl::Status CheckKeyMatchesCertificate(absl::string_view certificate_pem,
                                        absl::string_view key_pem);
// `certificate_pem` chains to a certificate of `ca_pem` (all of its certificates are trusted)
// and every certificate on the way is valid at `now` (X509_verify_cert).
absl::Status VerifyCertificate(absl::string_view ca_pem, absl::string_view certificate_pem,
                               absl::Time now = absl::Now());

// The subjectAltName entries of a PEM certificate, in their order, as "DNS:<name>" and
// "IP:<address>" (others as "other"); INVALID_ARGUMENT when the text is not a certificate.
absl::StatusOr<std::vector<std::string>> SubjectAltNames(absl::string_view certificate_pem);

// Whether `subject_alt_names` (as SubjectAltNames gives them) name `host` as a TLS client checks
// a server's name (RFC 6125): an IP address equal to it when it is one (IPv6 with or without
// brackets), else a DNS name equal to it, letter case aside, or "*.<rest>" when the host is one
// label in front of <rest>.
bool NamesHost(const std::vector<std::string>& subject_alt_names, absl::string_view host);

}  // namespace psflow

#endif  // PSFLOW_CORE_CERTIFICATES_H_
