// spec.sharedMemory (api::SharedMemorySpec) on a replica's pod: tensor bytes between a ps task and
// the replicas on its node through shared memory (core/shm_stream.h) instead of TCP.
//
// Every pod of the job gets the hostPath volume kSharedMemoryVolumeName (the spec's hostPath on
// its node, made if missing) mounted at kBulkSocketDir in the main container. A ps pod's main
// container also gets PSFLOW_BULK_SOCKET=BulkSocketPath(job uid, index): psflow-ps listens on
// that Unix socket beside its TCP bulk port and tells the replicas of it over gRPC. A replica on
// the same node finds the socket in the same directory and takes shared memory; one on another
// node finds none there and uses TCP (its log says which). A ps pod also gets the init container
// kSharedMemoryVolumeName, of the main container's image, which runs `chmod 1777` on the
// directory as root with no capabilities: the kubelet makes a missing hostPath directory root's
// with mode 0755, and psflow runs as another user (pod_security.h); 1777 is /tmp's mode (anyone
// may add a file, only its owner remove it). A socket left by a ps that was killed is replaced
// by the next ps of that index on the node (core/shm_stream.h).
//
// The channel has no TLS: its bytes never leave the node's memory. A replica reaches it only with
// the token the ps sends over the job's gRPC channel (mutual TLS by default), and each side
// checks that the other runs as its own user. The hostPath volume and the root init container
// are why this is opt-in: namespaces that enforce the baseline or restricted Pod Security
// Standard refuse such pods (the job's pods then fail to be created, with the API server's reason
// in an event).
#ifndef PSFLOW_OPERATOR_CONTROLLER_SHARED_MEMORY_CHANNEL_H_
#define PSFLOW_OPERATOR_CONTROLLER_SHARED_MEMORY_CHANNEL_H_

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "operator/api/training_job.h"

namespace psflow::controller {

inline constexpr char kSharedMemoryVolumeName[] = "psflow-bulk-sockets";
inline constexpr char kBulkSocketDir[] = "/run/psflow-bulk";

// "<kBulkSocketDir>/<job uid>-ps-<index>.sock": unique on a node across jobs and their
// incarnations (a job made again under its name has a new uid).
std::string BulkSocketPath(const std::string& job_uid, int ps_index);

// `pod_spec`: a core/v1 PodSpec with its containers; `main_container` indexes the replica's.
void AddSharedMemoryChannel(const api::SharedMemorySpec& shared_memory, const std::string& job_uid,
                            api::ReplicaType type, int index, nlohmann::json& pod_spec,
                            size_t main_container);

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_SHARED_MEMORY_CHANNEL_H_
