// spec.sharedMemory (api::SharedMemorySpec) on a replica's pod: tensor bytes between a ps task and
// the replicas on its node through shared memory (core/shm_stream.h) instead of TCP.
//
// Every pod of the job gets the hostPath volume kSharedMemoryVolumeName: the job's own directory
// of the node, `<dir>/<job uid>` (`dir` is the operator's --shared_memory_dir, never the job's to
// choose; made if missing), mounted at kBulkSocketDir in the main container. A ps pod's main
// container also gets PSFLOW_BULK_SOCKET=<kBulkSocketDir>/ps-<index>.sock: psflow-ps listens on
// that Unix socket beside its TCP bulk port and tells the replicas of it over gRPC. A replica on
// the same node finds the socket in the same directory and takes shared memory; one on another
// node finds none there and uses TCP (its log says which). A ps pod also gets the init container
// kSharedMemoryVolumeName, of the main container's image, which runs `chmod 1777` on the job's
// directory as root with no capabilities: the kubelet makes the missing directory root's with
// mode 0755, and psflow runs as another user (pod_security.h); 1777 is /tmp's mode (anyone who
// sees the directory may add a file, only its owner remove it). Only the job's own pods mount
// that directory. A ps that stops on SIGTERM removes its socket; one killed leaves it, and the
// next ps of that index on that node replaces it (core/shm_stream.h). The empty directory stays
// on the node (under /run, emptied at boot, by default).
//
// The channel has no TLS: its bytes never leave the node's memory. A replica reaches it only with
// the token the ps sends over the job's gRPC channel (mutual TLS by default), and each side
// checks that the other runs as its own user. The hostPath volume and the root init container
// are why this is opt-in: namespaces that enforce the baseline or restricted Pod Security
// Standard refuse such pods.
#ifndef PSFLOW_OPERATOR_CONTROLLER_SHARED_MEMORY_CHANNEL_H_
#define PSFLOW_OPERATOR_CONTROLLER_SHARED_MEMORY_CHANNEL_H_

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "operator/api/training_job.h"

namespace psflow::controller {

inline constexpr char kSharedMemoryVolumeName[] = "psflow-bulk-sockets";
inline constexpr char kBulkSocketDir[] = "/run/psflow-bulk";
inline constexpr char kDefaultSharedMemoryDir[] = "/run/psflow";

// OK for an absolute path below / without "." or ".." parts (INVALID_ARGUMENT naming it, else):
// what --shared_memory_dir must be.
absl::Status CheckSharedMemoryDir(const std::string& dir);

// "<kBulkSocketDir>/ps-<index>.sock", in the job's own directory.
std::string BulkSocketPath(int ps_index);

// `pod_spec`: a core/v1 PodSpec with its containers; `main_container` indexes the replica's;
// `node_dir`: the operator's --shared_memory_dir (CheckSharedMemoryDir).
void AddSharedMemoryChannel(const std::string& node_dir, const std::string& job_uid,
                            api::ReplicaType type, int index, nlohmann::json& pod_spec,
                            size_t main_container);

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_SHARED_MEMORY_CHANNEL_H_
