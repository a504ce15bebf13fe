#include "worker/backend/cuda/device_update.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/backend/cuda/update_kernels.h"

namespace psflow::cuda {
namespace {

// Appends the tiles of elements [offset, offset + length).
void AppendTiles(int64_t offset, int64_t length, std::vector<UpdateTile>& tiles) {
  for (int64_t at = 0; at < length; at += kUpdateTileElements) {
    tiles.push_back({offset + at, std::min(kUpdateTileElements, length - at)});
  }
}

struct PinnedFree {
  void operator()(UpdateTile* p) const { cudaFreeHost(p); }
};
struct EventDestroy {
  void operator()(CUevent_st* e) const { cudaEventDestroy(e); }
};

class DeviceUpdate final : public nn::ParameterUpdate {
 public:
  DeviceUpdate(Context& ctx, const Optimizer& optimizer, UpdateRule rule)
      : ctx_(ctx), optimizer_(optimizer), rule_(rule) {}

  absl::Status Prepare(const nn::ParameterSet& params) {
    const int64_t total = params.total_size();
    const int slots = optimizer_.num_slots();
    if (slots > 0 && total > 0) {
      absl::StatusOr<DeviceArray<float>> s = ctx_.Allocate<float>(
          slots * total, absl::StrCat("the optimizer's ", slots, " slot(s) of ", total, " floats (",
                                      optimizer_.config().name(), ")"));
      if (!s.ok()) return s.status();
      slots_ = *std::move(s);
      for (int k = 0; k < slots; ++k) {
        LaunchFill(slots_.get() + k * total, total, optimizer_.slot_initial_value(k),
                   ctx_.stream());
      }
      ctx_.CheckLaunch("setting the optimizer's slots to their initial values");
    }
    // The dense parameters' tiles, adjacent ones merged into one run; room after them for every
    // row of every sparse parameter.
    std::vector<UpdateTile> tiles;
    int64_t run_begin = 0, run_end = 0, most_row_tiles = 0;
    for (const nn::ParameterDesc& d : params.descs()) {
      if (d.sparse) {
        const int64_t width = d.row_width();
        const int64_t rows = d.shape.empty() ? 0 : d.shape[0];
        most_row_tiles += rows * ((width + kUpdateTileElements - 1) / kUpdateTileElements);
        continue;
      }
      if (d.offset != run_end) {
        AppendTiles(run_begin, run_end - run_begin, tiles);
        run_begin = d.offset;
      }
      run_end = d.offset + d.size;
    }
    AppendTiles(run_begin, run_end - run_begin, tiles);
    dense_tiles_ = static_cast<int64_t>(tiles.size());
    const int64_t capacity = std::max<int64_t>(dense_tiles_ + most_row_tiles, 1);
    absl::StatusOr<DeviceArray<UpdateTile>> t =
        ctx_.Allocate<UpdateTile>(capacity, "the optimizer's tile table");
    if (!t.ok()) return t.status();
    tiles_ = *std::move(t);
    if (dense_tiles_ > 0) {
      ctx_.Check(cudaMemcpyAsync(tiles_.get(), tiles.data(),
                                 static_cast<size_t>(dense_tiles_) * sizeof(UpdateTile),
                                 cudaMemcpyHostToDevice, ctx_.stream()),
                 "copying the optimizer's tile table to the GPU");
    }
    if (most_row_tiles > 0) {
      void* pinned = nullptr;
      if (cudaError_t e =
              cudaMallocHost(&pinned, static_cast<size_t>(most_row_tiles) * sizeof(UpdateTile));
          e != cudaSuccess) {
        cudaGetLastError();
        return CudaError(e, "pinned memory for the touched rows' tiles");
      }
      row_tiles_.reset(static_cast<UpdateTile*>(pinned));
      row_capacity_ = most_row_tiles;
      cudaEvent_t e = nullptr;
      if (cudaError_t made = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
          made != cudaSuccess) {
        return CudaError(made, "creating the touched rows' event");
      }
      rows_copied_.reset(e);
    }
    // The host table is gone when this returns: the copy must have read it.
    return ctx_.Synchronize("preparing the optimizer on the GPU");
  }

  bool on_device() const override { return true; }

  void Apply(nn::ParameterSet& params, float learning_rate, int64_t step) override {
    // Whichever thread calls (towers: the trainer's, whose current GPU may be another).
    ctx_.Check(cudaSetDevice(ctx_.device()), "making the GPU current for its update");
    int64_t row_tiles = 0;
    if (row_capacity_ > 0) {
      // The last step's copy of the row tiles read this pinned buffer: it must be done.
      ctx_.Check(cudaEventSynchronize(rows_copied_.get()), "waiting for the touched rows' copy");
      for (const nn::ParameterDesc& d : params.descs()) {
        if (!d.sparse) continue;
        const int64_t width = d.row_width();
        for (int64_t row : d.touched_rows) {
          for (int64_t at = 0; at < width && row_tiles < row_capacity_; at += kUpdateTileElements) {
            row_tiles_.get()[row_tiles++] = {d.offset + row * width + at,
                                             std::min(kUpdateTileElements, width - at)};
          }
        }
      }
      if (row_tiles > 0) {
        ctx_.Check(cudaMemcpyAsync(tiles_.get() + dense_tiles_, row_tiles_.get(),
                                   static_cast<size_t>(row_tiles) * sizeof(UpdateTile),
                                   cudaMemcpyHostToDevice, ctx_.stream()),
                   "copying the touched rows' tiles to the GPU");
      }
      ctx_.Check(cudaEventRecord(rows_copied_.get(), ctx_.stream()),
                 "recording the touched rows' copy");
    }
    const UpdateScalars s = Scalars(learning_rate, step);
    const int64_t total = params.total_size();
    float* slot[3] = {nullptr, nullptr, nullptr};
    for (int k = 0; k < optimizer_.num_slots(); ++k) slot[k] = slots_.get() + k * total;
    LaunchUpdate(rule_, s, tiles_.get(), dense_tiles_ + row_tiles, params.device_values(),
                 params.device_grads(), slot[0], slot[1], slot[2], ctx_.stream());
    ctx_.CheckLaunch(absl::StrCat("the ", optimizer_.config().name(), " update of ",
                                  params.total_size(), " parameters"));
  }

 private:
  // The scalars of this step, as core/optimizer.cc computes them.
  UpdateScalars Scalars(float learning_rate, int64_t step) const {
    const proto::OptimizerConfig& c = optimizer_.config();
    UpdateScalars s;
    s.learning_rate = learning_rate;
    s.momentum = c.momentum();
    s.lr_momentum = learning_rate * c.momentum();
    s.epsilon = c.epsilon();
    s.beta1 = c.beta1();
    s.one_minus_beta1 = OneMinus(c.beta1());
    s.beta2 = c.beta2();
    s.one_minus_beta2 = OneMinus(c.beta2());
    if (rule_ == UpdateRule::kAdam) {
      s.learning_rate = AdamStepSize(learning_rate, step, c.beta1(), c.beta2());
    }
    return s;
  }

  Context& ctx_;
  const Optimizer& optimizer_;
  const UpdateRule rule_;
  DeviceArray<float> slots_;       // num_slots() x total_size(), slot after slot
  DeviceArray<UpdateTile> tiles_;  // the dense tiles, then this step's row tiles
  int64_t dense_tiles_ = 0;
  std::unique_ptr<UpdateTile[], PinnedFree> row_tiles_;  // this step's row tiles, pinned
  int64_t row_capacity_ = 0;                             // every row of every sparse parameter
  std::unique_ptr<CUevent_st, EventDestroy> rows_copied_;
};

absl::StatusOr<UpdateRule> RuleOf(const Optimizer& optimizer) {
  const proto::OptimizerConfig& c = optimizer.config();
  const std::string& name = c.name();
  if (name == "sgd") return UpdateRule::kSgd;
  if (name == "momentum") return c.use_nesterov() ? UpdateRule::kNesterov : UpdateRule::kMomentum;
  if (name == "adagrad") return UpdateRule::kAdagrad;
  if (name == "adam") return UpdateRule::kAdam;
  if (name == "rmsprop") return c.centered() ? UpdateRule::kCenteredRmsProp : UpdateRule::kRmsProp;
  return absl::UnimplementedError(
      absl::StrCat("optimizer \"", name, "\" has no update on the GPU"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<nn::ParameterUpdate>> MakeDeviceUpdate(
    Context& ctx, const Optimizer& optimizer, const nn::ParameterSet& params) {
  absl::StatusOr<UpdateRule> rule = RuleOf(optimizer);
  if (!rule.ok()) return rule.status();
  auto update = std::make_unique<DeviceUpdate>(ctx, optimizer, *rule);
  if (absl::Status s = update->Prepare(params); !s.ok()) return s;
  return update;
}

}  // namespace psflow::cuda
