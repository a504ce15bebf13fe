// The worker's side of the ps protocol: variables placed on ps tasks by PlaceVariables (so every
// worker agrees on the placement), every Pull/Push sent to all tasks in parallel, request and
// response messages reused across steps so the steady-state step allocates (almost) nothing.
//
// Not thread-safe: one trainer thread uses it.
#ifndef PSFLOW_WORKER_PS_CLIENT_H_
#define PSFLOW_WORKER_PS_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ps.grpc.pb.h"
#include "worker/parameter_sync.h"

namespace psflow {

class PsClient final : public ParameterSync {
 public:
  struct Options {
    std::vector<std::string> ps_addresses;  // "host:port", in task order
    // How long Prepare keeps retrying an unreachable ps or waiting for the chief.
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
    // Deadline of each Pull/Push call.
    std::chrono::milliseconds rpc_timeout{std::chrono::seconds(60)};
  };

  // `params` fixes the variables (names, shapes) and must not change layout afterwards.
  // INVALID_ARGUMENT when there is no ps address.
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(Options options,
                                                          const nn::ParameterSet& params);
  ~PsClient() override;

  absl::Status Prepare(const nn::ParameterSet& params, bool is_chief, float learning_rate) override;
  absl::StatusOr<SyncResult> Pull(nn::ParameterSet& params) override;
  absl::StatusOr<SyncResult> Push(nn::ParameterSet& params, int64_t step,
                                  int64_t examples) override;

  // Bytes of variables on each ps task (the placement), for logging and metrics.
  std::vector<int64_t> bytes_per_task() const;

 private:
  struct Task;
  explicit PsClient(Options options);
  absl::Status InitializeTask(Task& task, const nn::ParameterSet& params, float learning_rate);
  absl::Status WaitReadyTask(Task& task);
  // Runs `start(task, context, done)` on every task at once and waits for all; the first error,
  // prefixed with the task's address.
  template <class Start>
  absl::Status OnAllTasks(const char* what, Start start);

  Options options_;
  std::vector<std::unique_ptr<Task>> tasks_;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_PS_CLIENT_H_
