#include "core/byte_source.h"

#include <cstring>
#include <utility>

namespace psflow {

ByteSource::ByteSource(std::vector<std::span<const std::byte>> pieces)
    : pieces_(std::move(pieces)) {
  for (const auto& p : pieces_) remaining_ += p.size();
  // Skip leading empty pieces so pieces_[index_] always has bytes left while remaining_ > 0.
  while (index_ < pieces_.size() && pieces_[index_].empty()) ++index_;
}

void ByteSource::Clear() {
  pieces_.clear();
  index_ = offset_ = remaining_ = 0;
}

void ByteSource::Add(std::span<const std::byte> piece) {
  pieces_.push_back(piece);
  remaining_ += piece.size();
  // As the constructor: the cursor never rests on an empty piece (nothing is read yet).
  while (index_ < pieces_.size() && offset_ == 0 && pieces_[index_].empty()) ++index_;
}

void ByteSource::Advance(size_t n) {
  offset_ += n;
  remaining_ -= n;
  while (index_ < pieces_.size() && offset_ == pieces_[index_].size()) {
    ++index_;
    offset_ = 0;
  }
}

bool ByteSource::Read(void* out, size_t n) {
  auto* dst = static_cast<std::byte*>(out);
  return ForEachRun(n, [&dst](std::span<const std::byte> run) {
    std::memcpy(dst, run.data(), run.size());
    dst += run.size();
  });
}

}  // namespace psflow
