// All of a model's parameters in one contiguous buffer, and their gradients in a second buffer of
// the same layout (as llm.c's malloc_and_point_parameters): the ps client pushes and pulls whole
// buffers, the optimizer runs over one span, and a CUDA backend needs one allocation each.
//
// Life cycle: layers Declare() their parameters while the model is built; Finalize() allocates
// both buffers; after that handles give stable pointers. Not thread-safe.
#ifndef PSFLOW_WORKER_NN_PARAMETER_SET_H_
#define PSFLOW_WORKER_NN_PARAMETER_SET_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "worker/nn/tensor.h"

namespace psflow::nn {

// How a parameter's initial values are drawn (by the chief, before they go to the ps).
struct Initializer {
  enum class Kind { kZeros, kConstant, kGlorotUniform, kUniform, kTruncatedNormal };
  Kind kind = Kind::kZeros;
  // kConstant: the value; kUniform: values in [-scale, scale]; kTruncatedNormal: the stddev.
  float scale = 0.0f;

  static Initializer Zeros() { return {Kind::kZeros, 0.0f}; }
  static Initializer Constant(float value) { return {Kind::kConstant, value}; }
  // TensorFlow's default for dense/conv kernels: U(-l, l), l = sqrt(6 / (fan_in + fan_out));
  // a kernel [k..., in, out] has fan_in = prod(k) * in and fan_out = prod(k) * out.
  static Initializer GlorotUniform() { return {Kind::kGlorotUniform, 0.0f}; }
  static Initializer Uniform(float s) { return {Kind::kUniform, s}; }
  // tf.truncated_normal_initializer: N(0, stddev^2) redrawn beyond two standard deviations.
  static Initializer TruncatedNormal(float stddev) { return {Kind::kTruncatedNormal, stddev}; }
  bool operator==(const Initializer&) const = default;
};

// Where a set's host buffers live: the heap unless a backend moves them (ParameterSet::
// MoveHostBuffersTo). A GPU backend gives page-locked memory, which copies to and from the device
// need to run at the bus's speed and asynchronously. A buffer goes back to the memory it came
// from, whichever set a swap left it in. Must outlive every buffer it gave.
class HostMemory {
 public:
  virtual ~HostMemory() = default;
  // `bytes` (> 0) bytes, 64-byte aligned and zeroed, or null when it has none to give.
  virtual float* Allocate(size_t bytes) const = 0;
  virtual void Free(float* p) const = 0;
};

// How a ParameterSet's host buffer goes back to its memory (null: the heap).
struct HostBufferDeleter {
  const HostMemory* memory = nullptr;
  void operator()(float* p) const;
};

struct ParameterDesc {
  std::string name;  // unique, e.g. "dense0/kernel"
  Shape shape;
  Initializer init;
  int64_t offset = 0;  // in floats, into values() and grads()
  int64_t size = 0;    // in floats
  bool sparse = false;
  std::vector<int64_t> touched_rows;  // sparse only: this step's rows
  std::vector<int64_t> rows_to_pull;  // sparse only: the rows the next pull brings
  // Floats per row of the first dimension (what a touched row spans); 0 for a scalar or an empty
  // first dimension.
  int64_t row_width() const { return shape.empty() || shape[0] == 0 ? 0 : size / shape[0]; }
};

class ParameterSet {
 public:
  using Handle = int;

  // Adds a parameter; returns the handle layers keep. Only before Finalize().
  Handle Declare(std::string name, Shape shape, Initializer init);
  // Allocates the value and gradient buffers (64-byte aligned, zeroed).
  void Finalize();
  bool finalized() const { return values_ != nullptr; }

  // A finalized set with the same parameters (names, shapes, offsets, sparseness), zeroed: a
  // second buffer pair for communication beside computation, in the same host memory as other's
  // (the heap, with one WARNING, when that memory has no room). No device mirror.
  static std::unique_ptr<ParameterSet> SameLayoutAs(const ParameterSet& other);
  // Moves both host buffers, with what they hold, into `memory` (the old ones freed). False,
  // changing nothing, when `memory` cannot give both. Only on a finalized set.
  bool MoveHostBuffersTo(const HostMemory& memory);
  // Where the host value buffer is (null: the heap); the gradient buffer is in the same memory
  // unless swaps mixed sets of different memories.
  const HostMemory* host_memory() const { return values_.get_deleter().memory; }
  // Copies other's values (whole buffer). other must have this set's layout.
  void CopyValuesFrom(const ParameterSet& other);
  // Copies other's gradients as a push reads them: dense parameters whole, sparse ones only in
  // their touched rows, with the touched-row lists. other must have this set's layout. Allocates
  // only while a touched-row list outgrows every earlier one.
  void CopyGradientsFrom(const ParameterSet& other);
  // The same hand-overs without a copy: exchange the host value buffers (both sets say
  // ValuesChanged), or the host gradient buffers with the sparse parameters' touched-row lists;
  // each buffer keeps its memory (MoveHostBuffersTo). other must have this set's layout. Either
  // set may be attached to a device: device mirrors stay where they are, and a backend reads the
  // host buffers' addresses at each copy (a recorded graph does not: Model::EnableGraphs).
  // Allocate nothing.
  void SwapValues(ParameterSet& other);
  void SwapGradients(ParameterSet& other);

  // Fills values() from each parameter's initializer; the same seed gives the same values.
  void Initialize(uint64_t seed);

  // The host values changed: whoever writes values() directly (a pull, an update) says so, and
  // a Model computing with this set copies them to its device before its next step (nothing to
  // copy on the CPU). Initialize and CopyValuesFrom say so themselves.
  void ValuesChanged() { ++values_version_; }
  // Bumped by every ValuesChanged; starts at 1.
  uint64_t values_version() const { return values_version_; }
  void ZeroGrads();

  // Sparse gradients (an embedding's, as TensorFlow's IndexedSlices): after MarkSparse(h), the
  // layer that owns h reports each step which rows of its first dimension the step touched
  // (SetTouchedRows: sorted, unique, in range); the ps client then pushes only those rows of
  // grad(h). Rows not listed are never read.
  void MarkSparse(Handle h);
  bool sparse(Handle h) const { return descs_[static_cast<size_t>(h)].sparse; }
  void SetTouchedRows(Handle h, const std::vector<int64_t>& rows);  // copies, keeping capacity
  std::span<const int64_t> touched_rows(Handle h) const {
    return descs_[static_cast<size_t>(h)].touched_rows;
  }

  // Sparse pulls (TensorFlow 1.x gathered an embedding's rows on the ps and sent only those):
  // while pulls_rows(), a pull into this set (PsClient) brings of each sparse parameter h only
  // rows_to_pull(h), the rows the step it serves reads (Trainable::ListRowsRead fills them from
  // that step's batch); every other row of h keeps the value it had, and that step must not read
  // it. Off (every row pulled) until set_pulls_rows(true).
  // mutable_rows_to_pull(h): the list to fill, sorted, unique and in range (capacity kept).
  std::vector<int64_t>& mutable_rows_to_pull(Handle h) {
    return descs_[static_cast<size_t>(h)].rows_to_pull;
  }
  std::span<const int64_t> rows_to_pull(Handle h) const {
    return descs_[static_cast<size_t>(h)].rows_to_pull;
  }
  void set_pulls_rows(bool on) { pulls_rows_ = on; }
  bool pulls_rows() const { return pulls_rows_; }
  // other's rows to pull and pulls_rows() (other has this set's layout). Allocates only while a
  // list outgrows every earlier one.
  void CopyRowsToPullFrom(const ParameterSet& other);

  const std::vector<ParameterDesc>& descs() const { return descs_; }
  int64_t total_size() const { return total_; }
  std::span<float> values() { return {values_.get(), static_cast<size_t>(total_)}; }
  std::span<const float> values() const { return {values_.get(), static_cast<size_t>(total_)}; }
  std::span<float> grads() { return {grads_.get(), static_cast<size_t>(total_)}; }
  std::span<const float> grads() const { return {grads_.get(), static_cast<size_t>(total_)}; }
  // The copies layers compute with: the host buffers above on the CPU backend; on a GPU a mirror
  // in device memory that the backend attached (values and gradients, same layout).
  void AttachDevice(float* device_values, float* device_grads) {
    device_values_ = device_values;
    device_grads_ = device_grads;
  }
  float* device_values() { return device_values_ != nullptr ? device_values_ : values_.get(); }
  float* device_grads() { return device_grads_ != nullptr ? device_grads_ : grads_.get(); }
  std::span<float> device_value(Handle h) { return Slice(device_values(), h); }
  std::span<float> device_grad(Handle h) { return Slice(device_grads(), h); }
  bool on_device() const { return device_values_ != nullptr; }

  std::span<float> value(Handle h) { return Slice(values_.get(), h); }
  std::span<float> grad(Handle h) { return Slice(grads_.get(), h); }
  std::span<const float> value(Handle h) const { return Slice(values_.get(), h); }
  std::span<const float> grad(Handle h) const { return Slice(grads_.get(), h); }

 private:
  using HostBuffer = std::unique_ptr<float[], HostBufferDeleter>;
  // total_ floats (at least one cache line), zeroed, from `memory` (null: the heap, which throws
  // std::bad_alloc when it has none); null when `memory` has none.
  HostBuffer AllocateHost(const HostMemory* memory) const;
  std::span<float> Slice(float* base, Handle h) const {
    const auto& d = descs_[static_cast<size_t>(h)];
    return {base + d.offset, static_cast<size_t>(d.size)};
  }

  std::vector<ParameterDesc> descs_;
  int64_t total_ = 0;
  HostBuffer values_;
  uint64_t values_version_ = 1;
  bool pulls_rows_ = false;
  HostBuffer grads_;
  float* device_values_ = nullptr;  // owned by the backend
  float* device_grads_ = nullptr;
};

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_PARAMETER_SET_H_
