#include "worker/nn/parameter_update.h"

#include <span>
#include <utility>
#include <vector>

namespace psflow::nn {
namespace {

class HostUpdate final : public ParameterUpdate {
 public:
  HostUpdate(const Optimizer& optimizer, const ParameterSet& params) : optimizer_(optimizer) {
    for (int s = 0; s < optimizer.num_slots(); ++s) {
      slots_.emplace_back(static_cast<size_t>(params.total_size()),
                          optimizer.slot_initial_value(s));
    }
    slot_spans_.assign(slots_.begin(), slots_.end());
    run_slots_.assign(slots_.size(), {});
  }

  bool on_device() const override { return false; }

  void Apply(ParameterSet& params, float learning_rate, int64_t step) override {
    auto apply = [&](int64_t offset, int64_t size) {
      const auto at = static_cast<size_t>(offset), n = static_cast<size_t>(size);
      for (size_t k = 0; k < slot_spans_.size(); ++k) run_slots_[k] = slot_spans_[k].subspan(at, n);
      optimizer_.Apply(learning_rate, step, params.values().subspan(at, n),
                       params.grads().subspan(at, n), run_slots_);
    };
    for (const ParameterDesc& d : params.descs()) {
      if (!d.sparse) {
        apply(d.offset, d.size);
        continue;
      }
      const int64_t width = d.row_width();
      for (int64_t row : d.touched_rows) apply(d.offset + row * width, width);
    }
    params.ValuesChanged();
  }

 private:
  const Optimizer& optimizer_;
  std::vector<std::vector<float>> slots_;
  std::vector<std::span<float>> slot_spans_;  // views of slots_, made once
  std::vector<std::span<float>> run_slots_;   // the slots of the run being applied
};

class HookedUpdate final : public ParameterUpdate {
 public:
  HookedUpdate(std::unique_ptr<ParameterUpdate> update, std::function<void()> after_apply,
               std::function<void()> at_end)
      : update_(std::move(update)),
        after_apply_(std::move(after_apply)),
        at_end_(std::move(at_end)) {}
  ~HookedUpdate() override {
    if (at_end_) at_end_();
  }
  bool on_device() const override { return update_->on_device(); }
  void Apply(ParameterSet& params, float learning_rate, int64_t step) override {
    update_->Apply(params, learning_rate, step);
    if (after_apply_) after_apply_();
  }

 private:
  std::unique_ptr<ParameterUpdate> update_;
  std::function<void()> after_apply_;
  std::function<void()> at_end_;
};

}  // namespace

std::unique_ptr<ParameterUpdate> WithHooks(std::unique_ptr<ParameterUpdate> update,
                                           std::function<void()> after_apply,
                                           std::function<void()> at_end) {
  return std::make_unique<HookedUpdate>(std::move(update), std::move(after_apply),
                                        std::move(at_end));
}

std::unique_ptr<ParameterUpdate> MakeHostUpdate(const Optimizer& optimizer,
                                                const ParameterSet& params) {
  return std::make_unique<HostUpdate>(optimizer, params);
}

}  // namespace psflow::nn
