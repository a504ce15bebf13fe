// Reading a message that arrives as several byte pieces (gRPC's slices) without joining them.
#ifndef PSFLOW_CORE_BYTE_SOURCE_H_
#define PSFLOW_CORE_BYTE_SOURCE_H_

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace psflow {

// A read cursor over a sequence of byte pieces (the slices of a received message).
class ByteSource {
 public:
  ByteSource() = default;
  explicit ByteSource(std::vector<std::span<const std::byte>> pieces);

  // Starts over with no pieces, keeping the storage (a reply decoded every step allocates
  // nothing): Add the pieces, then read.
  void Clear();
  void Add(std::span<const std::byte> piece);

  size_t remaining() const { return remaining_; }
  // Copies the next n bytes into out. False (and nothing consumed) when fewer remain.
  bool Read(void* out, size_t n);
  // The bytes from the cursor to the end of the current piece (empty when none remain): what the
  // next ForEachRun would pass first.
  std::span<const std::byte> Peek() const {
    return remaining_ == 0 ? std::span<const std::byte>() : pieces_[index_].subspan(offset_);
  }
  // Consumes the next n bytes (n <= Peek().size()), as a ForEachRun that looked at them would.
  void Skip(size_t n) { Advance(n); }
  // Calls fn(span) on successive runs making up the next n bytes, without copying: runs end
  // where pieces end, so they have any length and alignment. False when fewer than n remain.
  template <class Fn>
  bool ForEachRun(size_t n, Fn fn) {
    if (n > remaining_) return false;
    while (n > 0) {
      const auto& piece = pieces_[index_];
      const size_t take = std::min(n, piece.size() - offset_);
      fn(piece.subspan(offset_, take));
      Advance(take);
      n -= take;
    }
    return true;
  }

 private:
  void Advance(size_t n);
  std::vector<std::span<const std::byte>> pieces_;
  size_t index_ = 0;   // current piece
  size_t offset_ = 0;  // into the current piece
  size_t remaining_ = 0;
};

}  // namespace psflow

#endif  // PSFLOW_CORE_BYTE_SOURCE_H_
