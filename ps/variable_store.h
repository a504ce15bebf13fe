// The variables one ps task holds, and the global step.
//
// Initialize() creates them once; afterwards the set of variables never changes, so Pull and Push
// look them up without a global lock. Each variable has its own mutex: a push updates variables
// one at a time (asynchronous SGD, as TensorFlow's ps does with use_locking), so pushes from
// several workers proceed in parallel on different variables. Thread-safe.
#ifndef PSFLOW_PS_VARIABLE_STORE_H_
#define PSFLOW_PS_VARIABLE_STORE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ps.pb.h"
#include "ps/optimizer.h"

namespace psflow {

class VariableStore {
 public:
  // True when this call created the variables, false when they already existed (a restarted
  // chief) and were left untouched. INVALID_ARGUMENT for an empty, duplicate or malformed
  // variable or a bad optimizer; nothing is created then.
  absl::StatusOr<bool> Initialize(const proto::InitializeRequest& request);
  bool ready() const { return ready_.load(std::memory_order_acquire); }
  int64_t global_step() const { return global_step_.load(std::memory_order_acquire); }

  // Fills response with the named variables (all, in name order, when names is empty).
  // FAILED_PRECONDITION before Initialize; NOT_FOUND for an unknown name.
  absl::Status Pull(const proto::PullRequest& request, proto::PullResponse* response) const;

  // Applies every gradient, then advances the global step by one and returns it. All gradients
  // are validated before any is applied: a bad push (no gradient, a name twice, wrong dtype or
  // shape, unknown name, before Initialize) changes nothing (INVALID_ARGUMENT / NOT_FOUND /
  // FAILED_PRECONDITION).
  absl::StatusOr<int64_t> Push(const proto::PushRequest& request);

  // Total bytes of variable values held.
  int64_t bytes() const { return bytes_; }
  size_t num_variables() const { return variables_.size(); }

 private:
  struct Variable {
    std::vector<int64_t> shape;
    std::vector<float> value;
    mutable std::mutex mu;
  };

  std::mutex init_mu_;  // serialises Initialize calls
  std::atomic<bool> ready_{false};
  // Written only by the Initialize that sets ready_ (release); read only after ready() (acquire).
  std::map<std::string, std::unique_ptr<Variable>, std::less<>> variables_;
  std::unique_ptr<Optimizer> optimizer_;
  int64_t bytes_ = 0;
  std::atomic<int64_t> global_step_{0};
};

}  // namespace psflow

#endif  // PSFLOW_PS_VARIABLE_STORE_H_
