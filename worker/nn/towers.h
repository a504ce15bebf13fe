// Synchronous data parallelism inside one worker (`--num_gpus`, seed 002's advice: towers inside a
// machine, the ps across machines): N replicas of a model, each on its own backend (a GPU each),
// each computes the gradients of its slice of every batch on its own thread, and their weighted
// average becomes the gradients the trainer pushes — one push per worker per step, whatever N.
//
// Slices: a batch of B rows gives tower k rows [k*B/N, (k+1)*B/N) (sizes differ by at most one;
// a tower with no row sits the step out). The same rows go to the same tower every step, so an
// LSTM tower carries the state of its own rows. Gradients and loss are the slice means weighted
// by slice size: exactly the full batch's mean, up to the order of summation (dropout masks
// differ: each tower draws its own). The towers' gradients stay on their devices; tower 0's backend
// adds them up (Backend::ReduceGradients: on GPU 0 over peer copies for CUDA towers, on the host
// for CPU ones), then unscales and clips the sum by global norm there, and copies it to the host
// once.
//
// Towers do not stream gradients (SetGradientListener is Trainable's no-op): they are final only
// after the reduction, when the whole backward is over, so Push sends them all at once.
//
// params() is tower 0's ParameterSet: the trainer pulls into it and pushes from it. Threads:
// one thread per tower, each bound to its tower's backend (BindThread); the caller's thread
// only waits. Not thread-safe otherwise.
#ifndef PSFLOW_WORKER_NN_TOWERS_H_
#define PSFLOW_WORKER_NN_TOWERS_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "worker/nn/model.h"
#include "worker/nn/trainable.h"

namespace psflow::nn {

class Towers final : public Trainable {
 public:
  // One tower per backend (at least one; the backends must outlive the towers). Each tower
  // holds max_batch / N rows (rounded up); `seed` seeds tower k's dropout masks as seed + k.
  // The errors of Model::Create, naming the tower.
  static absl::StatusOr<std::unique_ptr<Towers>> Create(const ModelSpec& spec,
                                                        const std::vector<Backend*>& backends,
                                                        int64_t max_batch, uint64_t seed = 1);
  ~Towers() override;

  ParameterSet& params() override { return towers_[0]->params(); }
  int64_t labels_per_example() const override { return towers_[0]->labels_per_example(); }
  // Every tower takes params()' values, when they changed (ParameterSet::ValuesChanged), at the
  // start of its next step, on its own thread.
  // batch.size in [1, max_batch]. The first tower's error, naming the tower.
  absl::StatusOr<double> ComputeGradients(const Batch& batch, float clip_norm) override;
  void SetLossScale(float scale) override;
  bool last_step_finite() const override { return last_step_finite_; }
  void ResetState() override;
  // The whole batch's rows (every tower reads its slice's).
  absl::Status ListRowsRead(const Batch& batch, ParameterSet& into) override {
    return towers_[0]->ListRowsRead(batch, into);
  }
  // --cuda_graphs: every tower records and replays its own step (Model::EnableGraphs), on its
  // own thread; a tower whose slice is short of its max_batch runs eagerly.
  void EnableGraphs() {
    for (auto& tower : towers_) tower->EnableGraphs();
  }

  Model& tower(int k) { return *towers_[static_cast<size_t>(k)]; }

 private:
  Towers() = default;
  enum class Job { kStep, kResetState };
  // Runs `job` for every tower on its own thread; returns when all are done.
  void RunOnEveryTower(Job job);
  void ThreadLoop(int k);
  void Step(int k);
  std::vector<Backend*> backends_;
  std::vector<std::unique_ptr<Model>> towers_;
  std::vector<int64_t> begin_;         // this step's first row of each tower's slice
  std::vector<int64_t> rows_;          // and its row count
  std::vector<float> weight_;          // rows_[k] / batch size
  std::vector<ParameterSet*> others_;  // towers 1.. parameter sets, for ReduceGradients
  std::vector<absl::StatusOr<double>> losses_;
  Batch batch_;  // the step's whole batch
  // Towers 1..: tower 0's values_version() their values were last copied at (each written by
  // its tower's thread only).
  std::vector<uint64_t> copied_version_;
  bool last_step_finite_ = true;

  std::mutex mu_;
  std::condition_variable cv_;
  Job job_ ABSL_GUARDED_BY(mu_) = Job::kStep;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped for every job
  int pending_ ABSL_GUARDED_BY(mu_) = 0;          // towers still running the current job
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_TOWERS_H_
