// Checkpoints of one ps task: its partitions, their optimizer slots, the global step and the
// metadata needed to serve them again (the chief's InitializeRequest, serialized).
//
// Files live in <dir>/ps-<task>/ckpt-<global step, 12 digits>.psck. A write goes to a temporary
// file in the same folder, is fsync'ed, renamed into place and the folder fsync'ed, so a crash at
// any moment leaves either the old set of checkpoints or the old set plus the complete new one,
// never a half-written file under a checkpoint name. After a write only the newest `keep`
// checkpoints remain.
//
// Format (little-endian): magic "PSFLOWCK", u32 version, u64 global step, u64 fingerprint,
// u32 length + metadata bytes, u32 tensor count, then per tensor u32 length + name, u32 rank,
// rank x i64 dims, u64 element count, elements as float32; last a u32 CRC-32 (zlib) of every
// byte before it. Restore checks magic, version, every length against the file size and the
// checksum, so a truncated or corrupted file is rejected without reading past its end.
#ifndef PSFLOW_PS_CHECKPOINT_H_
#define PSFLOW_PS_CHECKPOINT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace psflow {

struct CheckpointTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;  // product(shape) elements
};

struct Checkpoint {
  int64_t global_step = 0;
  uint64_t fingerprint = 0;
  std::string metadata;  // opaque to this file
  std::vector<CheckpointTensor> tensors;
};

class CheckpointDir {
 public:
  // `keep` >= 1 checkpoints are retained per task.
  CheckpointDir(std::string dir, int task, int keep);

  // Writes `checkpoint` atomically (see above) and deletes all but the newest `keep`. Creates the
  // folders as needed. On error (disk full, permissions) the previous checkpoints are untouched
  // and no temporary file is left behind; the error names the path.
  absl::Status Write(const Checkpoint& checkpoint);

  // The newest checkpoint that reads back whole and valid, or nullopt when there is none (no
  // folder, no files). Each invalid newer file is reported in one log line (PSFLOW_LOG(WARNING):
  // path and why: truncated, bad checksum, bad magic...) and skipped for the next older one.
  // An error only for an unreadable folder.
  absl::StatusOr<std::optional<Checkpoint>> RestoreNewest() const;

  // At start-up: the folder exists (made as needed) and this process may write there, so a folder
  // that cannot hold checkpoints is found before training, not at the first checkpoint.
  // FAILED_PRECONDITION naming the path and why.
  absl::Status CheckWritable() const;

  // Paths of this task's checkpoint files, oldest first.
  std::vector<std::string> List() const;

  // <dir>/ps-<task>
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int keep_;
};

// Reads and validates one checkpoint file (what RestoreNewest does per file): DATA_LOSS naming
// the path and the defect for a truncated, corrupted or foreign file; NOT_FOUND if it is missing.
absl::StatusOr<Checkpoint> ReadCheckpointFile(const std::string& path);

}  // namespace psflow

#endif  // PSFLOW_PS_CHECKPOINT_H_
