// The mutual-TLS certificates of one `psflow run`: a CA made for the run, held in memory only,
// and each replica's certificate and key in a private temporary folder (0700, files 0600: only
// this user reads them), which goes when the object does — at the end of the run, however it
// ends (a failed start, a failed job, Ctrl-C). A runner killed by SIGKILL leaves its folder; the
// next run's Create removes it: each run holds a lock file (flock) in its folder, which the kernel
// releases however the runner ends, and a folder whose lock nobody holds is a leftover (unlike a
// pid, a lock is seen across containers that share the folder's file system).
//
// Files: ca.crt (the CA's certificate), <replica>.crt and <replica>.key. A replica's certificate
// names "localhost", the replica's name and the addresses it is reached at (127.0.0.1, or its
// network namespace's address under --emulate_network), so whichever TF_CONFIG gives, the
// workers verify the ps they dial. Not thread-safe.
#ifndef PSFLOW_OPERATOR_LOCAL_LOCAL_CERTIFICATES_H_
#define PSFLOW_OPERATOR_LOCAL_LOCAL_CERTIFICATES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/certificates.h"

namespace psflow::local {

class LocalCertificates {
 public:
  // A new CA and the folder "<parent>/psflow-tls-XXXXXX" holding its certificate and the run's
  // lock file (.lock), after removing this user's folders of that form whose lock no run holds.
  // FAILED_PRECONDITION naming the path when the folder or a file cannot be made.
  static absl::StatusOr<std::unique_ptr<LocalCertificates>> Create(const std::string& parent,
                                                                   const std::string& job);
  ~LocalCertificates();  // removes the folder and everything in it
  LocalCertificates(const LocalCertificates&) = delete;
  LocalCertificates& operator=(const LocalCertificates&) = delete;

  // Issues `replica`'s certificate for `ip_addresses` (and localhost and its name), writes
  // <replica>.crt and <replica>.key, and returns the flags that hand them to psflow-ps or
  // psflow-worker: --tls_ca=..., --tls_cert=..., --tls_key=....
  absl::StatusOr<std::vector<std::string>> AddReplica(const std::string& replica,
                                                      const std::vector<std::string>& ip_addresses);

  const std::string& dir() const { return dir_; }

 private:
  LocalCertificates(std::string dir, CertificateAuthority ca, int lock_fd)
      : dir_(std::move(dir)), ca_(std::move(ca)), lock_fd_(lock_fd) {}
  absl::Status WritePrivate(const std::string& name, const std::string& text) const;

  std::string dir_;
  CertificateAuthority ca_;
  int lock_fd_;  // holds dir_/.lock (flock) while this object lives
};

}  // namespace psflow::local

#endif  // PSFLOW_OPERATOR_LOCAL_LOCAL_CERTIFICATES_H_
