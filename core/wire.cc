#include "core/wire.h"

#include <bit>
#include <cassert>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psflow {

// The wire format is little-endian; on a little-endian host that is the memory layout itself.
static_assert(std::endian::native == std::endian::little,
              "psflow's wire encoding assumes a little-endian host");

int64_t NumElements(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<int64_t> CheckShape(std::span<const int64_t> shape, absl::string_view what) {
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": negative dimension ", d));
    if (d != 0 && n > kMaxElements / d) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": shape [", absl::StrJoin(shape, ","), "] is too large"));
    }
    n *= d;
  }
  return n;
}

void EncodeFloat32(std::span<const float> values, std::span<const int64_t> shape,
                   proto::TensorProto* out) {
  assert(static_cast<int64_t>(values.size()) == NumElements(shape));
  out->set_dtype(proto::DT_FLOAT32);
  out->mutable_shape()->Assign(shape.begin(), shape.end());
  std::string* data = out->mutable_data();
  data->resize(values.size_bytes());
  if (!values.empty()) std::memcpy(data->data(), values.data(), values.size_bytes());
}

absl::Status DecodeFloat32(const proto::TensorProto& tensor,
                           std::span<const int64_t> expected_shape, std::span<float> out,
                           absl::string_view what) {
  if (tensor.dtype() != proto::DT_FLOAT32) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected dtype float32, got ", proto::DType_Name(tensor.dtype())));
  }
  if (!std::equal(tensor.shape().begin(), tensor.shape().end(), expected_shape.begin(),
                  expected_shape.end())) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": expected shape [",
                                                   absl::StrJoin(expected_shape, ","), "], got [",
                                                   absl::StrJoin(tensor.shape(), ","), "]"));
  }
  if (tensor.data().size() != out.size_bytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected ", out.size_bytes(), " bytes, got ", tensor.data().size()));
  }
  if (!out.empty()) std::memcpy(out.data(), tensor.data().data(), out.size_bytes());
  return absl::OkStatus();
}

}  // namespace psflow
