// `psflow run --emulate_network`: an emulated cluster on one machine. Every replica runs in its
// own Linux network namespace, linked by a veth pair to a bridge that lives in a namespace of its
// own, each link shaped both ways with tc (link_shape.h). Replicas reach each other at private
// addresses 10.N.1.<i+1>/16, N the first of 200..254 with no address of that /16 on any interface
// of this machine (its own namespace or any named one); the bridge has 10.N.0.1.
//
// What it touches: only namespaces it creates, named "psf-<pid>-br" and "psf-<pid>-<replica>",
// <pid> the runner's; in the host's own namespace it creates, changes and reads nothing but the
// list of addresses. `ip` and `tc` (iproute2) run as child processes (argv, no shell): an error
// names the command and what it printed. Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN).
//
// Teardown: Teardown() or the destructor deletes every namespace this object created (and so
// every interface and qdisc in them); a Create() that fails half-way deletes what it made
// before it returns. A runner killed with SIGKILL leaves its namespaces behind:
// RemoveAbandoned() deletes those whose owner is no longer a running psflow.
// Not thread-safe, except RunInBridge (any thread).
#ifndef PSFLOW_OPERATOR_LOCAL_NETWORK_EMULATION_H_
#define PSFLOW_OPERATOR_LOCAL_NETWORK_EMULATION_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/file_util.h"
#include "operator/local/link_shape.h"

namespace psflow::local {

// The prefix of every namespace that runner `pid` creates: "psf-<pid>-".
std::string NamespacePrefix(pid_t pid);

class NetworkEmulation {
 public:
  // OK when this process may create namespaces (root, or CAP_NET_ADMIN and CAP_SYS_ADMIN) and
  // finds `ip` and `tc` (in PATH, /usr/sbin or /sbin); else FAILED_PRECONDITION saying what is
  // missing and what to do.
  static absl::Status CheckPrerequisites();

  // Deletes the namespaces named "psf-<pid>-..." whose <pid> is not a running psflow, i.e. left
  // by a run that was killed. Returns their names.
  static absl::StatusOr<std::vector<std::string>> RemoveAbandoned();

  // Creates the bridge namespace and one namespace per name in `replicas` (at most 64; names
  // such as "worker-0"), each linked to the bridge by a link shaped as `shape`.
  static absl::StatusOr<std::unique_ptr<NetworkEmulation>> Create(
      const LinkShape& shape, const std::vector<std::string>& replicas);

  ~NetworkEmulation();  // Teardown(), its error dropped
  NetworkEmulation(const NetworkEmulation&) = delete;
  NetworkEmulation& operator=(const NetworkEmulation&) = delete;

  // Deletes every namespace created; the first error (the rest are still tried). Idempotent.
  absl::Status Teardown();

  // Replica i's address ("10.N.1.<i+1>"), i indexing the names given to Create.
  std::string Address(int replica) const;
  // argv run in replica i's namespace: "ip netns exec <its namespace> argv...".
  std::vector<std::string> Wrap(int replica, const std::vector<std::string>& argv) const;
  const std::string& prefix() const { return prefix_; }

  // Runs fn on a thread of its own that joined the bridge namespace (setns(2)), and waits for
  // it: what fn connects to is then every replica's address. The caller's thread and the rest of
  // the process stay where they are. INTERNAL when the thread cannot join the namespace.
  absl::Status RunInBridge(const std::function<void()>& fn) const;

  // What crossed replica i's link so far, as its end of the veth counted it.
  struct LinkBytes {
    int64_t sent = 0;
    int64_t received = 0;
  };
  absl::StatusOr<LinkBytes> Counters(int replica) const;

 private:
  NetworkEmulation(std::string ip, std::string prefix, int subnet)
      : ip_(std::move(ip)), prefix_(std::move(prefix)), subnet_(subnet) {}
  absl::Status Build(const LinkShape& shape, const std::vector<std::string>& replicas,
                     const std::string& tc);
  // `ip netns add name`, remembered for Teardown once it succeeded.
  absl::Status AddNamespace(const std::string& name);

  std::string ip_;  // the ip binary's path
  std::string prefix_;
  int subnet_;          // N of 10.N.0.0/16
  std::string bridge_;  // the bridge namespace's name
  std::vector<std::string> replica_namespaces_;
  std::vector<std::string> created_;  // namespaces to delete, in creation order
};

}  // namespace psflow::local

#endif  // PSFLOW_OPERATOR_LOCAL_NETWORK_EMULATION_H_
