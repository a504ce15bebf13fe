#include "core/optimizer.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/optimizer_settings.h"
#include "core/status_macros.h"

namespace psflow {
namespace {

// TF1's defaults for the fields a config leaves 0.
constexpr float kDefaultMomentum = 0.9f;                   // momentum
constexpr float kDefaultAdagradInitialAccumulator = 0.1f;  // adagrad
constexpr float kDefaultAdamBeta1 = 0.9f;                  // adam
constexpr float kDefaultAdamBeta2 = 0.999f;                // adam
constexpr float kDefaultAdamEpsilon = 1e-8f;               // adam
constexpr float kDefaultRmsPropDecay = 0.9f;               // rmsprop (rho, in beta1)
constexpr float kDefaultRmsPropEpsilon = 1e-10f;           // rmsprop
constexpr float kRmsPropInitialMs = 1.0f;                  // rmsprop's "rms" slot, as TF1

struct SlotSpec {
  const char* name;
  float initial_value;
};

constexpr int kMaxSlots = 3;

// What every optimizer shares: its (defaulted) config and its slot table.
class OptimizerBase : public Optimizer {
 public:
  const proto::OptimizerConfig& config() const final { return config_; }
  int num_slots() const final { return num_slots_; }
  const char* slot_name(int slot) const final {
    assert(slot >= 0 && slot < num_slots_);
    return slots_[static_cast<size_t>(slot)].name;
  }
  float slot_initial_value(int slot) const final {
    assert(slot >= 0 && slot < num_slots_);
    return slots_[static_cast<size_t>(slot)].initial_value;
  }

 protected:
  OptimizerBase(const proto::OptimizerConfig& config, std::span<const SlotSpec> slots)
      : config_(config), num_slots_(static_cast<int>(slots.size())) {
    assert(slots.size() <= slots_.size());
    std::copy(slots.begin(), slots.end(), slots_.begin());
  }

  // The Apply contract, checked in debug builds.
  void CheckShapes([[maybe_unused]] int64_t step, [[maybe_unused]] std::span<float> var,
                   [[maybe_unused]] std::span<const float> grad,
                   [[maybe_unused]] std::span<const std::span<float>> slots) const {
    assert(step >= 1);
    assert(grad.size() == var.size());
    assert(slots.size() == static_cast<size_t>(num_slots_));
#ifndef NDEBUG
    for (const std::span<float>& slot : slots) assert(slot.size() == var.size());
#endif
  }

 private:
  proto::OptimizerConfig config_;
  int num_slots_;
  std::array<SlotSpec, kMaxSlots> slots_{};
};

// var -= lr * g
class Sgd final : public OptimizerBase {
 public:
  explicit Sgd(const proto::OptimizerConfig& config) : OptimizerBase(config, {}) {}

  void Update(float learning_rate, int64_t step, std::span<float> var, std::span<const float> grad,
              std::span<const std::span<float>> slots) const override {
    CheckShapes(step, var, grad, slots);
    const float* __restrict g = grad.data();
    float* __restrict v = var.data();
    const size_t n = var.size();
    for (size_t i = 0; i < n; ++i) v[i] -= learning_rate * g[i];
  }
};

// accum = momentum * accum + g; var -= lr * accum
// Nesterov: var -= lr * g + lr * momentum * accum (the updated accum).
class Momentum final : public OptimizerBase {
 public:
  static constexpr SlotSpec kSlots[] = {{"momentum", 0.0f}};

  explicit Momentum(const proto::OptimizerConfig& config)
      : OptimizerBase(config, kSlots),
        momentum_(config.momentum()),
        nesterov_(config.use_nesterov()) {}

  void Update(float learning_rate, int64_t step, std::span<float> var, std::span<const float> grad,
              std::span<const std::span<float>> slots) const override {
    CheckShapes(step, var, grad, slots);
    float* __restrict v = var.data();
    const float* __restrict g = grad.data();
    float* __restrict accum = slots[0].data();
    const size_t n = var.size();
    const float lr = learning_rate;
    const float mu = momentum_;
    if (nesterov_) {
      const float lr_mu = lr * mu;
      for (size_t i = 0; i < n; ++i) {
        const float a = mu * accum[i] + g[i];
        accum[i] = a;
        v[i] -= lr * g[i] + lr_mu * a;
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        const float a = mu * accum[i] + g[i];
        accum[i] = a;
        v[i] -= lr * a;
      }
    }
  }

 private:
  float momentum_;
  bool nesterov_;
};

// accum += g^2; var -= lr * g / (sqrt(accum) + epsilon)
class Adagrad final : public OptimizerBase {
 public:
  explicit Adagrad(const proto::OptimizerConfig& config)
      : OptimizerBase(
            config, std::array<SlotSpec, 1>{{{"accumulator", config.initial_accumulator_value()}}}),
        epsilon_(config.epsilon()) {}

  void Update(float learning_rate, int64_t step, std::span<float> var, std::span<const float> grad,
              std::span<const std::span<float>> slots) const override {
    CheckShapes(step, var, grad, slots);
    float* __restrict v = var.data();
    const float* __restrict g = grad.data();
    float* __restrict accum = slots[0].data();
    const size_t n = var.size();
    const float lr = learning_rate;
    const float eps = epsilon_;
    for (size_t i = 0; i < n; ++i) {
      const float a = accum[i] + g[i] * g[i];
      accum[i] = a;
      v[i] -= lr * g[i] / (std::sqrt(a) + eps);
    }
  }

 private:
  float epsilon_;
};

// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// var -= lr * sqrt(1-b2^t) / (1-b1^t) * m / (sqrt(v) + epsilon)
class Adam final : public OptimizerBase {
 public:
  static constexpr SlotSpec kSlots[] = {{"m", 0.0f}, {"v", 0.0f}};

  explicit Adam(const proto::OptimizerConfig& config)
      : OptimizerBase(config, kSlots),
        beta1_(config.beta1()),
        beta2_(config.beta2()),
        epsilon_(config.epsilon()) {}

  void Update(float learning_rate, int64_t step, std::span<float> var, std::span<const float> grad,
              std::span<const std::span<float>> slots) const override {
    CheckShapes(step, var, grad, slots);
    const float lr_t = AdamStepSize(learning_rate, step, beta1_, beta2_);
    float* __restrict x = var.data();
    const float* __restrict g = grad.data();
    float* __restrict m = slots[0].data();
    float* __restrict v = slots[1].data();
    const size_t n = var.size();
    const float beta1 = beta1_;
    const float beta2 = beta2_;
    const float one_minus_beta1 = OneMinus(beta1_);
    const float one_minus_beta2 = OneMinus(beta2_);
    const float eps = epsilon_;
    for (size_t i = 0; i < n; ++i) {
      const float mi = beta1 * m[i] + one_minus_beta1 * g[i];
      const float vi = beta2 * v[i] + one_minus_beta2 * (g[i] * g[i]);
      m[i] = mi;
      v[i] = vi;
      x[i] -= lr_t * mi / (std::sqrt(vi) + eps);
    }
  }

 private:
  float beta1_;
  float beta2_;
  float epsilon_;
};

// ms = rho ms + (1-rho) g^2; [centered: mg = rho mg + (1-rho) g; d = ms - mg^2, else d = ms]
// mom = momentum * mom + lr * g / sqrt(d + epsilon); var -= mom
class RmsProp final : public OptimizerBase {
 public:
  static constexpr SlotSpec kSlots[] = {
      {"rms", kRmsPropInitialMs}, {"momentum", 0.0f}, {"mg", 0.0f}};

  // "mg" only when centered.
  explicit RmsProp(const proto::OptimizerConfig& config)
      : OptimizerBase(config, std::span(kSlots).first(config.centered() ? 3 : 2)),
        rho_(config.beta1()),
        momentum_(config.momentum()),
        epsilon_(config.epsilon()),
        centered_(config.centered()) {}

  void Update(float learning_rate, int64_t step, std::span<float> var, std::span<const float> grad,
              std::span<const std::span<float>> slots) const override {
    CheckShapes(step, var, grad, slots);
    float* __restrict x = var.data();
    const float* __restrict g = grad.data();
    float* __restrict ms = slots[0].data();
    float* __restrict mom = slots[1].data();
    const size_t n = var.size();
    const float lr = learning_rate;
    const float rho = rho_;
    const float one_minus_rho = OneMinus(rho_);
    const float mu = momentum_;
    const float eps = epsilon_;
    if (centered_) {
      float* __restrict mg = slots[2].data();
      for (size_t i = 0; i < n; ++i) {
        const float msi = rho * ms[i] + one_minus_rho * (g[i] * g[i]);
        const float mgi = rho * mg[i] + one_minus_rho * g[i];
        const float momi = mu * mom[i] + lr * g[i] / std::sqrt(msi - mgi * mgi + eps);
        ms[i] = msi;
        mg[i] = mgi;
        mom[i] = momi;
        x[i] -= momi;
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        const float msi = rho * ms[i] + one_minus_rho * (g[i] * g[i]);
        const float momi = mu * mom[i] + lr * g[i] / std::sqrt(msi + eps);
        ms[i] = msi;
        mom[i] = momi;
        x[i] -= momi;
      }
    }
  }

 private:
  float rho_;
  float momentum_;
  float epsilon_;
  bool centered_;
};

// `value` (the config's field `field`, named as the proto names it) must lie in [0, 1).
absl::Status CheckUnitInterval(const proto::OptimizerConfig& config, const char* field,
                               float value) {
  if (value >= 0.0f && value < 1.0f) return absl::OkStatus();  // false for NaN
  return absl::InvalidArgumentError(absl::StrCat("optimizer \"", config.name(), "\": ", field,
                                                 " must be in [0, 1), got ", value));
}

absl::Status CheckEpsilon(const proto::OptimizerConfig& config) {
  const float epsilon = config.epsilon();
  if (std::isfinite(epsilon) && epsilon >= 0.0f) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "optimizer \"", config.name(), "\": epsilon must be finite and >= 0, got ", epsilon));
}

// 0 (proto3's "not set") becomes `default_value`.
float OrDefault(float value, float default_value) { return value == 0.0f ? default_value : value; }

}  // namespace

float AdamStepSize(float learning_rate, int64_t step, float beta1, float beta2) {
  const double t = static_cast<double>(step);
  return static_cast<float>(static_cast<double>(learning_rate) *
                            std::sqrt(1.0 - std::pow(static_cast<double>(beta2), t)) /
                            (1.0 - std::pow(static_cast<double>(beta1), t)));
}

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const proto::OptimizerConfig& config) {
  const std::string& name = config.name();
  RETURN_IF_ERROR(CheckOptimizerSettings(name, config.learning_rate(), config.momentum()));

  proto::OptimizerConfig c = config;
  if (name == "sgd") return std::make_unique<Sgd>(c);

  if (name == "momentum") {
    c.set_momentum(OrDefault(c.momentum(), kDefaultMomentum));
    return std::make_unique<Momentum>(c);
  }

  if (name == "adagrad") {
    // TF1 requires initial_accumulator_value > 0; 0 is proto3's "not set", so only a negative (or
    // non-finite) value is an error. epsilon stays as given: TF1's Adagrad has none (0).
    const float initial = c.initial_accumulator_value();
    if (!(std::isfinite(initial) && initial >= 0.0f)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer \"", name, "\": initial_accumulator_value must be finite and > 0 (0 means ",
          kDefaultAdagradInitialAccumulator, "), got ", initial));
    }
    c.set_initial_accumulator_value(OrDefault(initial, kDefaultAdagradInitialAccumulator));
    RETURN_IF_ERROR(CheckEpsilon(c));
    return std::make_unique<Adagrad>(c);
  }

  if (name == "adam") {
    c.set_beta1(OrDefault(c.beta1(), kDefaultAdamBeta1));
    c.set_beta2(OrDefault(c.beta2(), kDefaultAdamBeta2));
    c.set_epsilon(OrDefault(c.epsilon(), kDefaultAdamEpsilon));
    RETURN_IF_ERROR(CheckUnitInterval(c, "beta1", c.beta1()));
    RETURN_IF_ERROR(CheckUnitInterval(c, "beta2", c.beta2()));
    RETURN_IF_ERROR(CheckEpsilon(c));
    return std::make_unique<Adam>(c);
  }

  // rmsprop: rho travels in beta1; momentum 0 is a valid value (and TF1's default).
  c.set_beta1(OrDefault(c.beta1(), kDefaultRmsPropDecay));
  c.set_epsilon(OrDefault(c.epsilon(), kDefaultRmsPropEpsilon));
  RETURN_IF_ERROR(CheckUnitInterval(c, "beta1 (decay rho)", c.beta1()));
  RETURN_IF_ERROR(CheckEpsilon(c));
  return std::make_unique<RmsProp>(c);
}

}  // namespace psflow
