// Clipping by global norm (TensorFlow's tf.clip_by_global_norm) on the host: the CPU backend's
// FinishGradients. It runs on the worker before a push: it needs every gradient, which no single
// ps task has. (The CUDA backend clips on the device.)
#ifndef PSFLOW_WORKER_NN_CLIP_H_
#define PSFLOW_WORKER_NN_CLIP_H_

#include "worker/nn/parameter_set.h"

namespace psflow::nn {

// global_norm = sqrt(sum of every gradient element squared) over params' gradients (for a sparse
// parameter, only its touched rows); when global_norm > clip_norm every gradient is scaled by
// clip_norm / global_norm. Returns global_norm (before clipping). clip_norm must be > 0.
double ClipByGlobalNorm(ParameterSet& params, float clip_norm);

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_CLIP_H_
