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
// once (or, training alone with the update on the device, leaves it there: MakeUpdate).
//
// Streaming (SetGradientListener, a step with no clipping and no loss scale, no CUDA graphs):
// each layer is reduced as soon as every tower's backward has made its gradients, while backward
// goes on with the layers below, and the listener hears of it as its sum lands on the host, the
// last layer's first, on the caller's thread. Tower k >= 1 marks each layer after its Backward
// (Backend::MarkGradients: an event on its GPU's stream); tower 0, after its own Backward of the
// layer, waits for every other tower with rows to have marked it and adds their gradients into
// its own (Backend::AddLayerGradients: on GPU 0, after their events, over peer copies), then
// copies the layer to the host as a single model streams it (Backend::GradientsReady). The sum
// is ReduceGradients' (the same weights and order of addition). Before the first layer is told,
// every sparse parameter's touched rows are the union of the towers' (a ps client reads them
// then). A tower that fails mid-step ends the telling: what was told stays told, and
// ComputeGradients returns the tower's error. A step that clips or scales the
// loss needs every gradient first: it reduces them all after backward, as before, and tells
// nobody (Trainer pushes them then). With --cuda_graphs the towers replay their recorded steps
// and reduce after them.
//
// params() is tower 0's ParameterSet: the trainer pulls into it and pushes from it. Threads:
// one thread per tower, each bound to its tower's backend (BindThread); the caller's thread
// waits, and in a streaming step tells the listener. Not thread-safe otherwise.
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
  void SetGradientListener(GradientListener* listener) override { listener_ = listener; }
  // Tower 0's backend's update over params() (Model::MakeUpdate). On the device, the sum of the
  // towers' gradients stays on the first GPU (ReduceGradients finishes it there), the update runs
  // there, and after each Apply its values go to every other tower's device
  // (Backend::BroadcastParameters) before that tower's next step, which then computes with them
  // (a tower with no rows for a while too): where the GPUs have peer access, no parameter or
  // gradient crosses to the host per step. Made and applied on the caller's thread, while no
  // step runs.
  absl::StatusOr<std::unique_ptr<ParameterUpdate>> MakeUpdate(const Optimizer& optimizer) override;
  absl::Status DownloadParameters() override;
  // --cuda_graphs: every tower records and replays its own step (Model::EnableGraphs), on its
  // own thread; a tower whose slice is short of its max_batch runs eagerly. Steps no longer
  // stream (above).
  void EnableGraphs() {
    graphs_ = true;
    for (auto& tower : towers_) tower->EnableGraphs();
  }

  Model& tower(int k) { return *towers_[static_cast<size_t>(k)]; }

 private:
  Towers() = default;
  enum class Job { kStep, kResetState };
  // Runs `job` for every tower on its own thread; returns when all are done.
  void RunOnEveryTower(Job job);
  // RunOnEveryTower(kStep) for a streaming step: tells listener_ of each layer tower 0 reduced,
  // on this thread, until every tower is done.
  void RunStreamingStep();
  void StartJob(Job job);
  void ThreadLoop(int k);
  void Step(int k);

  // Tower k's BackwardHook in a streaming step: k >= 1 marks the layer (MarkGradients) and says
  // so; tower 0 waits for those marks and adds the layer up (AddLayer).
  class LayerHook final : public BackwardHook {
   public:
    LayerHook(Towers& towers, int k) : towers_(towers), k_(k) {}
    void LayerDone(ParameterSet& params, int first, int last) override;
    int marks = 0;  // this step's, reset by the caller before the step

   private:
    Towers& towers_;
    const int k_;
  };
  // Tower 0's listener in a streaming step: queues each layer for the caller's thread.
  class Relay final : public GradientListener {
   public:
    explicit Relay(Towers& towers) : towers_(towers) {}
    void GradientsReady(ParameterSet::Handle first, ParameterSet::Handle last) override;

   private:
    Towers& towers_;
  };
  void AddLayer(ParameterSet& params, int first, int last, int mark);
  std::vector<Backend*> backends_;
  std::vector<std::unique_ptr<Model>> towers_;
  std::vector<int64_t> begin_;         // this step's first row of each tower's slice
  std::vector<int64_t> rows_;          // and its row count
  std::vector<float> weight_;          // rows_[k] / batch size
  std::vector<ParameterSet*> others_;  // towers 1.. parameter sets, for ReduceGradients
  std::vector<absl::StatusOr<double>> losses_;
  Batch batch_;  // the step's whole batch
  // Towers 1..: tower 0's values_version() their values were last copied at (each written by
  // its tower's thread, or by an update's broadcast while the towers are parked).
  std::vector<uint64_t> copied_version_;
  bool last_step_finite_ = true;
  GradientListener* listener_ = nullptr;
  bool graphs_ = false;
  // This step streams (set by the caller before the towers start it, read by them).
  bool streaming_ = false;
  std::vector<std::unique_ptr<LayerHook>> hooks_;  // one per tower
  Relay relay_{*this};
  std::vector<int64_t> rows_scratch_;  // tower 0's thread: the first layer's union of rows

  std::mutex mu_;
  std::condition_variable cv_;
  Job job_ ABSL_GUARDED_BY(mu_) = Job::kStep;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped for every job
  int pending_ ABSL_GUARDED_BY(mu_) = 0;          // towers still running the current job
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // A streaming step's progress: the layers each tower marked, whether it is done, and the
  // layers tower 0 reduced and the caller has yet to tell (from ready_[told_] on).
  std::vector<int> marked_ ABSL_GUARDED_BY(mu_);
  std::vector<char> finished_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<int, int>> ready_ ABSL_GUARDED_BY(mu_);
  size_t told_ ABSL_GUARDED_BY(mu_) = 0;
  // A tower with rows ended without a layer's gradients (it failed): tower 0 adds nothing more
  // and the listener hears of nothing more this step.
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_TOWERS_H_
