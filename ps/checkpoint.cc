#include "ps/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "core/file_util.h"
#include "core/log.h"
#include "core/status_macros.h"

namespace psflow {
namespace {

// The format is little-endian; on a little-endian host integers and floats are copied as they
// lie in memory.
static_assert(std::endian::native == std::endian::little,
              "psflow's checkpoint format assumes a little-endian host");

constexpr absl::string_view kMagic = "PSFLOWCK";
constexpr uint32_t kVersion = 1;
constexpr size_t kChecksumBytes = sizeof(uint32_t);
// magic, version, step, fingerprint, metadata length, tensor count, checksum.
constexpr uint64_t kMinFileBytes = 8 + 4 + 8 + 8 + 4 + 4 + kChecksumBytes;
// Per tensor at least: name length, rank, element count.
constexpr uint64_t kMinTensorBytes = 4 + 4 + 8;
// Small fields are gathered in a buffer of this size; blocks at least this large (tensor data)
// go to and come from the file directly.
constexpr size_t kBufferBytes = size_t{1} << 20;
// One write(2) / read(2) / crc32() call handles at most this much (crc32 takes a 32-bit length).
constexpr size_t kMaxIoBytes = size_t{1} << 30;

constexpr absl::string_view kFilePrefix = "ckpt-";
constexpr absl::string_view kFileSuffix = ".psck";
constexpr absl::string_view kTempPrefix = ".ckpt-";
constexpr absl::string_view kTempInfix = ".psck.tmp.";

std::string FileName(int64_t step) { return absl::StrFormat("ckpt-%012d.psck", step); }

// The step of a checkpoint file name "ckpt-<at least 12 digits, as FileName writes them>.psck",
// or -1 for any other name.
int64_t ParseFileName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kFilePrefix) || !absl::ConsumeSuffix(&name, kFileSuffix)) {
    return -1;
  }
  if (name.size() < 12 || !std::all_of(name.begin(), name.end(), absl::ascii_isdigit)) return -1;
  int64_t step = 0;
  if (!absl::SimpleAtoi(name, &step)) return -1;  // overflow
  // Exactly the canonical spelling, so that one step has one file name.
  if (absl::StrFormat("%012d", step) != name) return -1;
  return step;
}

bool IsTempFileName(absl::string_view name) {
  return absl::StartsWith(name, kTempPrefix) && absl::StrContains(name, kTempInfix);
}

struct Entry {
  int64_t step;
  std::string path;
};

// The checkpoint files among `names` in `dir`, oldest (smallest step) first.
std::vector<Entry> CheckpointEntries(const std::string& dir,
                                     const std::vector<std::string>& names) {
  std::vector<Entry> entries;
  for (const std::string& name : names) {
    const int64_t step = ParseFileName(name);
    if (step >= 0) entries.push_back({step, absl::StrCat(dir, "/", name)});
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.step < b.step; });
  return entries;
}

uint32_t Crc(uint32_t crc, const void* data, size_t size) {
  const auto* bytes = static_cast<const Bytef*>(data);
  while (size > 0) {
    const size_t n = std::min(size, kMaxIoBytes);
    crc = static_cast<uint32_t>(::crc32(crc, bytes, static_cast<uInt>(n)));
    bytes += n;
    size -= n;
  }
  return crc;
}

uint32_t CrcInit() { return static_cast<uint32_t>(::crc32(0L, Z_NULL, 0)); }

// The elements of `shape`, or nullopt for a negative dimension or more than 2^62 elements.
std::optional<uint64_t> ShapeElements(const std::vector<int64_t>& shape) {
  constexpr uint64_t kMax = uint64_t{1} << 62;
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; })) {
    return std::nullopt;
  }
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  uint64_t n = 1;
  for (int64_t d : shape) {
    const auto ud = static_cast<uint64_t>(d);
    if (n > kMax / ud) return std::nullopt;
    n *= ud;
  }
  return n;
}

// Writes the file sequentially, gathering small fields in a buffer, and keeps the CRC-32 of
// every byte written.
class Writer {
 public:
  Writer(int fd, absl::string_view path) : fd_(fd), path_(path) { buffer_.reserve(kBufferBytes); }

  absl::Status Put(const void* data, size_t size) {
    if (size == 0) return absl::OkStatus();  // data may be null (an empty vector)
    if (buffer_.size() + size <= kBufferBytes) {
      buffer_.append(static_cast<const char*>(data), size);
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(Flush());
    if (size >= kBufferBytes) return WriteBlock(data, size);
    buffer_.append(static_cast<const char*>(data), size);
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status PutInt(T value) {
    return Put(&value, sizeof(value));
  }

  // Flushes the buffer and appends the checksum of everything before it.
  absl::Status Finish() {
    RETURN_IF_ERROR(Flush());
    const uint32_t crc = crc_;
    return WriteAll(&crc, sizeof(crc));
  }

 private:
  absl::Status Flush() {
    RETURN_IF_ERROR(WriteBlock(buffer_.data(), buffer_.size()));
    buffer_.clear();
    return absl::OkStatus();
  }

  absl::Status WriteBlock(const void* data, size_t size) {
    crc_ = Crc(crc_, data, size);
    return WriteAll(data, size);
  }

  absl::Status WriteAll(const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::write(fd_, p, std::min(size, kMaxIoBytes));
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoError(errno, "write", path_);
      }
      if (n == 0) return ErrnoError(ENOSPC, "write", path_);
      p += n;
      size -= static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

  int fd_;
  absl::string_view path_;
  std::string buffer_;
  uint32_t crc_ = CrcInit();
};

absl::Status Validate(const Checkpoint& checkpoint) {
  constexpr uint64_t kMaxU32 = std::numeric_limits<uint32_t>::max();
  if (checkpoint.global_step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint: negative global step ", checkpoint.global_step));
  }
  if (checkpoint.metadata.size() > kMaxU32) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint: metadata of ", checkpoint.metadata.size(), " bytes"));
  }
  if (checkpoint.tensors.size() > kMaxU32) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint: ", checkpoint.tensors.size(), " tensors"));
  }
  for (const CheckpointTensor& t : checkpoint.tensors) {
    if (t.name.size() > kMaxU32 || t.shape.size() > kMaxU32) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint: tensor name of ", t.name.size(),
                                                     " bytes or rank ", t.shape.size()));
    }
    const std::optional<uint64_t> n = ShapeElements(t.shape);
    if (!n.has_value() || *n != t.values.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint: tensor '", t.name, "' has ", t.values.size(),
          " values, which does not match its shape [", absl::StrJoin(t.shape, ","), "]"));
    }
  }
  return absl::OkStatus();
}

absl::Status Serialize(const Checkpoint& checkpoint, Writer& w) {
  RETURN_IF_ERROR(w.Put(kMagic.data(), kMagic.size()));
  RETURN_IF_ERROR(w.PutInt<uint32_t>(kVersion));
  RETURN_IF_ERROR(w.PutInt<uint64_t>(static_cast<uint64_t>(checkpoint.global_step)));
  RETURN_IF_ERROR(w.PutInt<uint64_t>(checkpoint.fingerprint));
  RETURN_IF_ERROR(w.PutInt<uint32_t>(static_cast<uint32_t>(checkpoint.metadata.size())));
  RETURN_IF_ERROR(w.Put(checkpoint.metadata.data(), checkpoint.metadata.size()));
  RETURN_IF_ERROR(w.PutInt<uint32_t>(static_cast<uint32_t>(checkpoint.tensors.size())));
  for (const CheckpointTensor& t : checkpoint.tensors) {
    RETURN_IF_ERROR(w.PutInt<uint32_t>(static_cast<uint32_t>(t.name.size())));
    RETURN_IF_ERROR(w.Put(t.name.data(), t.name.size()));
    RETURN_IF_ERROR(w.PutInt<uint32_t>(static_cast<uint32_t>(t.shape.size())));
    RETURN_IF_ERROR(w.Put(t.shape.data(), t.shape.size() * sizeof(int64_t)));
    RETURN_IF_ERROR(w.PutInt<uint64_t>(t.values.size()));
    RETURN_IF_ERROR(w.Put(t.values.data(), t.values.size() * sizeof(float)));
  }
  return w.Finish();
}

// Reads the file sequentially and keeps the CRC-32 of every byte handed out. Every read is
// checked against the bytes left before the checksum, so no length read from the file can make
// it read (or allocate) past the end.
class Reader {
 public:
  Reader(int fd, absl::string_view path, uint64_t file_size)
      : fd_(fd), path_(path), payload_(file_size - kChecksumBytes) {}

  // Bytes not yet handed out before the checksum.
  uint64_t remaining() const { return payload_ - consumed_; }
  uint64_t offset() const { return consumed_; }
  uint32_t crc() const { return crc_; }

  absl::Status Read(void* dst, uint64_t size, absl::string_view what) {
    if (size > remaining()) {
      return DataLoss(absl::StrCat("truncated: ", what, " needs ", size, " bytes at offset ",
                                   consumed_, ", only ", remaining(),
                                   " are left before the checksum"));
    }
    char* out = static_cast<char*>(dst);
    size_t left = size;
    const size_t buffered = std::min(left, buffer_end_ - buffer_pos_);
    if (buffered > 0) std::memcpy(out, buffer_.get() + buffer_pos_, buffered);
    buffer_pos_ += buffered;
    left -= buffered;
    if (left >= kBufferBytes) {
      RETURN_IF_ERROR(ReadRaw(out + buffered, left));
    } else if (left > 0) {
      // Sized for small files; never larger than what is left, so `left` always fits.
      const size_t capacity = static_cast<size_t>(std::min<uint64_t>(kBufferBytes, payload_));
      if (buffer_ == nullptr) buffer_ = std::make_unique_for_overwrite<char[]>(capacity);
      const size_t fill = static_cast<size_t>(std::min<uint64_t>(capacity, payload_ - read_));
      RETURN_IF_ERROR(ReadRaw(buffer_.get(), fill));
      buffer_pos_ = 0;
      buffer_end_ = fill;
      std::memcpy(out + buffered, buffer_.get(), left);
      buffer_pos_ = left;
    }
    consumed_ += size;
    crc_ = Crc(crc_, dst, size);
    return absl::OkStatus();
  }

  template <typename T>
  absl::StatusOr<T> ReadInt(absl::string_view what) {
    T value;
    RETURN_IF_ERROR(Read(&value, sizeof(value), what));
    return value;
  }

  // The stored checksum; call once everything before it was read.
  absl::StatusOr<uint32_t> ReadChecksum() {
    uint32_t stored = 0;
    RETURN_IF_ERROR(ReadRaw(&stored, sizeof(stored)));
    return stored;
  }

  absl::Status DataLoss(absl::string_view why) const {
    return absl::DataLossError(absl::StrCat(path_, ": ", why));
  }

 private:
  absl::Status ReadRaw(void* dst, size_t size) {
    char* p = static_cast<char*>(dst);
    while (size > 0) {
      const ssize_t n = ::read(fd_, p, std::min(size, kMaxIoBytes));
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoError(errno, "read", path_);
      }
      if (n == 0) return DataLoss("truncated while being read");
      p += n;
      size -= static_cast<size_t>(n);
      read_ += static_cast<uint64_t>(n);
    }
    return absl::OkStatus();
  }

  int fd_;
  absl::string_view path_;
  uint64_t payload_;
  uint64_t read_ = 0;      // bytes read from the file
  uint64_t consumed_ = 0;  // bytes handed out
  std::unique_ptr<char[]> buffer_;
  size_t buffer_pos_ = 0;
  size_t buffer_end_ = 0;
  uint32_t crc_ = CrcInit();
};

absl::StatusOr<CheckpointTensor> ReadTensor(Reader& r, uint32_t index) {
  CheckpointTensor t;
  const std::string which = absl::StrCat("tensor ", index);
  ASSIGN_OR_RETURN(const uint32_t name_size, r.ReadInt<uint32_t>(which + " name length"));
  t.name.resize(std::min<uint64_t>(name_size, r.remaining()));
  RETURN_IF_ERROR(r.Read(t.name.data(), name_size, which + " name"));
  const std::string what = absl::StrCat("tensor ", index, " '", t.name, "'");
  ASSIGN_OR_RETURN(const uint32_t rank, r.ReadInt<uint32_t>(what + " rank"));
  // Dims and the element count must fit in what is left.
  if (rank > (r.remaining() - std::min<uint64_t>(r.remaining(), 8)) / sizeof(int64_t)) {
    return r.DataLoss(absl::StrCat("truncated or corrupt: ", what, " has rank ", rank,
                                   ", more than the remaining ", r.remaining(), " bytes hold"));
  }
  t.shape.resize(rank);
  RETURN_IF_ERROR(r.Read(t.shape.data(), uint64_t{rank} * sizeof(int64_t), what + " shape"));
  ASSIGN_OR_RETURN(const uint64_t count, r.ReadInt<uint64_t>(what + " element count"));
  const std::optional<uint64_t> expected = ShapeElements(t.shape);
  if (!expected.has_value() || *expected != count) {
    return r.DataLoss(absl::StrCat("corrupt: ", what, " has shape [", absl::StrJoin(t.shape, ","),
                                   "] but ", count, " elements"));
  }
  if (count > r.remaining() / sizeof(float)) {
    return r.DataLoss(absl::StrCat("truncated: ", what, " needs ", count, " x 4 bytes at offset ",
                                   r.offset(), ", only ", r.remaining(),
                                   " are left before the checksum"));
  }
  t.values.resize(count);
  RETURN_IF_ERROR(r.Read(t.values.data(), count * sizeof(float), what + " values"));
  return t;
}

absl::StatusOr<Checkpoint> Parse(Reader& r) {
  Checkpoint checkpoint;
  char magic[kMagic.size()];
  RETURN_IF_ERROR(r.Read(magic, sizeof(magic), "magic"));
  if (absl::string_view(magic, sizeof(magic)) != kMagic) {
    return r.DataLoss("bad magic: not a psflow checkpoint");
  }
  ASSIGN_OR_RETURN(const uint32_t version, r.ReadInt<uint32_t>("version"));
  if (version != kVersion) {
    return r.DataLoss(
        absl::StrCat("unsupported version ", version, " (this build reads ", kVersion, ")"));
  }
  ASSIGN_OR_RETURN(const uint64_t step, r.ReadInt<uint64_t>("global step"));
  if (step > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return r.DataLoss(absl::StrCat("corrupt: global step ", step, " is negative"));
  }
  checkpoint.global_step = static_cast<int64_t>(step);
  ASSIGN_OR_RETURN(checkpoint.fingerprint, r.ReadInt<uint64_t>("fingerprint"));
  ASSIGN_OR_RETURN(const uint32_t metadata_size, r.ReadInt<uint32_t>("metadata length"));
  checkpoint.metadata.resize(std::min<uint64_t>(metadata_size, r.remaining()));
  RETURN_IF_ERROR(r.Read(checkpoint.metadata.data(), metadata_size, "metadata"));
  ASSIGN_OR_RETURN(const uint32_t count, r.ReadInt<uint32_t>("tensor count"));
  if (count > r.remaining() / kMinTensorBytes) {
    return r.DataLoss(absl::StrCat("truncated or corrupt: tensor count ", count,
                                   " cannot fit in the remaining ", r.remaining(), " bytes"));
  }
  checkpoint.tensors.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(CheckpointTensor t, ReadTensor(r, i));
    checkpoint.tensors.push_back(std::move(t));
  }
  if (r.remaining() != 0) {
    return r.DataLoss(absl::StrCat("corrupt: ", r.remaining(),
                                   " unexpected bytes between the last tensor and the checksum"));
  }
  const uint32_t computed = r.crc();
  ASSIGN_OR_RETURN(const uint32_t stored, r.ReadChecksum());
  if (stored != computed) {
    return r.DataLoss(
        absl::StrFormat("bad checksum: stored %08x, computed %08x", stored, computed));
  }
  return checkpoint;
}

}  // namespace

CheckpointDir::CheckpointDir(std::string dir, int task, int keep)
    : path_(dir.empty() ? absl::StrCat("ps-", task)
                        : absl::StrCat(dir, dir.back() == '/' ? "" : "/", "ps-", task)),
      keep_(std::max(keep, 1)) {}

// Not meant to run concurrently on one folder (from threads or processes): each write also
// removes the temporary files that earlier, interrupted writes left behind.
absl::Status CheckpointDir::CheckWritable() const {
  if (absl::Status made = MakeDirs(path_); !made.ok()) {
    return absl::FailedPreconditionError(made.message());
  }
  if (access(path_.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, " cannot be written: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status CheckpointDir::Write(const Checkpoint& checkpoint) {
  RETURN_IF_ERROR(Validate(checkpoint));
  RETURN_IF_ERROR(MakeDirs(path_));
  const std::string final_path = absl::StrCat(path_, "/", FileName(checkpoint.global_step));
  // Complete under its name and durable, or not there (a temporary file named "."<name>".tmp.",
  // which retention below removes if a crash left it).
  RETURN_IF_ERROR(WriteFileAtomically(final_path, [&](int fd, const std::string& temp_path) {
    Writer writer(fd, temp_path);
    return Serialize(checkpoint, writer);
  }));

  // Retention: of the files up to the one just written, all but the newest `keep_`. Files of a
  // later step can only be left from a run that restored an older checkpoint because they were
  // invalid (damaged, or a newer psflow's): they neither take a place among the `keep_` (which
  // would leave this run one valid checkpoint) nor are removed (they may be worth a look); a
  // write of their step replaces them.
  absl::StatusOr<std::vector<std::string>> names = DirNames(path_);
  if (!names.ok()) {
    PSFLOW_LOG(WARNING) << "checkpoint retention skipped: " << names.status().message();
    return absl::OkStatus();
  }
  std::vector<Entry> entries = CheckpointEntries(path_, *names);
  std::erase_if(entries, [&](const Entry& e) { return e.step > checkpoint.global_step; });
  const size_t keep = static_cast<size_t>(keep_);
  for (size_t i = 0; i + keep < entries.size(); ++i) {
    if (::unlink(entries[i].path.c_str()) != 0 && errno != ENOENT) {
      PSFLOW_LOG(WARNING) << "cannot remove old checkpoint " << entries[i].path << ": "
                          << std::strerror(errno);
    }
  }
  for (const std::string& stale : *names) {
    if (!IsTempFileName(stale)) continue;
    const std::string stale_path = absl::StrCat(path_, "/", stale);
    if (::unlink(stale_path.c_str()) != 0 && errno != ENOENT) {
      PSFLOW_LOG(WARNING) << "cannot remove stale temporary checkpoint " << stale_path << ": "
                          << std::strerror(errno);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<Checkpoint>> CheckpointDir::RestoreNewest() const {
  absl::StatusOr<std::vector<std::string>> names = DirNames(path_);
  if (absl::IsNotFound(names.status())) return std::nullopt;
  if (!names.ok()) return names.status();
  const std::vector<Entry> entries = CheckpointEntries(path_, *names);
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    absl::StatusOr<Checkpoint> checkpoint = ReadCheckpointFile(it->path);
    if (!checkpoint.ok()) {
      PSFLOW_LOG(WARNING) << "skipping checkpoint: " << checkpoint.status().message();
      continue;
    }
    if (checkpoint->global_step != it->step) {
      PSFLOW_LOG(WARNING) << "skipping checkpoint: " << it->path << ": holds global step "
                          << checkpoint->global_step << ", not the step its name says";
      continue;
    }
    return std::optional<Checkpoint>(std::move(*checkpoint));
  }
  return std::nullopt;
}

std::vector<std::string> CheckpointDir::List() const {
  absl::StatusOr<std::vector<std::string>> names = DirNames(path_);
  if (!names.ok()) {
    if (!absl::IsNotFound(names.status())) {
      PSFLOW_LOG(WARNING) << "cannot list checkpoints: " << names.status().message();
    }
    return {};
  }
  std::vector<std::string> paths;
  for (Entry& entry : CheckpointEntries(path_, *names)) paths.push_back(std::move(entry.path));
  return paths;
}

absl::StatusOr<Checkpoint> ReadCheckpointFile(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError(errno, "open", path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoError(errno, "stat", path);
  if (!S_ISREG(st.st_mode)) return absl::DataLossError(absl::StrCat(path, ": not a regular file"));
  const auto size = static_cast<uint64_t>(st.st_size);
  // A foreign file is named as such, whatever its size.
  if (size >= kMagic.size()) {
    char magic[kMagic.size()];
    ssize_t n;
    do {
      n = ::pread(fd.get(), magic, sizeof(magic), 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return ErrnoError(errno, "read", path);
    if (static_cast<size_t>(n) == sizeof(magic) &&
        absl::string_view(magic, sizeof(magic)) != kMagic) {
      return absl::DataLossError(absl::StrCat(path, ": bad magic: not a psflow checkpoint"));
    }
  }
  if (size < kMinFileBytes) {
    return absl::DataLossError(absl::StrCat(path, ": truncated: ", size,
                                            " bytes, a checkpoint has at least ", kMinFileBytes));
  }
  Reader reader(fd.get(), path, size);
  return Parse(reader);
}

}  // namespace psflow
