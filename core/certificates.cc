#include "core/certificates.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <memory>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/openssl_errors.h"
#include "core/status_macros.h"

namespace psflow {
namespace {

template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Store = std::unique_ptr<X509_STORE, Deleter<X509_STORE, X509_STORE_free>>;
using StoreCtx = std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX, X509_STORE_CTX_free>>;
using Names = std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES, GENERAL_NAMES_free>>;
using BasicConstraints =
    std::unique_ptr<BASIC_CONSTRAINTS, Deleter<BASIC_CONSTRAINTS, BASIC_CONSTRAINTS_free>>;

absl::Status Internal(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", OpenSslErrors()));
}

Bio ReadBio(absl::string_view text) {
  return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

absl::StatusOr<Cert> ParseCertificate(absl::string_view pem) {
  Bio bio = ReadBio(pem);
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (cert == nullptr) return absl::InvalidArgumentError("is not a PEM certificate");
  return cert;
}

absl::StatusOr<Key> ParseKey(absl::string_view pem) {
  Bio bio = ReadBio(pem);
  Key key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (key == nullptr) return absl::InvalidArgumentError("is not a PEM private key");
  return key;
}

absl::StatusOr<std::string> ToPem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(bio.get(), cert) != 1) return Internal("writing a certificate");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

absl::StatusOr<std::string> ToPem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Internal("writing a private key");
  }
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

absl::StatusOr<Key> NewKey() {
  Key key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (key == nullptr) return Internal("generating an EC P-256 key");
  return key;
}

// "2026-01-02 03:04:05 UTC"
std::string FormatAsn1Time(const ASN1_TIME* t) {
  tm parts{};
  if (ASN1_TIME_to_tm(t, &parts) != 1) return "an unreadable time";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromTM(parts, absl::UTCTimeZone()),
                          absl::UTCTimeZone());
}

// A certificate with a random 127-bit serial, `subject` as its subject name, `key`'s public key,
// valid from `not_before` to `not_after`; signed by nobody yet.
absl::StatusOr<Cert> NewCertificate(absl::string_view common_name, EVP_PKEY* key,
                                    absl::Time not_before, absl::Time not_after) {
  Cert cert(X509_new());
  if (cert == nullptr || X509_set_version(cert.get(), X509_VERSION_3) != 1) {
    return Internal("making a certificate");
  }
  std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>> serial(BN_new());
  if (serial == nullptr || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return Internal("making a serial number");
  }
  if (ASN1_TIME_set(X509_getm_notBefore(cert.get()), absl::ToTimeT(not_before)) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(cert.get()), absl::ToTimeT(not_after)) == nullptr) {
    return Internal("setting the validity");
  }
  const std::string cn(common_name);
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1 ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return Internal("setting the subject");
  }
  return cert;
}

// Adds the extension `nid` = `value` (OpenSSL's config syntax), with `issuer` for the authority
// key identifier.
absl::Status AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return Internal(absl::StrCat("making extension ", OBJ_nid2sn(nid)));
  const int added = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (added != 1) return Internal(absl::StrCat("adding extension ", OBJ_nid2sn(nid)));
  return absl::OkStatus();
}

bool ValidDnsName(absl::string_view name) {
  if (name.empty() || name.size() > 253 || name.front() == '.' || name.back() == '.') return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '.') return false;
  }
  return true;
}

absl::Status AddSubjectAltNames(X509* cert, const CertificateSubject& subject) {
  Names names(sk_GENERAL_NAME_new_null());
  for (const std::string& dns : subject.dns_names) {
    if (!ValidDnsName(dns)) {
      return absl::InvalidArgumentError(absl::StrCat("\"", dns, "\" is not a DNS name"));
    }
    GENERAL_NAME* n = GENERAL_NAME_new();
    ASN1_IA5STRING* text = ASN1_IA5STRING_new();
    ASN1_STRING_set(text, dns.data(), static_cast<int>(dns.size()));
    GENERAL_NAME_set0_value(n, GEN_DNS, text);
    sk_GENERAL_NAME_push(names.get(), n);
  }
  for (const std::string& ip : subject.ip_addresses) {
    ASN1_OCTET_STRING* octets = a2i_IPADDRESS(ip.c_str());
    ERR_clear_error();
    if (octets == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("\"", ip, "\" is not an IP address"));
    }
    GENERAL_NAME* n = GENERAL_NAME_new();
    GENERAL_NAME_set0_value(n, GEN_IPADD, octets);
    sk_GENERAL_NAME_push(names.get(), n);
  }
  if (X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) != 1) {
    return Internal("adding subjectAltName");
  }
  return absl::OkStatus();
}

absl::Status Sign(X509* cert, EVP_PKEY* key) {
  if (X509_sign(cert, key, EVP_sha256()) <= 0) return Internal("signing a certificate");
  return absl::OkStatus();
}

bool IsCa(X509* cert) {
  BasicConstraints bc(static_cast<BASIC_CONSTRAINTS*>(
      X509_get_ext_d2i(cert, NID_basic_constraints, nullptr, nullptr)));
  return bc != nullptr && bc->ca != 0;
}

absl::Status CheckValidity(absl::Duration validity) {
  if (validity <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("a certificate's validity must be > 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CertificateAuthority> CertificateAuthority::Create(absl::string_view common_name,
                                                                  absl::Duration validity,
                                                                  absl::Time now) {
  if (common_name.empty()) return absl::InvalidArgumentError("a CA needs a common name");
  RETURN_IF_ERROR(CheckValidity(validity));
  ASSIGN_OR_RETURN(Key key, NewKey());
  ASSIGN_OR_RETURN(Cert cert,
                   NewCertificate(common_name, key.get(), now - kBackdate, now + validity));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1) {
    return Internal("setting the issuer");
  }
  RETURN_IF_ERROR(
      AddExtension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  RETURN_IF_ERROR(
      AddExtension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
  RETURN_IF_ERROR(AddExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash"));
  RETURN_IF_ERROR(Sign(cert.get(), key.get()));
  PemCertificate pem;
  ASSIGN_OR_RETURN(pem.certificate, ToPem(cert.get()));
  ASSIGN_OR_RETURN(pem.private_key, ToPem(key.get()));
  return CertificateAuthority(std::move(pem));
}

absl::StatusOr<CertificateAuthority> CertificateAuthority::FromPem(PemCertificate pem) {
  auto cert = ParseCertificate(pem.certificate);
  if (!cert.ok()) return absl::InvalidArgumentError("the CA certificate is not PEM");
  auto key = ParseKey(pem.private_key);
  if (!key.ok()) return absl::InvalidArgumentError("the CA key is not a PEM private key");
  if (X509_check_private_key(cert->get(), key->get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("the CA key is not the CA certificate's");
  }
  if (!IsCa(cert->get())) {
    return absl::InvalidArgumentError("the CA certificate is not a CA's (no CA:TRUE)");
  }
  return CertificateAuthority(std::move(pem));
}

absl::StatusOr<PemCertificate> CertificateAuthority::Issue(const CertificateSubject& subject,
                                                           absl::Duration validity,
                                                           absl::Time now) const {
  if (subject.common_name.empty()) {
    return absl::InvalidArgumentError("a certificate needs a common name");
  }
  if (subject.dns_names.empty() && subject.ip_addresses.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("certificate \"", subject.common_name, "\" names no DNS name or address"));
  }
  RETURN_IF_ERROR(CheckValidity(validity));
  ASSIGN_OR_RETURN(Cert ca, ParseCertificate(pem_.certificate));
  ASSIGN_OR_RETURN(Key ca_key, ParseKey(pem_.private_key));
  tm ca_end{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(ca.get()), &ca_end) != 1) {
    return Internal("reading the CA's validity");
  }
  const absl::Time ca_not_after = absl::FromTM(ca_end, absl::UTCTimeZone());
  if (ca_not_after <= now) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the CA has expired (notAfter ", FormatAsn1Time(X509_get0_notAfter(ca.get())), ")"));
  }
  ASSIGN_OR_RETURN(Key key, NewKey());
  ASSIGN_OR_RETURN(Cert cert, NewCertificate(subject.common_name, key.get(), now - kBackdate,
                                             std::min(now + validity, ca_not_after)));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(ca.get())) != 1) {
    return Internal("setting the issuer");
  }
  RETURN_IF_ERROR(AddExtension(cert.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE"));
  RETURN_IF_ERROR(AddExtension(cert.get(), ca.get(), NID_key_usage, "critical,digitalSignature"));
  RETURN_IF_ERROR(AddExtension(cert.get(), ca.get(), NID_ext_key_usage, "serverAuth,clientAuth"));
  RETURN_IF_ERROR(AddExtension(cert.get(), ca.get(), NID_subject_key_identifier, "hash"));
  RETURN_IF_ERROR(AddExtension(cert.get(), ca.get(), NID_authority_key_identifier, "keyid:always"));
  RETURN_IF_ERROR(AddSubjectAltNames(cert.get(), subject));
  RETURN_IF_ERROR(Sign(cert.get(), ca_key.get()));
  PemCertificate out;
  ASSIGN_OR_RETURN(out.certificate, ToPem(cert.get()));
  ASSIGN_OR_RETURN(out.private_key, ToPem(key.get()));
  return out;
}

absl::Status CheckCertificatePem(absl::string_view pem) { return ParseCertificate(pem).status(); }

absl::Status CheckPrivateKeyPem(absl::string_view pem) { return ParseKey(pem).status(); }

absl::Status CheckKeyMatchesCertificate(absl::string_view certificate_pem,
                                        absl::string_view key_pem) {
  ASSIGN_OR_RETURN(Cert cert, ParseCertificate(certificate_pem));
  ASSIGN_OR_RETURN(Key key, ParseKey(key_pem));
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("is not the private key of the certificate");
  }
  return absl::OkStatus();
}

absl::Status VerifyCertificate(absl::string_view ca_pem, absl::string_view certificate_pem,
                               absl::Time now) {
  ASSIGN_OR_RETURN(Cert cert, ParseCertificate(certificate_pem));
  Store store(X509_STORE_new());
  Bio bio = ReadBio(ca_pem);
  int trusted = 0;
  while (Cert ca{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)}) {
    if (X509_STORE_add_cert(store.get(), ca.get()) != 1) return Internal("trusting the CA");
    ++trusted;
  }
  ERR_clear_error();
  if (trusted == 0) return absl::InvalidArgumentError("the CA file holds no PEM certificate");
  StoreCtx ctx(X509_STORE_CTX_new());
  if (ctx == nullptr || X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), nullptr) != 1) {
    return Internal("setting up verification");
  }
  X509_STORE_CTX_set_time(ctx.get(), 0, absl::ToTimeT(now));
  if (X509_verify_cert(ctx.get()) == 1) return absl::OkStatus();
  ERR_clear_error();
  const int error = X509_STORE_CTX_get_error(ctx.get());
  X509* failing = X509_STORE_CTX_get_current_cert(ctx.get());
  if (failing == nullptr) failing = cert.get();
  switch (error) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return absl::InvalidArgumentError(
          absl::StrCat(failing == cert.get() ? "has expired" : "chains to a CA that has expired",
                       " (notAfter ", FormatAsn1Time(X509_get0_notAfter(failing)), ")"));
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return absl::InvalidArgumentError(
          absl::StrCat(failing == cert.get() ? "is not valid yet" : "chains to a CA not valid yet",
                       " (notBefore ", FormatAsn1Time(X509_get0_notBefore(failing)), ")"));
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
      return absl::InvalidArgumentError("is not signed by the CA");
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("does not verify against the CA: ", X509_verify_cert_error_string(error)));
  }
}

absl::StatusOr<std::vector<std::string>> SubjectAltNames(absl::string_view certificate_pem) {
  ASSIGN_OR_RETURN(Cert cert, ParseCertificate(certificate_pem));
  Names names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
  std::vector<std::string> out;
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names.get(), i);
    if (n->type == GEN_DNS) {
      const ASN1_STRING* s = n->d.dNSName;
      out.push_back(absl::StrCat(
          "DNS:", absl::string_view(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                    ASN1_STRING_length(s))));
    } else if (n->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = n->d.iPAddress;
      const int length = ASN1_STRING_length(ip);
      char text[INET6_ADDRSTRLEN] = "?";
      if (length == 4 || length == 16) {
        inet_ntop(length == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(ip), text, sizeof(text));
      }
      out.push_back(absl::StrCat("IP:", text));
    } else {
      out.push_back("other");
    }
  }
  return out;
}

bool NamesHost(const std::vector<std::string>& subject_alt_names, absl::string_view host) {
  absl::ConsumePrefix(&host, "[");
  absl::ConsumeSuffix(&host, "]");
  // An address is compared as its bytes: "::1" and "0:0:0:0:0:0:0:1" are one address.
  const auto address = [](absl::string_view text) -> std::optional<std::string> {
    const std::string s(text);
    std::array<unsigned char, 16> bytes{};
    if (inet_pton(AF_INET, s.c_str(), bytes.data()) == 1)
      return std::string(bytes.begin(), bytes.begin() + 4);
    if (inet_pton(AF_INET6, s.c_str(), bytes.data()) == 1)
      return std::string(bytes.begin(), bytes.end());
    return std::nullopt;
  };
  const std::optional<std::string> host_address = address(host);
  for (absl::string_view name : subject_alt_names) {
    if (host_address) {
      if (absl::ConsumePrefix(&name, "IP:") && address(name) == host_address) return true;
      continue;
    }
    if (!absl::ConsumePrefix(&name, "DNS:")) continue;
    if (absl::EqualsIgnoreCase(name, host)) return true;
    if (absl::ConsumePrefix(&name, "*.")) {
      const size_t dot = host.find('.');
      if (dot != absl::string_view::npos && dot > 0 &&
          absl::EqualsIgnoreCase(host.substr(dot + 1), name)) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace psflow
