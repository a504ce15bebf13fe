// The optimizers' kernels (update_kernels.h). Each rule is written with __fmul_rn, __fadd_rn,
// __fsub_rn, __fdiv_rn and __fsqrt_rn in the order core/optimizer.cc's loops evaluate it, so
// nvcc cannot contract a product and a sum into one rounding.
#include "worker/backend/cuda/launch.h"
#include "worker/backend/cuda/update_kernels.h"

namespace psflow::cuda {
namespace {

__device__ __forceinline__ float Mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float Add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float Sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float Div(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ float Sqrt(float a) { return __fsqrt_rn(a); }

// var -= lr * g
struct Sgd {
  __device__ void operator()(const UpdateScalars& s, int64_t i, float* x, const float* g, float*,
                             float*, float*) const {
    x[i] = Sub(x[i], Mul(s.learning_rate, g[i]));
  }
};

// accum = momentum * accum + g; var -= lr * accum
// (Nesterov: var -= lr * g + lr_momentum * accum, with the updated accum)
template <bool kNesterov>
struct Momentum {
  __device__ void operator()(const UpdateScalars& s, int64_t i, float* x, const float* g,
                             float* accum, float*, float*) const {
    const float a = Add(Mul(s.momentum, accum[i]), g[i]);
    accum[i] = a;
    if constexpr (kNesterov) {
      x[i] = Sub(x[i], Add(Mul(s.learning_rate, g[i]), Mul(s.lr_momentum, a)));
    } else {
      x[i] = Sub(x[i], Mul(s.learning_rate, a));
    }
  }
};

// accum += g^2; var -= lr * g / (sqrt(accum) + epsilon)
struct Adagrad {
  __device__ void operator()(const UpdateScalars& s, int64_t i, float* x, const float* g,
                             float* accum, float*, float*) const {
    const float gi = g[i];
    const float a = Add(accum[i], Mul(gi, gi));
    accum[i] = a;
    x[i] = Sub(x[i], Div(Mul(s.learning_rate, gi), Add(Sqrt(a), s.epsilon)));
  }
};

// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; var -= lr_t * m / (sqrt(v) + epsilon)
struct Adam {
  __device__ void operator()(const UpdateScalars& s, int64_t i, float* x, const float* g, float* m,
                             float* v, float*) const {
    const float gi = g[i];
    const float mi = Add(Mul(s.beta1, m[i]), Mul(s.one_minus_beta1, gi));
    const float vi = Add(Mul(s.beta2, v[i]), Mul(s.one_minus_beta2, Mul(gi, gi)));
    m[i] = mi;
    v[i] = vi;
    x[i] = Sub(x[i], Div(Mul(s.learning_rate, mi), Add(Sqrt(vi), s.epsilon)));
  }
};

// ms = rho ms + (1-rho) g^2; [centered: mg = rho mg + (1-rho) g; d = ms - mg^2, else d = ms]
// mom = momentum * mom + lr * g / sqrt(d + epsilon); var -= mom
template <bool kCentered>
struct RmsProp {
  __device__ void operator()(const UpdateScalars& s, int64_t i, float* x, const float* g, float* ms,
                             float* mom, float* mg) const {
    const float gi = g[i];
    const float msi = Add(Mul(s.beta1, ms[i]), Mul(s.one_minus_beta1, Mul(gi, gi)));
    float d = msi;
    if constexpr (kCentered) {
      const float mgi = Add(Mul(s.beta1, mg[i]), Mul(s.one_minus_beta1, gi));
      mg[i] = mgi;
      d = Sub(msi, Mul(mgi, mgi));
    }
    const float momi =
        Add(Mul(s.momentum, mom[i]), Div(Mul(s.learning_rate, gi), Sqrt(Add(d, s.epsilon))));
    ms[i] = msi;
    mom[i] = momi;
    x[i] = Sub(x[i], momi);
  }
};

template <class Rule>
__global__ void UpdateKernel(UpdateScalars s, const UpdateTile* tiles, float* var,
                             const float* grad, float* slot0, float* slot1, float* slot2) {
  const UpdateTile t = tiles[blockIdx.x];
  const Rule rule;
  for (int64_t j = threadIdx.x; j < t.length; j += blockDim.x) {
    rule(s, t.offset + j, var, grad, slot0, slot1, slot2);
  }
}

template <class Rule>
void Launch(const UpdateScalars& s, const UpdateTile* tiles, int64_t num_tiles, float* var,
            const float* grad, float* slot0, float* slot1, float* slot2, cudaStream_t stream) {
  UpdateKernel<Rule><<<static_cast<unsigned>(num_tiles), kThreads, 0, stream>>>(
      s, tiles, var, grad, slot0, slot1, slot2);
}

__global__ void FillKernel(float* x, int64_t n, float value) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) x[i] = value;
}

}  // namespace

void LaunchUpdate(UpdateRule rule, const UpdateScalars& s, const UpdateTile* tiles,
                  int64_t num_tiles, float* var, const float* grad, float* slot0, float* slot1,
                  float* slot2, cudaStream_t stream) {
  if (num_tiles <= 0) return;
  switch (rule) {
    case UpdateRule::kSgd:
      return Launch<Sgd>(s, tiles, num_tiles, var, grad, slot0, slot1, slot2, stream);
    case UpdateRule::kMomentum:
      return Launch<Momentum<false>>(s, tiles, num_tiles, var, grad, slot0, slot1, slot2, stream);
    case UpdateRule::kNesterov:
      return Launch<Momentum<true>>(s, tiles, num_tiles, var, grad, slot0, slot1, slot2, stream);
    case UpdateRule::kAdagrad:
      return Launch<Adagrad>(s, tiles, num_tiles, var, grad, slot0, slot1, slot2, stream);
    case UpdateRule::kAdam:
      return Launch<Adam>(s, tiles, num_tiles, var, grad, slot0, slot1, slot2, stream);
    case UpdateRule::kRmsProp:
      return Launch<RmsProp<false>>(s, tiles, num_tiles, var, grad, slot0, slot1, slot2, stream);
    case UpdateRule::kCenteredRmsProp:
      return Launch<RmsProp<true>>(s, tiles, num_tiles, var, grad, slot0, slot1, slot2, stream);
  }
}

void LaunchFill(float* x, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return;
  FillKernel<<<Blocks(n), kThreads, 0, stream>>>(x, n, value);
}

}  // namespace psflow::cuda
