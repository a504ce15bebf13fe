// A data file a user names (a .npy, an .npz, a CSV), read whole or by byte ranges. Datasets may
// be gigabytes: nothing is read that the caller does not ask for.
#ifndef PSFLOW_WORKER_DATA_INPUT_FILE_H_
#define PSFLOW_WORKER_DATA_INPUT_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/file_util.h"

namespace psflow::data {

// Owns an open file; movable, not copyable. Reads are positional (pread): a const InputFile may
// be read from several threads at once.
class InputFile {
 public:
  // NOT_FOUND naming `path` when it does not exist, cannot be opened or is not a regular file.
  static absl::StatusOr<InputFile> Open(const std::string& path);

  const std::string& path() const { return path_; }
  // The size when it was opened, in bytes.
  uint64_t size() const { return size_; }

  // Reads bytes [offset, offset + n) into `out`. The caller checks that they lie within size()
  // (so a size read from a corrupt header is checked before anything is allocated for it).
  // DATA_LOSS naming the file when the read fails or the file has shrunk since Open.
  absl::Status ReadAt(uint64_t offset, uint64_t n, char* out) const;
  // The same, into a new string.
  absl::StatusOr<std::string> Read(uint64_t offset, uint64_t n) const;

 private:
  InputFile(std::string path, std::unique_ptr<Fd> fd, uint64_t size)
      : path_(std::move(path)), fd_(std::move(fd)), size_(size) {}

  std::string path_;
  std::unique_ptr<Fd> fd_;  // behind a pointer: Fd does not move
  uint64_t size_;
};

// The whole file, as InputFile reads it.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// The binary readers' errors: a malformed file, DATA_LOSS "<what>: <why> (at byte <offset>)";
// well-formed but not supported, INVALID_ARGUMENT "<what>: <why>".
absl::Status Corrupt(absl::string_view what, uint64_t offset, absl::string_view why);
absl::Status Unsupported(absl::string_view what, absl::string_view why);

// Little-endian fields at p (the host is little-endian too: npy.cc asserts it).
uint16_t Le16(const char* p);
uint32_t Le32(const char* p);
uint64_t Le64(const char* p);

}  // namespace psflow::data

#endif  // PSFLOW_WORKER_DATA_INPUT_FILE_H_
