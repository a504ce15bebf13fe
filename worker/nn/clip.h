// Finishing gradients on the host: the CPU backend's FinishGradients and ReduceGradients (the
// CUDA backend does the same on the device). Clipping runs on the worker before a push: it needs
// every gradient, which no single ps task has.
#ifndef PSFLOW_WORKER_NN_CLIP_H_
#define PSFLOW_WORKER_NN_CLIP_H_

#include <cstdint>
#include <span>
#include <vector>

#include "worker/nn/parameter_set.h"

namespace psflow::nn {

// Multiplies params' gradients by `unscale` (when != 1), then measures global_norm = sqrt(sum of
// every gradient element squared) (for a sparse parameter only its touched rows; when `measure`,
// clip_norm > 0 or unscale != 1) and, when clip_norm > 0 and global_norm > clip_norm, scales
// every gradient by clip_norm / global_norm (tf.clip_by_global_norm). The norm is the gradient's
// as a dense tensor (torch.nn.utils.clip_grad_norm_'s): an embedding row read twice in a batch
// counts once, its two gradients summed. TF1 squares each lookup's slice apart instead (its
// IndexedSlices keep duplicates), so with repeated tokens its norm differs (2% on a small
// language-model batch). Returns global_norm, or 0
// when not measured; not finite (nothing clipped) when some gradient is not.
double UnscaleAndClip(ParameterSet& params, float unscale, float clip_norm, bool measure = false);

// The handles [first, last) of a parameter set; {0, -1} means all of them.
struct HandleRange {
  int first = 0;
  int last = -1;
  int end(const ParameterSet& params) const {
    return last < 0 ? static_cast<int>(params.descs().size()) : last;
  }
};

// into's gradients := weights[0] * into's + sum over k of weights[k + 1] * from[k]'s, on the
// host, for the parameters of `range`; a sparse parameter's touched rows become the union (rows
// only others touched start from zero: into's untouched rows are never read). Sets with weight 0
// are skipped. `scratch` keeps its capacity between calls.
void AddWeightedGradients(ParameterSet& into, std::span<ParameterSet* const> from,
                          std::span<const float> weights, std::vector<int64_t>& scratch,
                          HandleRange range = {});

// Only the touched rows of AddWeightedGradients: each sparse parameter of `range` in `into` gets
// the union of its rows and those of every set in `from` whose weight (weights[k + 1]) is not 0.
// Rows new to `into` are zeroed in into's host gradients when zero_new_rows. A parameter whose
// rows are the union already is not written.
void MergeTouchedRows(ParameterSet& into, std::span<ParameterSet* const> from,
                      std::span<const float> weights, bool zero_new_rows,
                      std::vector<int64_t>& scratch, HandleRange range = {});

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_CLIP_H_
