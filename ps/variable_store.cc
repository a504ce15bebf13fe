#include "ps/variable_store.h"

#include <cstring>

#include "absl/algorithm/container.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "core/wire.h"

namespace psflow {

absl::StatusOr<bool> VariableStore::Initialize(const proto::InitializeRequest& request) {
  std::lock_guard lock(init_mu_);
  if (ready()) return false;
  if (request.variables().empty()) {
    return absl::InvalidArgumentError("initialize: no variables");
  }
  ASSIGN_OR_RETURN(auto optimizer, MakeOptimizer(request.optimizer()));
  std::map<std::string, std::unique_ptr<Variable>, std::less<>> vars;
  int64_t bytes = 0;
  for (const auto& nt : request.variables()) {
    auto v = std::make_unique<Variable>();
    v->shape.assign(nt.tensor().shape().begin(), nt.tensor().shape().end());
    ASSIGN_OR_RETURN(const int64_t elements, CheckShape(v->shape, nt.name()));
    // Compare with the bytes actually sent before allocating: a bogus shape must not make the
    // ps allocate (and die of) what the request never carried.
    if (static_cast<uint64_t>(elements) * sizeof(float) != nt.tensor().data().size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(nt.name(), ": shape [", absl::StrJoin(v->shape, ","), "] needs ",
                       elements * 4, " bytes, got ", nt.tensor().data().size()));
    }
    v->value.resize(static_cast<size_t>(elements));
    RETURN_IF_ERROR(DecodeFloat32(nt.tensor(), v->shape, v->value, nt.name()));
    bytes += static_cast<int64_t>(v->value.size() * sizeof(float));
    if (!vars.emplace(nt.name(), std::move(v)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("initialize: duplicate variable \"", nt.name(), "\""));
    }
  }
  variables_ = std::move(vars);
  optimizer_ = std::move(optimizer);
  bytes_ = bytes;
  ready_.store(true, std::memory_order_release);
  return true;
}

absl::Status VariableStore::Pull(const proto::PullRequest& request,
                                 proto::PullResponse* response) const {
  if (!ready()) return absl::FailedPreconditionError("variables are not initialised yet");
  auto emit = [response](int i, const std::string& name, const Variable& v) {
    // Reuse the response's existing entries (and their byte buffers) where it has them.
    proto::NamedTensor* out =
        i < response->variables_size() ? response->mutable_variables(i) : response->add_variables();
    out->set_name(name);
    std::lock_guard lock(v.mu);
    EncodeFloat32(v.value, v.shape, out->mutable_tensor());
  };
  int i = 0;
  if (request.names().empty()) {
    for (const auto& [name, v] : variables_) emit(i++, name, *v);
  } else {
    for (const auto& name : request.names()) {
      auto it = variables_.find(name);
      if (it == variables_.end()) {
        return absl::NotFoundError(absl::StrCat("no variable \"", name, "\" on this ps task"));
      }
      emit(i++, name, *it->second);
    }
  }
  while (response->variables_size() > i) response->mutable_variables()->RemoveLast();
  response->set_global_step(global_step());
  return absl::OkStatus();
}

absl::StatusOr<int64_t> VariableStore::Push(const proto::PushRequest& request) {
  if (!ready()) return absl::FailedPreconditionError("variables are not initialised yet");
  if (request.gradients().empty()) return absl::InvalidArgumentError("push with no gradients");
  absl::InlinedVector<Variable*, 16> targets;
  for (const auto& g : request.gradients()) {
    auto it = variables_.find(g.name());
    if (it == variables_.end()) {
      return absl::NotFoundError(absl::StrCat("no variable \"", g.name(), "\" on this ps task"));
    }
    const Variable& v = *it->second;
    const auto& t = g.tensor();
    if (t.dtype() != proto::DT_FLOAT32 ||
        !std::equal(t.shape().begin(), t.shape().end(), v.shape.begin(), v.shape.end()) ||
        t.data().size() != v.value.size() * sizeof(float)) {
      return absl::InvalidArgumentError(absl::StrCat("gradient for \"", g.name(),
                                                     "\" does not match the variable's float32 [",
                                                     absl::StrJoin(v.shape, ","), "]"));
    }
    if (absl::c_linear_search(targets, it->second.get())) {
      return absl::InvalidArgumentError(absl::StrCat("push names \"", g.name(), "\" twice"));
    }
    targets.push_back(it->second.get());
  }
  std::vector<float> scratch;
  for (int i = 0; i < request.gradients_size(); ++i) {
    Variable& v = *targets[static_cast<size_t>(i)];
    const std::string& bytes = request.gradients(i).tensor().data();
    std::span<const float> grad;
    if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) == 0) {
      // Apply straight from the received bytes (little-endian floats, see core/wire.h).
      grad = {reinterpret_cast<const float*>(bytes.data()), v.value.size()};
    } else {
      scratch.resize(v.value.size());
      std::memcpy(scratch.data(), bytes.data(), bytes.size());
      grad = scratch;
    }
    std::lock_guard lock(v.mu);
    optimizer_->Apply(v.value, grad);
  }
  return global_step_.fetch_add(1, std::memory_order_acq_rel) + 1;
}

}  // namespace psflow
