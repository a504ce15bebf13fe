#include "bench/baselines.h"

#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "bench_proto/bench_bytes.grpc.pb.h"
#include "core/status_macros.h"

namespace psflow::bench {
namespace {

// A blocking socket call that makes no progress for this long fails the run (SO_RCVTIMEO,
// SO_SNDTIMEO): a watchdog against hangs, far above what a healthy loopback transfer needs.
constexpr int kStallSeconds = 60;
// Deadline of one gRPC call: one share in one direction.
constexpr std::chrono::seconds kRpcDeadline{120};
// How long a connection may take to be established (accept, WaitForConnected).
constexpr int kConnectSeconds = 10;

// ---------------------------------------------------------------------------------------------
// What both baselines share: the pattern's arithmetic, buffers, timing and the round loop.

absl::Status Validate(const TransferPattern& p) {
  if (p.workers < 1 || p.ps_tasks < 1) {
    return absl::InvalidArgumentError(absl::StrCat("workers (", p.workers, ") and ps_tasks (",
                                                   p.ps_tasks, ") must be at least 1"));
  }
  if (p.model_bytes < p.ps_tasks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model_bytes (", p.model_bytes, ") must be at least ps_tasks (", p.ps_tasks, ")"));
  }
  if (p.rounds < 1 || p.warmup_rounds < 0) {
    return absl::InvalidArgumentError(absl::StrCat("rounds (", p.rounds,
                                                   ") must be at least 1 and warmup_rounds (",
                                                   p.warmup_rounds, ") at least 0"));
  }
  return absl::OkStatus();
}

// The bytes [offset, offset + size) of the model that one ps task holds.
struct Share {
  int64_t offset;
  int64_t size;
};

Share ShareOf(const TransferPattern& p, int task) {
  const int64_t base = p.model_bytes / p.ps_tasks;
  const int64_t offset = base * task;
  return {offset, task == p.ps_tasks - 1 ? p.model_bytes - offset : base};
}

// The model's bytes as the workers push them and, in the end, must pull them back.
std::vector<char> ModelPattern(int64_t bytes) {
  std::vector<char> v(static_cast<size_t>(bytes));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<char>((i * 131 + 7) >> 3);
  return v;
}

// After the run: every worker's parameters are the model's bytes.
absl::Status CheckPulled(const std::vector<std::vector<char>>& params,
                         const std::vector<char>& model) {
  for (size_t w = 0; w < params.size(); ++w) {
    if (params[w] != model) {
      return absl::InternalError(
          absl::StrCat("worker ", w, " pulled parameters that differ from the servers' bytes"));
    }
  }
  return absl::OkStatus();
}

// A reusable barrier of `parties` threads that can be aborted: then every wait, present and
// future, returns false. `on_complete` runs in the last arriving thread before the others go on.
class Rendezvous {
 public:
  explicit Rendezvous(int parties, std::function<void()> on_complete = {})
      : parties_(parties), on_complete_(std::move(on_complete)) {}

  bool ArriveAndWait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (aborted_) return false;
    const uint64_t generation = generation_;
    if (++arrived_ == parties_) {
      if (on_complete_) on_complete_();
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return true;
    }
    cv_.wait(lock, [&] { return aborted_ || generation_ != generation; });
    return generation_ != generation;
  }

  void Abort() {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }

 private:
  const int parties_;
  const std::function<void()> on_complete_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;          // guarded by mu_
  uint64_t generation_ = 0;  // guarded by mu_
  bool aborted_ = false;     // guarded by mu_
};

// One connection's work in one round: push the worker's share of its gradients to the task, then
// pull the task's share of the parameters back.
using RoundFn = std::function<absl::Status()>;

// Runs the rounds of a pattern and keeps its first failure. Threads that serve the transport
// (TCP server threads) report their failures here too.
class Harness {
 public:
  // `on_abort` runs once, at the first failure, in the failing thread; it must unblock every
  // thread stuck in the transport (shut the sockets down).
  Harness(const TransferPattern& pattern, std::function<void()> on_abort)
      : pattern_(pattern),
        on_abort_(std::move(on_abort)),
        timing_start_(pattern.workers * pattern.ps_tasks,
                      [this] {
                        cpu_start_ = ProcessCpu();
                        start_ = std::chrono::steady_clock::now();
                      }),
        timing_stop_(pattern.workers * pattern.ps_tasks, [this] {
          stop_ = std::chrono::steady_clock::now();
          cpu_stop_ = ProcessCpu();
        }) {
    for (int w = 0; w < pattern.workers; ++w) {
      step_done_.push_back(std::make_unique<Rendezvous>(pattern.ps_tasks));
    }
  }

  // Records the first failure, releases every thread waiting in Run and calls on_abort.
  void Fail(absl::Status status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!status_.ok()) return;
      status_ = std::move(status);
    }
    timing_start_.Abort();
    timing_stop_.Abort();
    for (auto& r : step_done_) r->Abort();
    if (on_abort_) on_abort_();
  }

  absl::Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

  // Starts `body` on a new thread in `threads`; a failure to start one fails the run.
  template <typename F>
  void StartThread(std::vector<std::thread>& threads, F&& body) {
    try {
      threads.emplace_back(std::forward<F>(body));
    } catch (const std::system_error& e) {
      Fail(absl::ResourceExhaustedError(absl::StrCat("cannot start a thread: ", e.what())));
    }
  }

  // Runs warmup_rounds + rounds: one thread per (worker w, task t) calling
  // round_fns[w * ps_tasks + t] once per round. Returns when every one of them has ended.
  void Run(const std::vector<RoundFn>& round_fns) {
    std::vector<std::thread> threads;
    for (int w = 0; w < pattern_.workers && status().ok(); ++w) {
      for (int t = 0; t < pattern_.ps_tasks && status().ok(); ++t) {
        StartThread(threads, [this, w, &fn = round_fns[w * pattern_.ps_tasks + t]] {
          ConnectionLoop(w, fn);
        });
      }
    }
    for (auto& t : threads) t.join();
  }

  // The figures of the timed rounds; valid when Run ended with status() OK.
  TransferResult result() const {
    TransferResult r;
    r.seconds = std::chrono::duration<double>(stop_ - start_).count();
    r.cpu_seconds = cpu_stop_.total - cpu_start_.total;
    r.kernel_seconds = cpu_stop_.kernel - cpu_start_.kernel;
    r.bytes_moved = 2 * pattern_.model_bytes * pattern_.workers * pattern_.rounds;
    return r;
  }

 private:
  void ConnectionLoop(int worker, const RoundFn& round) {
    const int64_t total = pattern_.warmup_rounds + pattern_.rounds;
    for (int64_t r = 0; r < total; ++r) {
      if (r == pattern_.warmup_rounds && !timing_start_.ArriveAndWait()) return;
      if (absl::Status s = round(); !s.ok()) {
        Fail(std::move(s));
        return;
      }
      // The worker's next step starts when all of its pulls are done.
      if (!step_done_[worker]->ArriveAndWait()) return;
    }
    timing_stop_.ArriveAndWait();
  }

  const TransferPattern pattern_;
  const std::function<void()> on_abort_;
  std::mutex mu_;
  absl::Status status_;  // guarded by mu_
  // Written by the last thread to arrive at the rendezvous, read after the threads are joined.
  std::chrono::steady_clock::time_point start_, stop_;
  CpuTime cpu_start_, cpu_stop_;
  Rendezvous timing_start_, timing_stop_;
  std::vector<std::unique_ptr<Rendezvous>> step_done_;  // one per worker
};

// ---------------------------------------------------------------------------------------------
// Raw TCP.

absl::Status ErrnoError(absl::string_view what, int err) {
  char buf[256];
  const char* message = strerror_r(err, buf, sizeof(buf));  // GNU: returns the message
  if (err == EAGAIN || err == EWOULDBLOCK) {
    return absl::DeadlineExceededError(
        absl::StrCat(what, ": no progress in ", kStallSeconds, " s (", message, ")"));
  }
  return absl::UnavailableError(absl::StrCat(what, ": ", message));
}

// An owned file descriptor.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Socket& operator=(Socket&& other) noexcept {
    if (this != &other) {
      Close();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~Socket() { Close(); }

  int fd() const { return fd_; }

 private:
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  int fd_ = -1;
};

absl::StatusOr<Socket> NewTcpSocket(absl::string_view what) {
  Socket s(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.fd() < 0) return ErrnoError(absl::StrCat("socket() for ", what), errno);
  return s;
}

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

// TCP_NODELAY and the stall watchdog on a connected socket. The buffer sizes are left to the
// kernel's autotuning (setting SO_RCVBUF would cap them at net.core.rmem_max).
absl::Status ConfigureConnection(int fd, absl::string_view what) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return ErrnoError(absl::StrCat("TCP_NODELAY on ", what), errno);
  }
  const timeval stall{kStallSeconds, 0};
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &stall, sizeof(stall)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &stall, sizeof(stall)) != 0) {
    return ErrnoError(absl::StrCat("SO_RCVTIMEO/SO_SNDTIMEO on ", what), errno);
  }
  return absl::OkStatus();
}

// A listener on 127.0.0.1 at a port the OS picks; its port in *port.
absl::StatusOr<Socket> Listen(int backlog, int* port, absl::string_view what) {
  ASSIGN_OR_RETURN(Socket s, NewTcpSocket(what));
  sockaddr_in addr = Loopback(0);
  if (bind(s.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return ErrnoError(absl::StrCat("bind 127.0.0.1:0 for ", what), errno);
  }
  if (listen(s.fd(), backlog) != 0) return ErrnoError(absl::StrCat("listen for ", what), errno);
  socklen_t len = sizeof(addr);
  if (getsockname(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return ErrnoError(absl::StrCat("getsockname for ", what), errno);
  }
  *port = ntohs(addr.sin_port);
  return s;
}

absl::StatusOr<Socket> Connect(int port, absl::string_view what) {
  ASSIGN_OR_RETURN(Socket s, NewTcpSocket(what));
  const sockaddr_in addr = Loopback(port);
  if (connect(s.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return ErrnoError(absl::StrCat("connect to 127.0.0.1:", port, " for ", what), errno);
  }
  RETURN_IF_ERROR(ConfigureConnection(s.fd(), what));
  return s;
}

absl::StatusOr<Socket> Accept(int listener, absl::string_view what) {
  pollfd pfd{listener, POLLIN, 0};
  int ready;
  do {
    ready = poll(&pfd, 1, kConnectSeconds * 1000);
  } while (ready < 0 && errno == EINTR);
  if (ready < 0) return ErrnoError(absl::StrCat("poll for ", what), errno);
  if (ready == 0) {
    return absl::DeadlineExceededError(
        absl::StrCat(what, ": no connection to accept in ", kConnectSeconds, " s"));
  }
  Socket s(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (s.fd() < 0) return ErrnoError(absl::StrCat("accept for ", what), errno);
  RETURN_IF_ERROR(ConfigureConnection(s.fd(), what));
  return s;
}

absl::Status SendAll(int fd, const char* data, int64_t size, absl::string_view what) {
  while (size > 0) {
    const ssize_t n = send(fd, data, static_cast<size_t>(size), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(absl::StrCat("send ", what), errno);
    }
    data += n;
    size -= n;
  }
  return absl::OkStatus();
}

absl::Status RecvAll(int fd, char* data, int64_t size, absl::string_view what) {
  while (size > 0) {
    const ssize_t n = recv(fd, data, static_cast<size_t>(size), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(absl::StrCat("recv ", what), errno);
    }
    if (n == 0) {
      return absl::UnavailableError(
          absl::StrCat("recv ", what, ": connection closed with ", size, " bytes to go"));
    }
    data += n;
    size -= n;
  }
  return absl::OkStatus();
}

std::string ConnectionName(int worker, int task) {
  return absl::StrCat("worker ", worker, " <-> ps task ", task);
}

// ---------------------------------------------------------------------------------------------
// Plain gRPC.

// One ps task: the service of bench_bytes.proto over the task's share of the model.
class BytesService final : public proto::BytesService::Service {
 public:
  explicit BytesService(std::vector<char> share) : buffer_(std::move(share)) {}

  grpc::Status Push(grpc::ServerContext*, const proto::BytesMessage* request,
                    proto::Empty*) override {
    if (request->data().size() != buffer_.size()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("pushed ", request->data().size(), " bytes, the task holds ",
                                       buffer_.size()));
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::memcpy(buffer_.data(), request->data().data(), buffer_.size());
    return grpc::Status::OK;
  }

  grpc::Status Pull(grpc::ServerContext*, const proto::Empty*,
                    proto::BytesMessage* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    response->set_data(buffer_.data(), buffer_.size());
    return grpc::Status::OK;
  }

 private:
  std::mutex mu_;
  std::vector<char> buffer_;  // guarded by mu_
};

// Started gRPC servers, shut down (and waited for) on destruction. Destroy before their services.
class ServerGroup {
 public:
  ServerGroup() = default;
  ServerGroup(const ServerGroup&) = delete;
  ServerGroup& operator=(const ServerGroup&) = delete;
  ~ServerGroup() {
    const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(5);
    for (auto& s : servers_) s->Shutdown(deadline);
    for (auto& s : servers_) s->Wait();
  }
  void Add(std::unique_ptr<grpc::Server> server) { servers_.push_back(std::move(server)); }

 private:
  std::vector<std::unique_ptr<grpc::Server>> servers_;
};

// One (worker, task) connection of the gRPC baseline; messages reused from round to round.
struct GrpcConnection {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<proto::BytesService::Stub> stub;
  proto::BytesMessage request;
  proto::BytesMessage response;
  std::mutex mu;
  grpc::ClientContext* in_flight = nullptr;  // guarded by mu
  bool cancelled = false;                    // guarded by mu
};

// Makes one call, `call(&context)`, on `c` that Cancel can cut short.
template <typename Call>
grpc::Status CancellableCall(GrpcConnection& c, Call&& call) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.cancelled) return grpc::Status(grpc::StatusCode::CANCELLED, "the run was aborted");
    c.in_flight = &context;
  }
  grpc::Status status = std::forward<Call>(call)(&context);
  std::lock_guard<std::mutex> lock(c.mu);
  c.in_flight = nullptr;
  return status;
}

// Cancels the call in flight on `c`, if any, and every later one.
void Cancel(GrpcConnection& c) {
  std::lock_guard<std::mutex> lock(c.mu);
  c.cancelled = true;
  if (c.in_flight != nullptr) c.in_flight->TryCancel();
}

absl::Status GrpcError(absl::string_view what, const grpc::Status& s) {
  return absl::UnavailableError(
      absl::StrCat(what, " failed: gRPC code ", s.error_code(), ": ", s.error_message()));
}

}  // namespace

CpuTime ProcessCpu() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return CpuTime{seconds(u.ru_utime) + seconds(u.ru_stime), seconds(u.ru_stime)};
}

absl::StatusOr<TransferResult> RunTcpPump(const TransferPattern& pattern) {
  RETURN_IF_ERROR(Validate(pattern));
  const int workers = pattern.workers, tasks = pattern.ps_tasks;
  const int64_t total_rounds = pattern.warmup_rounds + pattern.rounds;

  // Buffers, allocated and touched before any timing.
  const std::vector<char> model = ModelPattern(pattern.model_bytes);
  std::vector<std::vector<char>> task_params(tasks);  // what each task sends back
  std::vector<std::vector<char>> landing(static_cast<size_t>(workers) * tasks);  // per connection
  for (int t = 0; t < tasks; ++t) {
    const Share s = ShareOf(pattern, t);
    task_params[t].assign(model.begin() + s.offset, model.begin() + s.offset + s.size);
    for (int w = 0; w < workers; ++w) landing[w * tasks + t].resize(static_cast<size_t>(s.size));
  }
  const std::vector<std::vector<char>> gradients(workers, model);
  std::vector<std::vector<char>> params(workers, std::vector<char>(model.size()));

  // Connections: clients[w * tasks + t] and servers[w * tasks + t] are its two ends.
  std::vector<Socket> clients(static_cast<size_t>(workers) * tasks);
  std::vector<Socket> servers(clients.size());
  for (int t = 0; t < tasks; ++t) {
    int port = 0;
    ASSIGN_OR_RETURN(Socket listener, Listen(workers, &port, absl::StrCat("tcp pump ps task ", t)));
    // Each connection is accepted right after it is made (connect completes in the listen
    // backlog), so the two ends pair up.
    for (int w = 0; w < workers; ++w) {
      const std::string name = absl::StrCat("tcp pump ", ConnectionName(w, t));
      ASSIGN_OR_RETURN(clients[w * tasks + t], Connect(port, name));
      ASSIGN_OR_RETURN(servers[w * tasks + t], Accept(listener.fd(), name));
    }
  }

  // A failure shuts every connection down: blocked send/recv calls return and their threads end.
  // The sockets are closed only after every thread is joined.
  Harness harness(pattern, [&] {
    for (auto* ends : {&clients, &servers}) {
      for (const Socket& s : *ends) shutdown(s.fd(), SHUT_RDWR);
    }
  });

  std::vector<std::thread> server_threads;
  for (int w = 0; w < workers && harness.status().ok(); ++w) {
    for (int t = 0; t < tasks && harness.status().ok(); ++t) {
      harness.StartThread(server_threads, [&, w, t] {
        const int c = w * tasks + t;
        const std::string name = absl::StrCat("tcp pump ps task ", t, " (from worker ", w, ")");
        std::vector<char>& in = landing[c];
        const std::vector<char>& out = task_params[t];
        for (int64_t r = 0; r < total_rounds; ++r) {
          absl::Status s = RecvAll(servers[c].fd(), in.data(), static_cast<int64_t>(in.size()),
                                   absl::StrCat(name, " gradients"));
          if (s.ok()) {
            s = SendAll(servers[c].fd(), out.data(), static_cast<int64_t>(out.size()),
                        absl::StrCat(name, " parameters"));
          }
          if (!s.ok()) {
            harness.Fail(std::move(s));
            return;
          }
        }
      });
    }
  }

  std::vector<RoundFn> rounds;
  for (int w = 0; w < workers; ++w) {
    for (int t = 0; t < tasks; ++t) {
      rounds.push_back([&, w, t, name = ConnectionName(w, t)]() -> absl::Status {
        const Share s = ShareOf(pattern, t);
        const int fd = clients[w * tasks + t].fd();
        RETURN_IF_ERROR(SendAll(fd, gradients[w].data() + s.offset, s.size,
                                absl::StrCat("tcp pump gradients ", name)));
        return RecvAll(fd, params[w].data() + s.offset, s.size,
                       absl::StrCat("tcp pump parameters ", name));
      });
    }
  }
  if (harness.status().ok()) harness.Run(rounds);
  for (auto& t : server_threads) t.join();
  RETURN_IF_ERROR(harness.status());
  RETURN_IF_ERROR(CheckPulled(params, model));
  return harness.result();
}

absl::StatusOr<TransferResult> RunGrpcBytes(const TransferPattern& pattern) {
  RETURN_IF_ERROR(Validate(pattern));
  const int workers = pattern.workers, tasks = pattern.ps_tasks;
  // A protobuf message must serialize to under 2 GiB; leave room for the field's header.
  if (ShareOf(pattern, tasks - 1).size > INT_MAX - 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("grpc bytes: a ps task's share (", ShareOf(pattern, tasks - 1).size,
                     " bytes) does not fit in one protobuf message (2 GiB); use more ps tasks"));
  }

  const std::vector<char> model = ModelPattern(pattern.model_bytes);
  const std::vector<std::vector<char>> gradients(workers, model);
  std::vector<std::vector<char>> params(workers, std::vector<char>(model.size()));

  // Servers, one per task. `services` outlives `servers` (declared first, destroyed last).
  std::vector<std::unique_ptr<BytesService>> services;
  ServerGroup servers;
  std::vector<int> ports;
  for (int t = 0; t < tasks; ++t) {
    const Share s = ShareOf(pattern, t);
    services.push_back(std::make_unique<BytesService>(
        std::vector<char>(model.begin() + s.offset, model.begin() + s.offset + s.size)));
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(services.back().get());
    builder.SetMaxReceiveMessageSize(-1);
    builder.SetMaxSendMessageSize(-1);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (server == nullptr || port == 0) {
      return absl::UnavailableError(
          absl::StrCat("grpc bytes: cannot start the server of ps task ", t, " on 127.0.0.1:0"));
    }
    servers.Add(std::move(server));
    ports.push_back(port);
  }

  // One channel per (worker, task): a local subchannel pool keeps channels to the same address
  // from sharing one TCP connection, as the workers of a real job (separate processes) would not.
  std::vector<GrpcConnection> connections(static_cast<size_t>(workers) * tasks);
  for (int w = 0; w < workers; ++w) {
    for (int t = 0; t < tasks; ++t) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(-1);
      args.SetMaxSendMessageSize(-1);
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      GrpcConnection& c = connections[w * tasks + t];
      c.channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", ports[t]),
                                            grpc::InsecureChannelCredentials(), args);
      if (!c.channel->WaitForConnected(std::chrono::system_clock::now() +
                                       std::chrono::seconds(kConnectSeconds))) {
        return absl::UnavailableError(absl::StrCat("grpc bytes: ", ConnectionName(w, t),
                                                   ": no connection to 127.0.0.1:", ports[t],
                                                   " in ", kConnectSeconds, " s"));
      }
      c.stub = proto::BytesService::NewStub(c.channel);
    }
  }

  // A failure cancels the calls in flight; the other threads stop at the end of their round.
  Harness harness(pattern, [&] {
    for (GrpcConnection& c : connections) Cancel(c);
  });
  std::vector<RoundFn> rounds;
  for (int w = 0; w < workers; ++w) {
    for (int t = 0; t < tasks; ++t) {
      rounds.push_back([&, w, t, name = ConnectionName(w, t)]() -> absl::Status {
        const Share s = ShareOf(pattern, t);
        GrpcConnection& c = connections[w * tasks + t];
        c.request.set_data(gradients[w].data() + s.offset, static_cast<size_t>(s.size));
        proto::Empty empty;
        grpc::Status status = CancellableCall(c, [&](grpc::ClientContext* context) {
          return c.stub->Push(context, c.request, &empty);
        });
        if (!status.ok()) return GrpcError(absl::StrCat("grpc bytes: Push ", name), status);
        status = CancellableCall(c, [&](grpc::ClientContext* context) {
          return c.stub->Pull(context, empty, &c.response);
        });
        if (!status.ok()) return GrpcError(absl::StrCat("grpc bytes: Pull ", name), status);
        if (static_cast<int64_t>(c.response.data().size()) != s.size) {
          return absl::InternalError(absl::StrCat("grpc bytes: Pull ", name, " returned ",
                                                  c.response.data().size(), " bytes, not ",
                                                  s.size));
        }
        std::memcpy(params[w].data() + s.offset, c.response.data().data(),
                    static_cast<size_t>(s.size));
        return absl::OkStatus();
      });
    }
  }
  harness.Run(rounds);
  RETURN_IF_ERROR(harness.status());
  RETURN_IF_ERROR(CheckPulled(params, model));
  return harness.result();
}

}  // namespace psflow::bench
