#include "worker/data/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace psflow::data {

absl::StatusOr<InputFile> InputFile::Open(const std::string& path) {
  auto fd = std::make_unique<Fd>(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd->valid()) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot stat: ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat(path, ": not a regular file"));
  }
  return InputFile(path, std::move(fd), static_cast<uint64_t>(st.st_size));
}

absl::Status InputFile::ReadAt(uint64_t offset, uint64_t n, char* out) const {
  uint64_t done = 0;
  while (done < n) {
    // Linux's pread moves at most about 2 GiB a call.
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n - done, 1 << 30));
    const ssize_t got = ::pread(fd_->get(), out + done, chunk, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return absl::DataLossError(
          absl::StrCat(path_, ": read error at byte ", offset + done, ": ", std::strerror(errno)));
    }
    if (got == 0) {
      return absl::DataLossError(
          absl::StrCat(path_, ": the file shrank while being read (at byte ", offset + done, ")"));
    }
    done += static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> InputFile::Read(uint64_t offset, uint64_t n) const {
  std::string out(static_cast<size_t>(n), '\0');
  RETURN_IF_ERROR(ReadAt(offset, n, out.data()));
  return out;
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  ASSIGN_OR_RETURN(const InputFile file, InputFile::Open(path));
  return file.Read(0, file.size());
}

absl::Status Corrupt(absl::string_view what, uint64_t offset, absl::string_view why) {
  return absl::DataLossError(absl::StrCat(what, ": ", why, " (at byte ", offset, ")"));
}

absl::Status Unsupported(absl::string_view what, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
}

uint16_t Le16(const char* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t Le32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t Le64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace psflow::data
