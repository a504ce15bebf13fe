// NumPy's .npz archives: a ZIP file of .npy members (npy.h), as np.savez writes them (stored) and
// np.savez_compressed (deflated); numpy gives every member ZIP64 extra fields, and an archive
// over 4 GiB has ZIP64 end records. Both are read.
//
// Errors are one line naming the archive (and "archive.npz:member.npy" once the member is found),
// with the byte offset for malformed bytes:
//   NOT_FOUND         the archive does not exist or cannot be opened; no member of that name
//                     (the members present listed);
//   DATA_LOSS         malformed bytes: no end-of-central-directory record, a directory or local
//                     header that does not hold together, sizes reaching outside the file, a
//                     corrupt or truncated deflate stream, a CRC-32 mismatch, a bad .npy member;
//   INVALID_ARGUMENT  well-formed but not read: an encrypted member, an archive split over
//                     disks, a compression other than stored or deflated, a member's dtype npy.h
//                     does not read.
// Every size is checked against the file's before anything is allocated, and a deflated member is
// inflated into a buffer that grows with its output: a small malformed archive never causes a
// large allocation.
#ifndef PSFLOW_WORKER_DATA_NPZ_H_
#define PSFLOW_WORKER_DATA_NPZ_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/npy.h"

namespace psflow::data {

// The names of the archive's members, in the archive's order, each without its ".npy" (the keys
// np.savez was given: "x_train" for the member "x_train.npy").
absl::StatusOr<std::vector<std::string>> ListNpzMembers(const std::string& path);

// Reads one member: "<name>.npy", or else a member called exactly `name`. Reads the central
// directory, that member's local header and its data; the other members are not read.
absl::StatusOr<NpyArray> ReadNpzMember(const std::string& path, const std::string& name);

}  // namespace psflow::data

#endif  // PSFLOW_WORKER_DATA_NPZ_H_
