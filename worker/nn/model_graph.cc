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

absl::StatusOr<double> Model::GraphStep(const Batch& batch, float clip_norm) {
  if (graph_state_ == GraphState::kUnchecked) return CheckGraph(batch, clip_norm);
  if ((clip_norm > 0) != graph_clips_) {
    // Recorded with the other gradient path (copies per layer, or clipping then one copy): this
    // step runs eagerly. The trainer's clip_norm is fixed, so this does not happen in a run.
    RunStep(batch.size, clip_norm);
  } else {
    graph_->Launch();
  }
  ++step_;
  return FinishStep(batch.size, clip_norm);
}

absl::StatusOr<double> Model::CheckGraph(const Batch& batch, float clip_norm) {
  const uint64_t step = step_;
  // Before the eager step, so that both runs use what the backend readies (cuBLAS's workspace).
  if (absl::Status ready = backend_.EnableGraphs(); !ready.ok()) {
    PSFLOW_LOG(WARNING) << spec_.name << ": --cuda_graphs: steps run eagerly: " << ready.message();
    graph_state_ = GraphState::kFailed;
    RunStep(batch.size, clip_norm);
    ++step_;
    return FinishStep(batch.size, clip_norm);
  }
  // The eager step, which also makes whatever the layers create on first use (cuDNN descriptors,
  // loaded kernels) before anything is recorded.
  RunStep(batch.size, clip_norm);
  ++step_;
  ASSIGN_OR_RETURN(const double eager_loss, FinishStep(batch.size, clip_norm));
  // Saved once, for this check only (the step after it allocates nothing).
  const std::vector<float> eager_grads(params_.grads().begin(), params_.grads().end());

  // Recording runs nothing: the eager step's results and the carried state stay as they are.
  const auto record = [&]() -> absl::StatusOr<std::unique_ptr<Backend::Graph>> {
    RETURN_IF_ERROR(backend_.BeginCapture());
    RunStep(batch.size, clip_norm);
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
  ASSIGN_OR_RETURN(const double graph_loss, FinishStep(batch.size, clip_norm));

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
    graph_clips_ = clip_norm > 0;
    graph_state_ = GraphState::kReplaying;
    return graph_loss;
  }
  PSFLOW_LOG(WARNING) << spec_.name << ": --cuda_graphs: steps run eagerly: the replayed graph "
                      << "differs from the eager step: " << numbers;
  graph_state_ = GraphState::kFailed;
  // The replay's results are not trusted, nor the state it carried on: the step runs eagerly
  // again from the same start.
  RETURN_IF_ERROR(restart());
  RunStep(batch.size, clip_norm);
  ++step_;
  return FinishStep(batch.size, clip_norm);
}

}  // namespace psflow::nn
