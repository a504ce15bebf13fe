#include "operator/local/network_emulation.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"
#include "operator/local/child_process.h"

namespace psflow::local {
namespace {

constexpr char kNetnsDir[] = "/run/netns";  // where `ip netns` keeps the named namespaces
constexpr int kMaxReplicas = 64;
constexpr int kFirstSubnet = 200, kLastSubnet = 254;
constexpr int kCapNetAdmin = 12, kCapSysAdmin = 21;

// The first executable `name` in $PATH, /usr/sbin or /sbin; empty when there is none.
std::string FindTool(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(absl::StrCat(path ? path : "", ":/usr/sbin:/sbin"), ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

// Runs argv (an ip or tc command) to its end; its output when it exits 0, else an error naming
// the command and what it printed.
absl::StatusOr<std::string> RunTool(const std::vector<std::string>& argv) {
  const std::string command = absl::StrJoin(argv, " ");
  ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> p,
                   ChildProcess::Spawn(argv, {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}));
  std::string output;
  const std::optional<ExitStatus> status = p->WaitWithOutput(std::chrono::seconds(30), &output);
  if (!status) {
    return absl::DeadlineExceededError(absl::StrCat("`", command, "` did not end in 30s"));
  }
  if (!status->ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "`", command, "` failed (", status->Describe(), "): ", absl::StripAsciiWhitespace(output)));
  }
  return output;
}

// The effective capability set of this process (/proc/self/status CapEff), 0 if unreadable.
uint64_t EffectiveCapabilities() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "CapEff:")) {
      uint64_t caps = 0;
      return absl::SimpleHexAtoi(absl::StripAsciiWhitespace(rest), &caps) ? caps : 0;
    }
  }
  return 0;
}

// The named namespaces (`ip netns list`); none when the folder does not exist.
std::vector<std::string> NamedNamespaces() {
  auto names = DirNames(kNetnsDir);
  return names.ok() ? *names : std::vector<std::string>{};
}

// The owner pid in "psf-<pid>-...", or -1 when `name` is not one of psflow's.
pid_t OwnerOf(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "psf-")) return -1;
  const size_t dash = name.find('-');
  int pid = 0;
  if (dash == absl::string_view::npos || !absl::SimpleAtoi(name.substr(0, dash), &pid) ||
      pid <= 0) {
    return -1;
  }
  return pid;
}

bool IsRunningPsflow(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/comm"));
  std::string comm;
  return std::getline(in, comm) && comm == "psflow";
}

// N of every 10.N.x.y address in `ip -o -4 addr show` output.
void CollectTenSubnets(absl::string_view ip_output, std::set<int>& used) {
  for (absl::string_view line : absl::StrSplit(ip_output, '\n')) {
    const size_t at = line.find(" inet 10.");
    if (at == absl::string_view::npos) continue;
    const absl::string_view rest = line.substr(at + 9);
    int n = 0;
    if (absl::SimpleAtoi(rest.substr(0, rest.find('.')), &n)) used.insert(n);
  }
}

}  // namespace

std::string NamespacePrefix(pid_t pid) { return absl::StrCat("psf-", pid, "-"); }

absl::Status NetworkEmulation::CheckPrerequisites() {
  const uint64_t needed = (uint64_t{1} << kCapNetAdmin) | (uint64_t{1} << kCapSysAdmin);
  if ((EffectiveCapabilities() & needed) != needed) {
    return absl::FailedPreconditionError(
        "--emulate_network needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN, to create network "
        "namespaces): run psflow as root, or without --emulate_network");
  }
  for (const char* tool : {"ip", "tc"}) {
    if (FindTool(tool).empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--emulate_network needs iproute2's `", tool,
          "`, found neither in PATH nor in /usr/sbin or /sbin: install iproute2 (scripts/setup.sh "
          "does)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> NetworkEmulation::RemoveAbandoned() {
  const std::string ip = FindTool("ip");
  std::vector<std::string> removed;
  for (const std::string& name : NamedNamespaces()) {
    const pid_t owner = OwnerOf(name);
    if (owner < 0 || IsRunningPsflow(owner)) continue;
    RETURN_IF_ERROR(RunTool({ip, "netns", "delete", name}).status());
    removed.push_back(name);
  }
  return removed;
}

absl::StatusOr<std::unique_ptr<NetworkEmulation>> NetworkEmulation::Create(
    const LinkShape& shape, const std::vector<std::string>& replicas) {
  if (replicas.size() > kMaxReplicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("--emulate_network links at most ", kMaxReplicas, " replicas"));
  }
  const std::string ip = FindTool("ip"), tc = FindTool("tc");
  // The /16 must be free on every interface: the host's own and those of named namespaces.
  std::set<int> used;
  ASSIGN_OR_RETURN(const std::string host, RunTool({ip, "-o", "-4", "addr", "show"}));
  CollectTenSubnets(host, used);
  for (const std::string& name : NamedNamespaces()) {
    auto addresses = RunTool({ip, "-n", name, "-o", "-4", "addr", "show"});
    if (addresses.ok()) CollectTenSubnets(*addresses, used);  // it may have gone meanwhile
  }
  int subnet = kFirstSubnet;
  while (subnet <= kLastSubnet && used.count(subnet) > 0) ++subnet;
  if (subnet > kLastSubnet) {
    return absl::FailedPreconditionError(
        absl::StrCat("--emulate_network: every 10.N.0.0/16 with N in ", kFirstSubnet, "..",
                     kLastSubnet, " has addresses on this machine; none is free for the replicas"));
  }
  std::unique_ptr<NetworkEmulation> net(
      new NetworkEmulation(ip, NamespacePrefix(getpid()), subnet));
  if (absl::Status built = net->Build(shape, replicas, tc); !built.ok()) {
    net->Teardown().IgnoreError();  // the error that stopped the build is the one to report
    return built;
  }
  return net;
}

absl::Status NetworkEmulation::AddNamespace(const std::string& name) {
  RETURN_IF_ERROR(RunTool({ip_, "netns", "add", name}).status());
  created_.push_back(name);
  return RunTool({ip_, "-n", name, "link", "set", "lo", "up"}).status();
}

absl::Status NetworkEmulation::Build(const LinkShape& shape,
                                     const std::vector<std::string>& replicas,
                                     const std::string& tc) {
  auto run = [](const std::vector<std::string>& argv) { return RunTool(argv).status(); };
  auto shape_link = [&](const std::string& ns, const std::string& device) -> absl::Status {
    for (std::vector<std::string> command : QdiscCommands(shape, device)) {
      command.insert(command.begin(), {tc, "-n", ns});
      if (absl::Status s = run(command); !s.ok()) {
        if (absl::StrContains(s.message(), "qdisc kind is unknown")) {
          return absl::FailedPreconditionError(
              absl::StrCat(s.message(),
                           " (this kernel lacks the qdisc; a DELAY or LOSS needs sch_netem: "
                           "`modprobe sch_netem`, or give a RATE alone)"));
        }
        return s;
      }
    }
    return absl::OkStatus();
  };
  bridge_ = prefix_ + "br";
  RETURN_IF_ERROR(AddNamespace(bridge_));
  RETURN_IF_ERROR(run({ip_, "-n", bridge_, "link", "add", "br0", "type", "bridge"}));
  RETURN_IF_ERROR(run(
      {ip_, "-n", bridge_, "addr", "add", absl::StrCat("10.", subnet_, ".0.1/16"), "dev", "br0"}));
  RETURN_IF_ERROR(run({ip_, "-n", bridge_, "link", "set", "br0", "up"}));
  for (size_t i = 0; i < replicas.size(); ++i) {
    const std::string ns = prefix_ + replicas[i], port = absl::StrCat("r", i);
    RETURN_IF_ERROR(AddNamespace(ns));
    replica_namespaces_.push_back(ns);
    // Both ends are created where they live: nothing passes through the host's namespace.
    RETURN_IF_ERROR(run({ip_, "-n", bridge_, "link", "add", port, "type", "veth", "peer", "name",
                         "eth0", "netns", ns}));
    RETURN_IF_ERROR(run({ip_, "-n", bridge_, "link", "set", port, "master", "br0", "up"}));
    RETURN_IF_ERROR(run({ip_, "-n", ns, "addr", "add",
                         absl::StrCat(Address(static_cast<int>(i)), "/16"), "dev", "eth0"}));
    RETURN_IF_ERROR(run({ip_, "-n", ns, "link", "set", "eth0", "up"}));
    RETURN_IF_ERROR(shape_link(ns, "eth0"));     // what the replica sends
    RETURN_IF_ERROR(shape_link(bridge_, port));  // what it receives
  }
  return absl::OkStatus();
}

NetworkEmulation::~NetworkEmulation() { Teardown().IgnoreError(); }

absl::Status NetworkEmulation::Teardown() {
  absl::Status first;
  // Replicas first, the bridge last: deleting a namespace deletes its veth end and the peer.
  while (!created_.empty()) {
    first.Update(RunTool({ip_, "netns", "delete", created_.back()}).status());
    created_.pop_back();
  }
  return first;
}

std::string NetworkEmulation::Address(int replica) const {
  return absl::StrCat("10.", subnet_, ".1.", replica + 1);
}

std::vector<std::string> NetworkEmulation::Wrap(int replica,
                                                const std::vector<std::string>& argv) const {
  std::vector<std::string> wrapped = {ip_, "netns", "exec", replica_namespaces_.at(replica)};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return wrapped;
}

absl::Status NetworkEmulation::RunInBridge(const std::function<void()>& fn) const {
  absl::Status status;
  std::thread thread([&] {
    Fd ns(open(absl::StrCat(kNetnsDir, "/", bridge_).c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns.valid() || setns(ns.get(), CLONE_NEWNET) != 0) {
      status = absl::InternalError(
          absl::StrCat("joining network namespace ", bridge_, ": ", strerror(errno)));
      return;
    }
    fn();  // the thread ends here, and its namespace with it
  });
  thread.join();
  return status;
}

absl::StatusOr<NetworkEmulation::LinkBytes> NetworkEmulation::Counters(int replica) const {
  ASSIGN_OR_RETURN(const std::string text, RunTool({ip_, "-n", replica_namespaces_.at(replica),
                                                    "-j", "-s", "link", "show", "dev", "eth0"}));
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto counter = [&](const char* direction) -> const nlohmann::json* {
    if (!json.is_array() || json.empty() || !json[0].is_object()) return nullptr;
    const auto stats = json[0].find("stats64");
    if (stats == json[0].end() || !stats->is_object()) return nullptr;
    const auto dir = stats->find(direction);
    if (dir == stats->end() || !dir->is_object()) return nullptr;
    const auto bytes = dir->find("bytes");
    return bytes != dir->end() && bytes->is_number_unsigned() ? &*bytes : nullptr;
  };
  const nlohmann::json* tx = counter("tx");
  const nlohmann::json* rx = counter("rx");
  if (tx == nullptr || rx == nullptr) {
    return absl::InternalError(absl::StrCat("unexpected `ip -j -s link` output: ", text));
  }
  LinkBytes bytes;
  bytes.sent = tx->get<int64_t>();
  bytes.received = rx->get<int64_t>();
  return bytes;
}

}  // namespace psflow::local
