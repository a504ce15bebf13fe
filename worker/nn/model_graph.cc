// Model's --cuda_graphs half (see Model::EnableGraphs): replaying a recorded step, and checking
// the recording against an eager step before trusting it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "worker/nn/model.h"

namespace psflow::nn {

absl::StatusOr<double> Model::GraphStep(const Batch& batch, const GradientFinish& finish) {
  if (graph_state_ == GraphState::kReplaying && loss_scale_ != graph_loss_scale_) {
    // The loss scale is a kernel argument the graph froze; a dynamic scale changes it rarely
    // (an overflow, or 2000 finite steps): record and check again.
    graph_.reset();
    graph_state_ = GraphState::kUnchecked;
  }
  if (graph_state_ == GraphState::kUnchecked) return CheckGraph(batch, finish);
  if (StreamsToHost(finish) != graph_streams_to_host_ ||
      (graph_streams_to_host_ && params_.grads().data() != graph_grads_)) {
    // Recorded with the other gradient path (copies per layer, or one copy after unscaling or
    // clipping), or its copies per layer would land in a host buffer the set no longer holds (a
    // hand-over swapped it): this step runs eagerly. Neither happens in psflow-worker, whose
    // finish is the run's and whose hand-over copies under --cuda_graphs.
    RunStep(batch.size, finish);
  } else {
    graph_->Launch();
  }
  if (tell_as_copied_) TellAsCopied();
  ++step_;
  return FinishStep(batch.size, finish);
}

absl::StatusOr<double> Model::CheckGraph(const Batch& batch, const GradientFinish& finish) {
  const uint64_t step = step_;
  // Before the eager step, so that both runs use what the backend readies (cuBLAS's workspace).
  if (absl::Status ready = backend_.EnableGraphs(); !ready.ok()) {
    PSFLOW_LOG(WARNING) << spec_.name << ": --cuda_graphs: steps run eagerly: " << ready.message();
    graph_state_ = GraphState::kFailed;
    RunStep(batch.size, finish);
    ++step_;
    return FinishStep(batch.size, finish);
  }
  // The eager step, which also makes whatever the layers create on first use (cuDNN descriptors,
  // loaded kernels) before anything is recorded.
  RunStep(batch.size, finish);
  ++step_;
  ASSIGN_OR_RETURN(const double eager_loss, FinishStep(batch.size, finish));
  // An overflowing step (loss scaling) is no reference: check at the next one.
  if (!last_step_finite_) return eager_loss;
  // Towers and updates on the device keep the gradients there: the check needs them on the host
  // all the same.
  if (finish.where != GradientFinish::Where::kToHost)
    RETURN_IF_ERROR(backend_.CopyGradientsToHost(params_));
  // Kept between checks (a dynamic loss scale re-checks): allocated by the first one only.
  check_grads_.assign(params_.grads().begin(), params_.grads().end());
  const std::vector<float>& eager_grads = check_grads_;

  // Recording runs nothing: the eager step's results and the carried state stay as they are.
  const auto record = [&]() -> absl::StatusOr<std::unique_ptr<Backend::Graph>> {
    RETURN_IF_ERROR(backend_.BeginCapture());
    RunStep(batch.size, finish);
    return backend_.EndCapture();
  };
  absl::StatusOr<std::unique_ptr<Backend::Graph>> graph = record();
  if (!graph.ok()) {
    PSFLOW_LOG(WARNING) << spec_.name << ": --cuda_graphs: steps run eagerly: recording a graph of "
                        << "the step of " << max_batch_
                        << " examples failed: " << graph.status().message();
    graph_state_ = GraphState::kFailed;
    return eager_loss;
  }

  // The same step again from the same start (randomness, carried state, staged inputs), replayed.
  const auto restart = [&]() -> absl::Status {
    RewindRandomness(step);
    for (auto& layer : layers_) layer->RewindState();
    return Stage(batch, /*training=*/true);
  };
  RETURN_IF_ERROR(restart());
  (*graph)->Launch();
  ++step_;
  ASSIGN_OR_RETURN(const double graph_loss, FinishStep(batch.size, finish));
  if (finish.where != GradientFinish::Where::kToHost)
    RETURN_IF_ERROR(backend_.CopyGradientsToHost(params_));

  double max_grad = 0, max_error = 0;
  const std::span<const float> graph_grads = params_.grads();
  for (size_t i = 0; i < eager_grads.size(); ++i) {
    max_grad = std::max(max_grad, std::fabs(static_cast<double>(eager_grads[i])));
    const double error = std::fabs(static_cast<double>(graph_grads[i]) - eager_grads[i]);
    // NaN compares false: a NaN in either fails the check below.
    max_error = std::isnan(error) ? INFINITY : std::max(max_error, error);
  }
  const double grad_error = max_grad > 0 ? max_error / max_grad : max_error;
  const double loss_error = std::fabs(graph_loss - eager_loss) /
                            std::max(std::fabs(eager_loss), std::numeric_limits<double>::min());
  const std::string numbers = absl::StrFormat(
      "max gradient difference %.3g relative to max |gradient| %.3g (tolerance %.0e); loss "
      "eager %.9g, graph %.9g (relative difference %.3g, tolerance %.0e)",
      grad_error, max_grad, kGraphGradientTolerance, eager_loss, graph_loss, loss_error,
      kGraphLossTolerance);
  if (grad_error <= kGraphGradientTolerance && loss_error <= kGraphLossTolerance) {
    PSFLOW_LOG(INFO) << spec_.name << ": --cuda_graphs: steps of " << max_batch_
                     << " examples replay a CUDA graph; checked against an eager step: " << numbers;
    graph_ = *std::move(graph);
    graph_streams_to_host_ = StreamsToHost(finish);
    graph_grads_ = params_.grads().data();
    graph_loss_scale_ = loss_scale_;
    graph_state_ = GraphState::kReplaying;
    return graph_loss;
  }
  PSFLOW_LOG(WARNING) << spec_.name << ": --cuda_graphs: steps run eagerly: the replayed graph "
                      << "differs from the eager step: " << numbers;
  graph_state_ = GraphState::kFailed;
  // The replay's results are not trusted, nor the state it carried on: the step runs eagerly
  // again from the same start.
  RETURN_IF_ERROR(restart());
  RunStep(batch.size, finish);
  ++step_;
  return FinishStep(batch.size, finish);
}

}  // namespace psflow::nn
