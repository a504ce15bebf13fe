#include "ps/partition_store.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/byte_source.h"
#include "core/status_macros.h"
#include "core/tensor_shape.h"
#include "core/wire_type.h"

namespace psflow {

absl::InlinedVector<std::span<float>, 3> PartitionStore::Target::SlotSpans(int64_t offset,
                                                                           int64_t count) const {
  absl::InlinedVector<std::span<float>, 3> spans;
  for (float* s : slots) spans.emplace_back(s + offset, static_cast<size_t>(count));
  return spans;
}

void PartitionStore::Target::Update(
    int64_t offset, int64_t count,
    absl::FunctionRef<void(std::span<float> run, int64_t at)> fn) const {
  if (values != nullptr) {
    values->Update(offset, count, fn);
    return;
  }
  for (int64_t at = offset; at < offset + count; at += VersionedValues::kRunElements) {
    const int64_t n = std::min(VersionedValues::kRunElements, offset + count - at);
    fn({flat + at, static_cast<size_t>(n)}, at);
  }
}

PartitionStore::Target PartitionStore::TargetOf(Partition& p) {
  Target t;
  t.values = p.value.get();
  for (auto& s : p.slots) t.slots.push_back(s.data());
  return t;
}

absl::StatusOr<std::unique_ptr<PartitionStore>> PartitionStore::Create(
    const proto::InitializeRequest& request, const Optimizer& optimizer, bool accumulate,
    int64_t max_bytes, absl::string_view bound) {
  if (request.partitions().empty()) return absl::InvalidArgumentError("initialize: no partitions");
  std::unique_ptr<PartitionStore> store(new PartitionStore);
  std::set<std::string> names;
  for (const proto::PartitionSpec& spec : request.partitions()) {
    auto p = std::make_unique<Partition>();
    const std::vector<int64_t> shape(spec.variable_shape().begin(), spec.variable_shape().end());
    ASSIGN_OR_RETURN(const int64_t elements, CheckShape(shape, spec.variable()));
    const int64_t rows = shape.empty() ? 1 : shape[0];
    if (spec.variable().empty() || spec.row_begin() < 0 || spec.row_end() > rows ||
        spec.row_begin() > spec.row_end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("initialize: partition \"", spec.variable(), "\" rows [", spec.row_begin(),
                       ", ", spec.row_end(), ") of shape [", absl::StrJoin(shape, ","), "]"));
    }
    p->name = spec.row_begin() == 0 && spec.row_end() == rows
                  ? spec.variable()
                  : absl::StrCat(spec.variable(), "[", spec.row_begin(), ":", spec.row_end(), "]");
    if (!names.insert(p->name).second) {
      return absl::InvalidArgumentError(absl::StrCat("initialize: duplicate partition ", p->name));
    }
    p->row_elements = rows == 0 ? 0 : elements / rows;
    p->rows = spec.row_end() - spec.row_begin();
    p->elements = p->rows * p->row_elements;
    p->shape = shape;
    if (!p->shape.empty()) p->shape[0] = p->rows;
    store->bytes_ += p->elements * 4;
    store->partitions_.push_back(std::move(p));
  }
  // Allocate only after every partition checked out: a bogus request allocates nothing. Each
  // partition's elements are 2^40 at most (CheckShape), so these sums cannot overflow for any
  // partition count a request can carry.
  const int64_t copies = 1 + optimizer.num_slots() + (accumulate ? 1 : 0);
  const int64_t needed = store->bytes_ * copies;
  const auto too_big = [&](absl::string_view why) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "initialize: the model's ", store->partitions_.size(),
        " partition(s) on this ps task need ", needed, " bytes (", store->bytes_, " of values x ",
        copies, ": the values, ", optimizer.num_slots(), " optimizer slot(s)",
        accumulate ? ", the sync accumulators" : "", "), ", why));
  };
  if (max_bytes > 0 && needed > max_bytes) {
    return too_big(absl::StrCat("more than the ", max_bytes, " bytes of ", bound,
                                ": give the ps more memory or more ps tasks"));
  }
  try {
    for (auto& p : store->partitions_) {
      const auto n = static_cast<size_t>(p->elements);
      p->value = std::make_unique<VersionedValues>(p->elements);
      for (int s = 0; s < optimizer.num_slots(); ++s) {
        p->slots.emplace_back(n, optimizer.slot_initial_value(s));
      }
      if (accumulate) p->accumulator.assign(n, 0.0f);
    }
  } catch (const std::bad_alloc&) {
    return too_big("more than this process could allocate");
  }
  return store;
}

absl::StatusOr<std::unique_ptr<PartitionStore>> PartitionStore::Restore(
    const proto::InitializeRequest& request, const Optimizer& optimizer, bool accumulate,
    const Checkpoint& checkpoint, int64_t max_bytes, absl::string_view bound) {
  ASSIGN_OR_RETURN(auto store, Create(request, optimizer, accumulate, max_bytes, bound));
  const size_t per_partition = 1 + static_cast<size_t>(optimizer.num_slots());
  if (checkpoint.tensors.size() != store->partitions_.size() * per_partition) {
    return absl::DataLossError(absl::StrCat("checkpoint has ", checkpoint.tensors.size(),
                                            " tensors; its partitions need ",
                                            store->partitions_.size() * per_partition));
  }
  size_t t = 0;
  for (auto& p : store->partitions_) {
    for (size_t k = 0; k < per_partition; ++k, ++t) {
      const CheckpointTensor& tensor = checkpoint.tensors[t];
      const std::string expected =
          k == 0 ? p->name
                 : absl::StrCat(p->name, "/", optimizer.slot_name(static_cast<int>(k - 1)));
      if (tensor.name != expected || tensor.values.size() != static_cast<size_t>(p->elements)) {
        return absl::DataLossError(absl::StrCat(
            "checkpoint tensor ", t, " is \"", tensor.name, "\" with ", tensor.values.size(),
            " elements; expected \"", expected, "\" with ", p->elements));
      }
      if (k == 0) {
        p->value->Write(0, tensor.values);
      } else {
        p->slots[k - 1] = tensor.values;
      }
    }
  }
  return store;
}

std::vector<int64_t> PartitionStore::partition_elements() const {
  std::vector<int64_t> out;
  out.reserve(partitions_.size());
  for (const auto& p : partitions_) out.push_back(p->elements);
  return out;
}

absl::StatusOr<int64_t> PartitionStore::CheckSegments(const proto::TransferHeader& header,
                                                      bool allow_sparse) const {
  if (header.segments().empty()) return absl::InvalidArgumentError("bulk call with no segments");
  uint64_t total = 0;
  for (const proto::Segment& s : header.segments()) {
    if (s.partition() >= partitions_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("segment names partition ", s.partition(),
                                                     "; this ps task holds ", partitions_.size()));
    }
    const Partition& p = *partitions_[s.partition()];
    if (s.rows_size() > 0) {
      if (!allow_sparse) {
        return absl::InvalidArgumentError(
            absl::StrCat(p.name, ": sparse rows are only accepted in gradient pushes and pulls"));
      }
      for (int64_t r : s.rows()) {
        if (r < 0 || r >= p.rows) {
          return absl::InvalidArgumentError(
              absl::StrCat(p.name, ": row ", r, " outside [0, ", p.rows, ")"));
        }
      }
      if (s.count() != s.rows_size() * p.row_elements) {
        return absl::InvalidArgumentError(absl::StrCat(p.name, ": ", s.rows_size(), " rows of ",
                                                       p.row_elements, " elements, but count ",
                                                       s.count()));
      }
    } else if (s.offset() < 0 || s.count() < 0 || s.offset() > p.elements ||
               s.count() > p.elements - s.offset()) {
      return absl::InvalidArgumentError(absl::StrCat(p.name, ": elements [", s.offset(), ", +",
                                                     s.count(), ") outside its ", p.elements));
    }
    total += static_cast<uint64_t>(s.count());
  }
  return static_cast<int64_t>(total);
}

void PartitionStore::Assign(const proto::TransferHeader& header, ByteSource& payload) {
  const WireType type = WireTypeOf(header.wire_dtype()).value_or(WireType::kFloat32);
  for (const proto::Segment& s : header.segments()) {
    Partition& p = *partitions_[s.partition()];
    std::lock_guard lock(p.mu);
    p.value->Update(s.offset(), s.count(),
                    [&](std::span<float> run, int64_t) { ReadFloats(payload, run, type); });
  }
}

void PartitionStore::ApplySegment(const Partition& p, const proto::Segment& s, ByteSource& payload,
                                  WireType type, const Optimizer& optimizer, float learning_rate,
                                  int64_t step, const Target& target) {
  auto apply_run = [&](int64_t offset, int64_t count) {
    target.Update(offset, count, [&](std::span<float> var, int64_t at) {
      ForEachFloatBlock(
          payload, static_cast<int64_t>(var.size()),
          [&](std::span<const float> g) {
            optimizer.Apply(learning_rate, step, var.first(g.size()), g,
                            target.SlotSpans(at, static_cast<int64_t>(g.size())));
            var = var.subspan(g.size());
            at += static_cast<int64_t>(g.size());
          },
          type);
    });
  };
  // Sparse: only the rows sent are updated (a lazy update), a repeated row once per time sent.
  ForEachRange(p, s, apply_run);
}

void PartitionStore::ApplyGradients(const proto::TransferHeader& header, ByteSource& payload,
                                    const Optimizer& optimizer, float learning_rate, int64_t step) {
  const WireType type = WireTypeOf(header.wire_dtype()).value_or(WireType::kFloat32);
  for (const proto::Segment& s : header.segments()) {
    Partition& p = *partitions_[s.partition()];
    std::lock_guard lock(p.mu);
    ApplySegment(p, s, payload, type, optimizer, learning_rate, step, TargetOf(p));
  }
}

void PartitionStore::ApplyGradientsTo(std::vector<CheckpointTensor>& snapshot,
                                      const proto::TransferHeader& header, ByteSource& payload,
                                      const Optimizer& optimizer, float learning_rate,
                                      int64_t step) const {
  const WireType type = WireTypeOf(header.wire_dtype()).value_or(WireType::kFloat32);
  // Snapshot's layout: per partition its values, then its slots.
  const size_t per_partition = 1 + static_cast<size_t>(optimizer.num_slots());
  for (const proto::Segment& s : header.segments()) {
    const size_t first = s.partition() * per_partition;
    Target target;
    target.flat = snapshot[first].values.data();
    for (size_t k = 1; k < per_partition; ++k)
      target.slots.push_back(snapshot[first + k].values.data());
    ApplySegment(*partitions_[s.partition()], s, payload, type, optimizer, learning_rate, step,
                 target);
  }
}

void PartitionStore::Stage(const proto::TransferHeader& header, ByteSource& payload) {
  const WireType type = WireTypeOf(header.wire_dtype()).value_or(WireType::kFloat32);
  for (const proto::Segment& s : header.segments()) {
    Partition& p = *partitions_[s.partition()];
    Partition::Piece piece;
    {
      // A piece of an earlier step, with its buffers: staging allocates nothing once warm.
      std::lock_guard lock(p.mu);
      if (!p.spare.empty()) {
        piece = std::move(p.spare.back());
        p.spare.pop_back();
      }
    }
    piece.worker = header.worker();
    piece.offset = s.offset();
    piece.rows.assign(s.rows().begin(), s.rows().end());
    piece.values.resize(static_cast<size_t>(s.count()));
    ReadFloats(payload, piece.values, type);
    std::lock_guard lock(p.mu);
    p.staged.push_back(std::move(piece));
  }
}

void PartitionStore::ApplyStaged(uint32_t partition, std::span<const int> workers, float scale,
                                 const Optimizer& optimizer, float learning_rate, int64_t step) {
  Partition& p = *partitions_[partition];
  std::lock_guard lock(p.mu);
  // Worker by worker, each worker's pieces in arrival order: a worker's pieces cover distinct
  // elements, so only the order of workers matters to the sum. A sparse piece touches its rows,
  // a dense one the whole partition.
  bool dense = false;
  p.touched.clear();
  for (int worker : workers) {
    for (const Partition::Piece& piece : p.staged) {
      if (piece.worker != worker || piece.values.empty()) continue;
      if (piece.rows.empty()) {
        dense = true;
        float* acc = p.accumulator.data() + piece.offset;
        for (size_t i = 0; i < piece.values.size(); ++i) acc[i] += piece.values[i];
        continue;
      }
      const float* g = piece.values.data();
      for (int64_t r : piece.rows) {
        float* acc = p.accumulator.data() + r * p.row_elements;
        for (int64_t i = 0; i < p.row_elements; ++i) acc[i] += g[i];
        g += p.row_elements;
      }
      p.touched.insert(p.touched.end(), piece.rows.begin(), piece.rows.end());
    }
  }
  for (Partition::Piece& piece : p.staged) p.spare.push_back(std::move(piece));
  p.staged.clear();
  const Target target = TargetOf(p);
  const auto apply_run = [&](int64_t offset, int64_t count) {
    target.Update(offset, count, [&](std::span<float> var, int64_t at) {
      const size_t n = var.size();
      float* acc = p.accumulator.data() + at;
      for (size_t i = 0; i < n; ++i) acc[i] *= scale;
      optimizer.Apply(learning_rate, step, var, {acc, n},
                      target.SlotSpans(at, static_cast<int64_t>(n)));
      std::memset(acc, 0, n * 4);
    });
  };
  if (dense) {
    apply_run(0, p.elements);
    return;
  }
  // Only the rows the workers sent, each once, as a worker training alone and an async ps update
  // them (core/optimizer.h: sparse gradients): a row nobody touched keeps its values and slots.
  std::sort(p.touched.begin(), p.touched.end());
  p.touched.erase(std::unique(p.touched.begin(), p.touched.end()), p.touched.end());
  for (int64_t r : p.touched) apply_run(r * p.row_elements, p.row_elements);
}

void PartitionStore::DropStaged(std::span<const int> workers) {
  if (workers.empty()) return;
  for (auto& pp : partitions_) {
    Partition& p = *pp;
    std::lock_guard lock(p.mu);
    auto keep = p.staged.begin();
    for (auto it = p.staged.begin(); it != p.staged.end(); ++it) {
      if (std::find(workers.begin(), workers.end(), it->worker) != workers.end()) {
        p.spare.push_back(std::move(*it));
      } else {
        if (keep != it) *keep = std::move(*it);
        ++keep;
      }
    }
    p.staged.erase(keep, p.staged.end());
  }
}

void PartitionStore::ForEachRange(const Partition& p, const proto::Segment& s,
                                  absl::FunctionRef<void(int64_t offset, int64_t count)> fn) {
  if (s.rows_size() == 0) {
    if (s.count() > 0) fn(s.offset(), s.count());
    return;
  }
  // Rows in the order asked, consecutive ascending ones as one range.
  const auto rows = s.rows();
  for (int i = 0; i < rows.size();) {
    int j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    fn(rows[i] * p.row_elements, (j - i) * p.row_elements);
    i = j;
  }
}

void PartitionStore::CopyOut(const proto::TransferHeader& header, std::byte* out) const {
  const WireType type = WireTypeOf(header.wire_dtype()).value_or(WireType::kFloat32);
  for (const proto::Segment& s : header.segments()) {
    const Partition& p = *partitions_[s.partition()];
    if (s.count() == 0) continue;
    std::lock_guard lock(p.mu);
    ForEachRange(p, s, [&](int64_t offset, int64_t count) {
      p.value->ForEachRun(offset, count, [&](std::span<const float> run) {
        EncodeWire(run, type, out);
        out += run.size() * WireBytes(type);
      });
    });
  }
}

void PartitionStore::PinOut(const proto::TransferHeader& header,
                            absl::FunctionRef<void(const VersionedValues::Pin&)> fn) const {
  for (const proto::Segment& s : header.segments()) {
    const Partition& p = *partitions_[s.partition()];
    if (s.count() == 0) continue;
    std::lock_guard lock(p.mu);
    ForEachRange(p, s, [&](int64_t offset, int64_t count) { p.value->PinRuns(offset, count, fn); });
  }
}

std::vector<CheckpointTensor> PartitionStore::Snapshot(const Optimizer& optimizer) const {
  std::vector<CheckpointTensor> out;
  for (const auto& pp : partitions_) {
    const Partition& p = *pp;
    std::lock_guard lock(p.mu);
    std::vector<float> values(static_cast<size_t>(p.elements));
    p.value->Read(0, values);
    out.push_back({p.name, p.shape, std::move(values)});
    for (size_t k = 0; k < p.slots.size(); ++k) {
      out.push_back({absl::StrCat(p.name, "/", optimizer.slot_name(static_cast<int>(k))), p.shape,
                     p.slots[k]});
    }
  }
  return out;
}

}  // namespace psflow
