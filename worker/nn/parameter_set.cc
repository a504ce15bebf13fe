#include "worker/nn/parameter_set.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <utility>

#include "core/log.h"

namespace psflow::nn {
namespace {

constexpr int64_t kAlignFloats = 16;  // 64 bytes: each parameter starts on a cache line

// Uniform in [-1, 1) from the top 24 bits of a 64-bit draw: the same values with every standard
// library, unlike std::uniform_real_distribution.
float UnitUniform(std::mt19937_64& rng) {
  return static_cast<float>(rng() >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

// N(0, 1) restricted to [-2, 2] by redrawing (Box-Muller on UnitUniform draws).
float TruncatedUnitNormal(std::mt19937_64& rng) {
  for (;;) {
    const double u1 = (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;          // [0, 1)
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    if (std::fabs(z) <= 2.0) return static_cast<float>(z);
  }
}

}  // namespace

void HostBufferDeleter::operator()(float* p) const {
  if (memory != nullptr) {
    memory->Free(p);
  } else {
    std::free(p);
  }
}

ParameterSet::HostBuffer ParameterSet::AllocateHost(const HostMemory* memory) const {
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(total_, kAlignFloats)) * sizeof(float);
  if (memory != nullptr) return HostBuffer(memory->Allocate(bytes), HostBufferDeleter{memory});
  void* p = std::aligned_alloc(64, bytes);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return HostBuffer(static_cast<float*>(p), HostBufferDeleter{nullptr});
}

ParameterSet::Handle ParameterSet::Declare(std::string name, Shape shape, Initializer init) {
  ParameterDesc d;
  d.name = std::move(name);
  d.shape = std::move(shape);
  d.init = init;
  d.offset = total_;
  d.size = NumElements(d.shape);
  total_ += (d.size + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  descs_.push_back(std::move(d));
  return static_cast<Handle>(descs_.size() - 1);
}

void ParameterSet::Finalize() {
  values_ = AllocateHost(nullptr);
  grads_ = AllocateHost(nullptr);
}

bool ParameterSet::MoveHostBuffersTo(const HostMemory& memory) {
  assert(finalized());
  HostBuffer values = AllocateHost(&memory);
  HostBuffer grads = AllocateHost(&memory);
  if (values == nullptr || grads == nullptr) return false;
  const size_t bytes = static_cast<size_t>(total_) * sizeof(float);
  std::memcpy(values.get(), values_.get(), bytes);
  std::memcpy(grads.get(), grads_.get(), bytes);
  values_ = std::move(values);
  grads_ = std::move(grads);
  return true;
}

void ParameterSet::Initialize(uint64_t seed) {
  for (size_t i = 0; i < descs_.size(); ++i) {
    const ParameterDesc& d = descs_[i];
    std::mt19937_64 rng(seed * 1000003u + i);
    std::span<float> v = value(static_cast<Handle>(i));
    switch (d.init.kind) {
      case Initializer::Kind::kZeros:
      case Initializer::Kind::kConstant:
        std::fill(v.begin(), v.end(), d.init.scale);
        break;
      case Initializer::Kind::kUniform:
        for (float& x : v) x = d.init.scale * UnitUniform(rng);
        break;
      case Initializer::Kind::kGlorotUniform: {
        // As TensorFlow: [in, out] for dense kernels; [k..., in, out] for conv kernels, whose
        // receptive field (the product of the k's) multiplies both fans.
        const size_t rank = d.shape.size();
        const int64_t out = rank == 0 ? 1 : d.shape[rank - 1];
        const int64_t in = rank < 2 ? 1 : d.shape[rank - 2];
        const int64_t receptive = d.size / std::max<int64_t>(in * out, 1);
        const int64_t fan_in = receptive * in, fan_out = receptive * out;
        const float limit = std::sqrt(6.0f / static_cast<float>(fan_in + fan_out));
        for (float& x : v) x = limit * UnitUniform(rng);
        break;
      }
      case Initializer::Kind::kTruncatedNormal:
        for (float& x : v) x = d.init.scale * TruncatedUnitNormal(rng);
        break;
    }
  }
  ValuesChanged();
}

void ParameterSet::MarkSparse(Handle h) { descs_[static_cast<size_t>(h)].sparse = true; }

void ParameterSet::SetTouchedRows(Handle h, const std::vector<int64_t>& rows) {
  descs_[static_cast<size_t>(h)].touched_rows.assign(rows.begin(), rows.end());
}

void ParameterSet::CopyRowsToPullFrom(const ParameterSet& other) {
  assert(other.descs_.size() == descs_.size());
  for (size_t i = 0; i < descs_.size(); ++i) {
    if (!descs_[i].sparse) continue;
    const std::vector<int64_t>& rows = other.descs_[i].rows_to_pull;
    descs_[i].rows_to_pull.assign(rows.begin(), rows.end());
  }
  pulls_rows_ = other.pulls_rows_;
}

std::unique_ptr<ParameterSet> ParameterSet::SameLayoutAs(const ParameterSet& other) {
  auto set = std::make_unique<ParameterSet>();
  for (const ParameterDesc& d : other.descs_) {
    const Handle h = set->Declare(d.name, d.shape, d.init);
    if (d.sparse) set->MarkSparse(h);
  }
  if (const HostMemory* memory = other.host_memory(); memory != nullptr) {
    set->values_ = set->AllocateHost(memory);
    set->grads_ = set->AllocateHost(memory);
    if (set->values_ != nullptr && set->grads_ != nullptr) return set;
    PSFLOW_LOG(WARNING) << "no room for a second copy of the " << set->total_ * 2 * sizeof(float)
                        << " bytes of host parameters and gradients in the memory of the first; "
                        << "the copy is kept on the heap, and copies from and to it are slower";
  }
  set->Finalize();
  return set;
}

void ParameterSet::CopyValuesFrom(const ParameterSet& other) {
  assert(other.total_ == total_ && other.descs_.size() == descs_.size());
  std::memcpy(values_.get(), other.values_.get(), static_cast<size_t>(total_) * sizeof(float));
  ValuesChanged();
}

void ParameterSet::CopyGradientsFrom(const ParameterSet& other) {
  assert(other.total_ == total_ && other.descs_.size() == descs_.size());
  for (size_t i = 0; i < descs_.size(); ++i) {
    ParameterDesc& d = descs_[i];
    const ParameterDesc& from = other.descs_[i];
    const float* src = other.grads_.get() + from.offset;
    float* dst = grads_.get() + d.offset;
    if (!d.sparse) {
      std::memcpy(dst, src, static_cast<size_t>(d.size) * sizeof(float));
      continue;
    }
    d.touched_rows.assign(from.touched_rows.begin(), from.touched_rows.end());
    const int64_t row = d.row_width();
    for (const int64_t r : d.touched_rows) {
      std::memcpy(dst + r * row, src + r * row, static_cast<size_t>(row) * sizeof(float));
    }
  }
}

void ParameterSet::SwapValues(ParameterSet& other) {
  assert(other.total_ == total_ && other.descs_.size() == descs_.size());
  std::swap(values_, other.values_);
  ValuesChanged();
  other.ValuesChanged();
}

void ParameterSet::SwapGradients(ParameterSet& other) {
  assert(other.total_ == total_ && other.descs_.size() == descs_.size());
  std::swap(grads_, other.grads_);
  for (size_t i = 0; i < descs_.size(); ++i) {
    if (descs_[i].sparse) std::swap(descs_[i].touched_rows, other.descs_[i].touched_rows);
  }
}

void ParameterSet::ZeroGrads() { std::memset(grads_.get(), 0, total_ * sizeof(float)); }

}  // namespace psflow::nn
