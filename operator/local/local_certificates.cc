#include "operator/local/local_certificates.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
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

constexpr char kLockFile[] = ".lock";

// Removes this user's folders "<parent>/psflow-tls-*" whose lock file no run holds (its runner
// was SIGKILLed, so its destructor never ran): they hold private keys nobody else will remove.
// A folder without a lock file (being made, or not psflow run's) is left alone.
void RemoveLeftovers(const std::string& parent) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(parent, error)) {
    if (!absl::StartsWith(entry.path().filename().string(), "psflow-tls-")) continue;
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != ::getuid()) {
      continue;
    }
    const std::string lock_path = (entry.path() / kLockFile).string();
    Fd lock(::open(lock_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
    if (!lock.valid() || ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;  // a live run's
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
  std::string pattern = absl::StrCat(parent, "/psflow-tls-XXXXXX");
  // mkdtemp makes the folder 0700.
  if (::mkdtemp(pattern.data()) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot make a folder for the TLS certificates in ", parent, ": ", std::strerror(errno)));
  }
  // The run holds the folder's lock file for its life (the kernel lets go of it however the
  // runner ends). It is locked under another name, then renamed: it never exists unlocked.
  const std::string making = absl::StrCat(pattern, "/.lock-making");
  const int lock = ::open(making.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (lock < 0 || ::flock(lock, LOCK_EX | LOCK_NB) != 0 ||
      ::rename(making.c_str(), absl::StrCat(pattern, "/", kLockFile).c_str()) != 0) {
    const int err = errno;
    if (lock >= 0) ::close(lock);
    std::error_code ignored;
    std::filesystem::remove_all(pattern, ignored);
    return Unwritable(making, err);
  }
  std::unique_ptr<LocalCertificates> certificates(
      new LocalCertificates(std::move(pattern), std::move(ca), lock));
  RETURN_IF_ERROR(certificates->WritePrivate("ca.crt", certificates->ca_.pem().certificate));
  return certificates;
}

LocalCertificates::~LocalCertificates() {
  std::error_code error;
  std::filesystem::remove_all(dir_, error);
  if (error) PSFLOW_LOG(WARNING) << "cannot remove " << dir_ << ": " << error.message();
  ::close(lock_fd_);
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
