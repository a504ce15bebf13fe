#include "operator/local/local_certificates.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "core/file_util.h"
#include "core/log.h"
#include "core/status_macros.h"

namespace psflow::local {
namespace {

absl::Status Unwritable(const std::string& path, int error) {
  return absl::FailedPreconditionError(
      absl::StrCat("cannot write ", path, ": ", std::strerror(error)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalCertificates>> LocalCertificates::Create(
    const std::string& parent, const std::string& job) {
  ASSIGN_OR_RETURN(CertificateAuthority ca,
                   CertificateAuthority::Create(absl::StrCat("psflow run ", job, " CA"),
                                                kDefaultCertificateValidity));
  std::string pattern = absl::StrCat(parent, "/psflow-tls-XXXXXX");
  // mkdtemp makes the folder 0700.
  if (::mkdtemp(pattern.data()) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot make a folder for the TLS certificates in ", parent, ": ", std::strerror(errno)));
  }
  std::unique_ptr<LocalCertificates> certificates(
      new LocalCertificates(std::move(pattern), std::move(ca)));
  RETURN_IF_ERROR(certificates->WritePrivate("ca.crt", certificates->ca_.pem().certificate));
  return certificates;
}

LocalCertificates::~LocalCertificates() {
  std::error_code error;
  std::filesystem::remove_all(dir_, error);
  if (error) PSFLOW_LOG(WARNING) << "cannot remove " << dir_ << ": " << error.message();
}

absl::Status LocalCertificates::WritePrivate(const std::string& name,
                                             const std::string& text) const {
  const std::string path = absl::StrCat(dir_, "/", name);
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return Unwritable(path, errno);
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd.get(), text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Unwritable(path, errno);
    written += static_cast<size_t>(n);
  }
  return fd.Close(path);
}

absl::StatusOr<std::vector<std::string>> LocalCertificates::AddReplica(
    const std::string& replica, const std::vector<std::string>& ip_addresses) {
  ASSIGN_OR_RETURN(const PemCertificate leaf, ca_.Issue({.common_name = replica,
                                                         .dns_names = {"localhost", replica},
                                                         .ip_addresses = ip_addresses},
                                                        kDefaultCertificateValidity));
  RETURN_IF_ERROR(WritePrivate(replica + ".crt", leaf.certificate));
  RETURN_IF_ERROR(WritePrivate(replica + ".key", leaf.private_key));
  return std::vector<std::string>{absl::StrCat("--tls_ca=", dir_, "/ca.crt"),
                                  absl::StrCat("--tls_cert=", dir_, "/", replica, ".crt"),
                                  absl::StrCat("--tls_key=", dir_, "/", replica, ".key")};
}

}  // namespace psflow::local
