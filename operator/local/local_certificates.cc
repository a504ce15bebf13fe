#include "operator/local/local_certificates.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/file_util.h"
#include "core/log.h"
#include "core/status_macros.h"

namespace psflow::local {
namespace {

absl::Status Unwritable(const std::string& path, int error) {
  return absl::FailedPreconditionError(
      absl::StrCat("cannot write ", path, ": ", std::strerror(error)));
}

// Removes the folders "<parent>/psflow-tls-<pid>-*" of this user whose runner process is gone (it
// was SIGKILLed, so its destructor never ran): they hold private keys nobody else will remove.
void RemoveLeftovers(const std::string& parent) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(parent, error)) {
    const std::string name = entry.path().filename().string();
    absl::string_view rest = name;
    if (!absl::ConsumePrefix(&rest, "psflow-tls-")) continue;
    const size_t dash = rest.find('-');
    int pid = 0;
    if (dash == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, dash), &pid) ||
        pid <= 0) {
      continue;
    }
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != ::getuid()) {
      continue;
    }
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to ask)
    std::error_code removed;
    std::filesystem::remove_all(entry.path(), removed);
    if (removed) {
      PSFLOW_LOG(WARNING) << "cannot remove " << entry.path().string()
                          << ", left by a run that was killed: " << removed.message();
    } else {
      PSFLOW_LOG(INFO) << "removed " << entry.path().string()
                       << ", the certificates of a run that was killed";
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalCertificates>> LocalCertificates::Create(
    const std::string& parent, const std::string& job) {
  ASSIGN_OR_RETURN(CertificateAuthority ca,
                   CertificateAuthority::Create(absl::StrCat("psflow run ", job, " CA"),
                                                kDefaultCertificateValidity));
  RemoveLeftovers(parent);
  std::string pattern = absl::StrCat(parent, "/psflow-tls-", ::getpid(), "-XXXXXX");
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
