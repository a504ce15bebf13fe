#include "core/shm_stream.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

// The shared file: a page with FileHeader, a page of RingIndexes per direction, then the two
// rings' bytes. Ring 0 carries the client's bytes to the server, ring 1 the server's back.
constexpr uint64_t kMagic = 0x314d485342465350ULL;  // "PSFBSHM1", little-endian
constexpr uint32_t kVersion = 1;
constexpr size_t kPage = 4096;
constexpr size_t kRingsAt = 3 * kPage;
constexpr size_t kMinRingBytes = 4096;
constexpr size_t kMaxRingBytes = size_t{1} << 30;
constexpr size_t kMaxToken = 64;
constexpr int kEventFds = 4;  // ring 0 data, ring 0 room, ring 1 data, ring 1 room

struct FileHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t reserved;
  uint64_t ring_bytes;
};

// One direction's counters, each on its own cache line: bytes written so far (the producer's),
// bytes read so far (the consumer's), and whether either side waits on its eventfd.
struct RingIndexes {
  alignas(64) std::atomic<uint64_t> head;
  alignas(64) std::atomic<uint64_t> tail;
  alignas(64) std::atomic<uint32_t> reader_waits;
  alignas(64) std::atomic<uint32_t> writer_waits;
};
static_assert(sizeof(RingIndexes) <= kPage);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

size_t FileBytes(size_t ring_bytes) { return kRingsAt + 2 * ring_bytes; }

// Whether `fd` is an eventfd (a peer's pipe instead could block a wake-up's write).
bool IsEventFd(int fd) {
  char link[64];
  const std::string path = absl::StrCat("/proc/self/fd/", fd);
  const ssize_t n = readlink(path.c_str(), link, sizeof(link));
  return n > 0 && absl::string_view(link, static_cast<size_t>(n)) == "anon_inode:[eventfd]";
}

bool ValidRingBytes(uint64_t n) {
  return n >= kMinRingBytes && n <= kMaxRingBytes && (n & (n - 1)) == 0;
}

int MillisUntil(SteadyTime deadline) {
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyTime::clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

void CloseAll(std::span<int> fds) {
  for (int& fd : fds) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

// One direction as one side sees it.
struct Ring {
  RingIndexes* indexes = nullptr;
  std::byte* data = nullptr;
  uint64_t mask = 0;  // ring bytes - 1
  int data_fd = -1;   // eventfd: bytes to read (the producer writes it, the consumer waits)
  int room_fd = -1;   // eventfd: room to write (the consumer writes it, the producer waits)
};

class ShmStream final : public BulkStream {
 public:
  ShmStream(Socket socket, ShmSide side, std::string token, size_t ring_bytes)
      : BulkStream(std::move(socket), false),
        side_(side),
        token_(std::move(token)),
        ring_bytes_(ring_bytes) {
    event_fds_.fill(-1);
  }
  ~ShmStream() override {
    if (map_ != nullptr) munmap(map_, map_bytes_);
    CloseAll(event_fds_);
  }

  absl::Status Handshake(SteadyTime deadline) override {
    if (token_.empty() || token_.size() > kMaxToken) {
      return absl::InvalidArgumentError(
          absl::StrCat("shared memory: a token of 1 to ", kMaxToken, " bytes is needed"));
    }
    if (ready_) return absl::FailedPreconditionError("shared memory: handshake done already");
    absl::Status s = side_ == ShmSide::kClient ? Offer() : Take(deadline);
    if (!s.ok()) return s;
    // Ring 0 is the client's way out.
    const int out = side_ == ShmSide::kClient ? 0 : 1;
    const auto ring = [&](int i) {
      Ring r;
      r.indexes = reinterpret_cast<RingIndexes*>(static_cast<std::byte*>(map_) + kPage * (1 + i));
      r.data = static_cast<std::byte*>(map_) + kRingsAt + i * ring_bytes_;
      r.mask = ring_bytes_ - 1;
      r.data_fd = event_fds_[2 * i];
      r.room_fd = event_fds_[2 * i + 1];
      return r;
    };
    out_ = ring(out);
    in_ = ring(1 - out);
    ready_ = true;
    return absl::OkStatus();
  }

  absl::Status WriteAll(std::span<iovec> pieces, SteadyTime deadline,
                        absl::string_view what) override {
    if (absl::Status s = Usable(what); !s.ok()) return s;
    size_t left = TotalBytes(pieces);
    uint64_t head = out_.indexes->head.load(std::memory_order_relaxed);  // ours alone
    for (const iovec& piece : pieces) {
      const std::byte* p = static_cast<const std::byte*>(piece.iov_base);
      size_t n = piece.iov_len;
      while (n > 0) {
        const uint64_t tail = out_.indexes->tail.load(std::memory_order_acquire);
        const uint64_t used = head - tail;
        if (used > out_.mask + 1) return Corrupt(what);
        const uint64_t room = out_.mask + 1 - used;
        if (room == 0) {
          absl::Status s = Wait(out_, /*reader=*/false, deadline, what, left);
          if (!s.ok()) return s;
          continue;
        }
        if (shut_.load(std::memory_order_relaxed)) return Usable(what);
        const size_t step = static_cast<size_t>(std::min<uint64_t>({n, room, MaxStep()}));
        Copy(out_, head, p, step);
        head += step;
        p += step;
        n -= step;
        left -= step;
        out_.indexes->head.store(head, std::memory_order_seq_cst);  // Wake's pairing
        Wake(out_, /*reader=*/true);
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReadAll(std::span<iovec> pieces, SteadyTime deadline,
                       absl::string_view what) override {
    return Read(pieces, deadline, what, nullptr);
  }

  absl::StatusOr<bool> ReadAllOrEnd(void* data, size_t size, SteadyTime deadline,
                                    absl::string_view what) override {
    iovec piece{data, size};
    bool ended = false;
    absl::Status s = Read(std::span<iovec>(&piece, 1), deadline, what, &ended);
    if (!s.ok()) return s;
    return !ended;
  }

  absl::StatusOr<bool> WaitReadable(SteadyTime deadline) override {
    if (absl::Status s = Usable("waiting for bytes"); !s.ok()) return s;
    for (;;) {
      if (Readable() > 0) return true;
      absl::Status s = Wait(in_, /*reader=*/true, deadline, "waiting for bytes", 0);
      if (absl::IsDeadlineExceeded(s)) return false;
      if (absl::IsUnavailable(s)) return true;  // an end to read
      if (!s.ok()) return s;
    }
  }

  void Shutdown() const override {
    shut_.store(true);
    socket_.Shutdown();
  }

 private:
  // A quarter of the ring at a time, so that the reader copies out while the writer copies in.
  uint64_t MaxStep() const { return std::max<uint64_t>(1, (out_.mask + 1) / 4); }

  // OK once the handshake is done and until the stream is shut down.
  absl::Status Usable(absl::string_view what) const {
    if (!ready_) return absl::FailedPreconditionError(absl::StrCat(what, ": no handshake"));
    if (shut_.load()) return absl::UnavailableError(absl::StrCat(what, ": connection shut down"));
    return absl::OkStatus();
  }

  // The bytes waiting in the ring we read (a peer that wrote nonsense indexes reads as more than
  // the ring holds: Corrupt).
  uint64_t Readable() const {
    return in_.indexes->head.load(std::memory_order_acquire) -
           in_.indexes->tail.load(std::memory_order_relaxed);
  }

  absl::Status Corrupt(absl::string_view what) const {
    return absl::UnavailableError(
        absl::StrCat(what, ": the shared-memory ring's counters are corrupt"));
  }

  // Fills `pieces` from the ring; `ended` (when not null): set, with OK, when the peer closed
  // before the first byte.
  absl::Status Read(std::span<iovec> pieces, SteadyTime deadline, absl::string_view what,
                    bool* ended) {
    if (absl::Status s = Usable(what); !s.ok()) return s;
    const size_t total = TotalBytes(pieces);
    size_t done = 0;
    uint64_t tail = in_.indexes->tail.load(std::memory_order_relaxed);  // ours alone
    for (const iovec& piece : pieces) {
      std::byte* p = static_cast<std::byte*>(piece.iov_base);
      size_t n = piece.iov_len;
      while (n > 0) {
        const uint64_t head = in_.indexes->head.load(std::memory_order_acquire);
        const uint64_t ready = head - tail;
        if (ready > in_.mask + 1) return Corrupt(what);
        if (ready == 0) {
          absl::Status s = Wait(in_, /*reader=*/true, deadline, what, total - done);
          if (absl::IsUnavailable(s) && done == 0 && ended != nullptr && !shut_.load() &&
              Readable() == 0) {
            *ended = true;
            return absl::OkStatus();
          }
          if (!s.ok()) return s;
          continue;
        }
        if (shut_.load(std::memory_order_relaxed)) return Usable(what);
        const size_t step = static_cast<size_t>(std::min<uint64_t>({n, ready, MaxStep()}));
        CopyOut(in_, tail, p, step);
        tail += step;
        p += step;
        n -= step;
        done += step;
        in_.indexes->tail.store(tail, std::memory_order_seq_cst);  // Wake's pairing
        Wake(in_, /*reader=*/false);
      }
    }
    return absl::OkStatus();
  }

  static void Copy(const Ring& ring, uint64_t at, const std::byte* from, size_t n) {
    const size_t offset = static_cast<size_t>(at & ring.mask);
    const size_t first = std::min<size_t>(n, ring.mask + 1 - offset);
    std::memcpy(ring.data + offset, from, first);
    if (n > first) std::memcpy(ring.data, from + first, n - first);
  }
  static void CopyOut(const Ring& ring, uint64_t at, std::byte* to, size_t n) {
    const size_t offset = static_cast<size_t>(at & ring.mask);
    const size_t first = std::min<size_t>(n, ring.mask + 1 - offset);
    std::memcpy(to, ring.data + offset, first);
    if (n > first) std::memcpy(to + first, ring.data, n - first);
  }

  // After moving a counter (a seq_cst store): wakes the other side of `ring` (its reader when
  // `reader`) if it said it waits. Dekker's pattern with Wait, every access seq_cst (one total
  // order; no fences, which TSan cannot follow): either the waiter sees the new counter or we see
  // its flag.
  static void Wake(const Ring& ring, bool reader) {
    const std::atomic<uint32_t>& waits =
        reader ? ring.indexes->reader_waits : ring.indexes->writer_waits;
    if (waits.load(std::memory_order_seq_cst) == 0) return;
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(reader ? ring.data_fd : ring.room_fd, &one, 8);
  }

  // Waits until `ring` has bytes to read (`reader`) or room to write, the connection ends
  // (UNAVAILABLE "closed with `left` bytes to go") or the deadline passes.
  absl::Status Wait(const Ring& ring, bool reader, SteadyTime deadline, absl::string_view what,
                    size_t left) {
    std::atomic<uint32_t>& waits = reader ? ring.indexes->reader_waits : ring.indexes->writer_waits;
    const int fd = reader ? ring.data_fd : ring.room_fd;
    const auto moved = [&] {
      const uint64_t head = ring.indexes->head.load(std::memory_order_seq_cst);
      const uint64_t tail = ring.indexes->tail.load(std::memory_order_seq_cst);
      return reader ? head != tail : head - tail < ring.mask + 1;
    };
    waits.store(1, std::memory_order_seq_cst);
    absl::Status result = absl::OkStatus();
    if (!moved()) {
      std::array<pollfd, 2> fds = {pollfd{fd, POLLIN, 0}, pollfd{socket_.fd(), POLLIN, 0}};
      const int n = poll(fds.data(), fds.size(), MillisUntil(deadline));
      if (n < 0 && errno != EINTR) {
        result = ErrnoError(what, errno);
      } else if (fds[0].revents & POLLIN) {
        uint64_t count;
        [[maybe_unused]] const ssize_t r = read(fd, &count, sizeof(count));
      } else if (fds[1].revents != 0 || shut_.load()) {
        // The Unix socket carries nothing after the handshake: readable means its end.
        if (!moved()) {
          result = absl::UnavailableError(
              absl::StrCat(what, ": connection closed with ", left, " bytes to go"));
        }
      }
      // Whatever poll said (a peer that keeps writing the eventfd must not hold us past it).
      if (result.ok() && SteadyTime::clock::now() >= deadline && !moved()) {
        result = absl::DeadlineExceededError(
            absl::StrCat(what, ": not all through by the deadline (", left, " bytes to go)"));
      }
    }
    waits.store(0, std::memory_order_relaxed);
    return result;
  }

  // The client's side of the handshake: makes the file and eventfds, sends them with the token,
  // to a server of this process's own user only (the token and the tensor bytes go nowhere else).
  absl::Status Offer() {
    ucred peer{};
    socklen_t peer_size = sizeof(peer);
    if (getsockopt(socket_.fd(), SOL_SOCKET, SO_PEERCRED, &peer, &peer_size) != 0) {
      return ErrnoError("shared memory: the socket's owner", errno);
    }
    if (peer.uid != geteuid()) {
      return absl::UnavailableError(absl::StrCat("shared memory: the socket's server runs as uid ",
                                                 peer.uid, ", not ", geteuid(),
                                                 " as this process: not offering it the memory"));
    }
    if (!ValidRingBytes(ring_bytes_)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shared memory: ring bytes must be a power of two in [", kMinRingBytes, ", ",
                       kMaxRingBytes, "], got ", ring_bytes_));
    }
    const int file = memfd_create("psflow-bulk", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (file < 0) return ErrnoError("shared memory: memfd_create", errno);
    Socket owned_file(file);
    map_bytes_ = FileBytes(ring_bytes_);
    if (ftruncate(file, static_cast<off_t>(map_bytes_)) != 0) {
      return ErrnoError("shared memory: ftruncate", errno);
    }
    // The server maps it too: sealed, so that no one can shrink it under either mapping.
    if (fcntl(file, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
      return ErrnoError("shared memory: sealing", errno);
    }
    void* map = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0);
    if (map == MAP_FAILED) return ErrnoError("shared memory: mmap", errno);
    map_ = map;
    auto* header = static_cast<FileHeader*>(map_);
    header->magic = kMagic;
    header->version = kVersion;
    header->ring_bytes = ring_bytes_;
    for (int& fd : event_fds_) {
      fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
      if (fd < 0) return ErrnoError("shared memory: eventfd", errno);
    }
    std::array<int, 1 + kEventFds> fds = {file, event_fds_[0], event_fds_[1], event_fds_[2],
                                          event_fds_[3]};
    std::array<char, 1 + kMaxToken> payload{};
    payload[0] = static_cast<char>(token_.size());
    std::memcpy(payload.data() + 1, token_.data(), token_.size());
    iovec iov{payload.data(), 1 + token_.size()};
    alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(fds))> control{};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(fds));
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(fds));
    if (sendmsg(socket_.fd(), &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(iov.iov_len)) {
      return ErrnoError("shared memory: handing over the memory", errno);
    }
    return absl::OkStatus();
  }

  // The server's side: takes the file and eventfds, checks the token and the layout, maps it.
  absl::Status Take(SteadyTime deadline) {
    pollfd wait{socket_.fd(), POLLIN, 0};
    const int ready = poll(&wait, 1, MillisUntil(deadline));
    if (ready < 0) return ErrnoError("shared memory: waiting for the handshake", errno);
    if (ready == 0) return absl::DeadlineExceededError("shared memory: no handshake in time");
    std::array<char, 1 + kMaxToken> payload{};
    iovec iov{payload.data(), payload.size()};
    alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * (1 + kEventFds))> control{};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    const ssize_t got = recvmsg(socket_.fd(), &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (got < 0) return ErrnoError("shared memory: reading the handshake", errno);
    // Every descriptor that came is ours to close, whatever else is wrong.
    std::array<int, 1 + kEventFds> fds;
    fds.fill(-1);
    size_t received = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (received < fds.size()) {
          fds[received] = fd;
        } else {
          close(fd);
        }
        ++received;
      }
    }
    Socket file(fds[0]);
    for (int i = 0; i < kEventFds; ++i) event_fds_[i] = fds[1 + i];
    const auto refused = [](absl::string_view why) {
      return absl::UnavailableError(absl::StrCat("shared memory: handshake refused: ", why));
    };
    if (got == 0) return refused("the peer closed");
    if ((msg.msg_flags & MSG_CTRUNC) != 0 || received != fds.size()) {
      return refused(absl::StrCat("expected ", fds.size(), " descriptors, got ", received));
    }
    const size_t length = static_cast<unsigned char>(payload[0]);
    if (static_cast<size_t>(got) != 1 + length || length != token_.size() ||
        !TokensEqual(absl::string_view(payload.data() + 1, length), token_)) {
      return refused("wrong token (not a worker of this job, or another task's socket)");
    }
    const int seals = fcntl(file.fd(), F_GET_SEALS);
    if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) return refused("the memory is not sealed");
    struct stat st {};
    if (fstat(file.fd(), &st) != 0) return ErrnoError("shared memory: fstat", errno);
    if (static_cast<size_t>(st.st_size) < kRingsAt) return refused("the memory is too small");
    FileHeader header;
    if (pread(file.fd(), &header, sizeof(header), 0) != static_cast<ssize_t>(sizeof(header))) {
      return ErrnoError("shared memory: reading its header", errno);
    }
    if (header.magic != kMagic || header.version != kVersion ||
        !ValidRingBytes(header.ring_bytes) ||
        static_cast<size_t>(st.st_size) != FileBytes(header.ring_bytes)) {
      return refused("not a psflow shared-memory channel of this version");
    }
    for (int fd : event_fds_) {
      if (!IsEventFd(fd)) return refused("a descriptor that is not an eventfd");
    }
    ring_bytes_ = header.ring_bytes;
    map_bytes_ = FileBytes(ring_bytes_);
    void* map = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, file.fd(), 0);
    if (map == MAP_FAILED) return ErrnoError("shared memory: mmap", errno);
    map_ = map;
    return absl::OkStatus();
  }

  // Compares in time independent of where they differ.
  static bool TokensEqual(absl::string_view a, absl::string_view b) {
    if (a.size() != b.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0;
  }

  const ShmSide side_;
  const std::string token_;
  size_t ring_bytes_;
  bool ready_ = false;  // the handshake succeeded
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  std::array<int, kEventFds> event_fds_;
  Ring out_;
  Ring in_;
  mutable std::atomic<bool> shut_{false};
};

absl::Status CheckPath(const std::string& path) {
  if (path.size() < 2 || path.size() > kMaxUnixSocketPath) {
    return absl::InvalidArgumentError(absl::StrCat("Unix socket path \"", path, "\": must be 2 to ",
                                                   kMaxUnixSocketPath, " characters"));
  }
  return absl::OkStatus();
}

bool Abstract(const std::string& path) { return path[0] == '@'; }

// The address of `path` (an abstract name for "@name": a NUL, then the name) and its length.
std::pair<sockaddr_un, socklen_t> Address(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  if (Abstract(path)) address.sun_path[0] = '\0';
  const socklen_t length =
      Abstract(path) ? static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size())
                     : static_cast<socklen_t>(sizeof(address));
  return {address, length};
}

// Connects to the Unix socket at `path` and hangs up: 0 when something listens there, else
// connect(2)'s errno (ECONNREFUSED: nothing does; EAGAIN: a listener with a full backlog).
int ProbeUnix(const std::string& path) {
  Socket s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) return errno;
  const auto [address, length] = Address(path);
  return connect(s.fd(), reinterpret_cast<const sockaddr*>(&address), length) == 0 ? 0 : errno;
}

}  // namespace

absl::StatusOr<Socket> ListenUnix(const std::string& path) {
  if (absl::Status s = CheckPath(path); !s.ok()) return s;
  struct stat st {};
  if (!Abstract(path) && lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Unix socket path ", path, " exists and is not a socket"));
    }
    // An earlier process's (nothing listens: ECONNREFUSED; gone meanwhile: ENOENT), replaced;
    // any other answer, even a live server's full backlog (EAGAIN), leaves it be.
    if (const int refused = ProbeUnix(path); refused != ECONNREFUSED && refused != ENOENT) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Unix socket ", path, " is served by another process",
          refused == 0 ? ""
                       : absl::StrCat(" (or cannot be probed: ", std::strerror(refused), ")")));
    }
    unlink(path.c_str());
  }
  Socket s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return ErrnoError("Unix socket", errno);
  const auto [address, length] = Address(path);
  if (bind(s.fd(), reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    return ErrnoError(absl::StrCat("binding Unix socket ", path), errno);
  }
  if ((!Abstract(path) && chmod(path.c_str(), 0600) != 0) || listen(s.fd(), 128) != 0) {
    const int err = errno;
    if (!Abstract(path)) unlink(path.c_str());
    return ErrnoError(absl::StrCat("listening on Unix socket ", path), err);
  }
  return s;
}

absl::StatusOr<Socket> AcceptUnix(const Socket& listener) {
  for (;;) {
    const int fd = accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) return Socket(fd);
    if (errno == EINTR || errno == ECONNABORTED) continue;
    return ErrnoError("accepting on a Unix socket", errno);
  }
}

absl::StatusOr<Socket> ConnectUnix(const std::string& path) {
  if (absl::Status s = CheckPath(path); !s.ok()) return s;
  Socket s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) return ErrnoError("Unix socket", errno);
  const auto [address, length] = Address(path);
  if (connect(s.fd(), reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    return ErrnoError(absl::StrCat("connecting to Unix socket ", path), errno);
  }
  return s;
}

std::unique_ptr<BulkStream> MakeShmStream(Socket socket, ShmSide side, std::string token,
                                          size_t ring_bytes) {
  return std::make_unique<ShmStream>(std::move(socket), side, std::move(token), ring_bytes);
}

}  // namespace psflow
