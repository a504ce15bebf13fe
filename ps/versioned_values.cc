#include "ps/versioned_values.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <utility>

#include "absl/base/thread_annotations.h"

namespace psflow {

struct VersionedValues::Buffer {
  explicit Buffer(int64_t n) : data(new float[static_cast<size_t>(n)]), size(n) {}
  std::unique_ptr<float[]> data;
  int64_t size;
  // One for being a block's current version, one per pin; 0 while idle.
  std::atomic<int32_t> refs{0};
  // Set while in use, so the last Unpin can return the buffer even after its VersionedValues is
  // gone; cleared while idle (an idle buffer keeping its pool alive would be a cycle).
  std::shared_ptr<Pool> pool;
};

// Idle buffers of one partition, by size: full blocks and the shorter last one.
class VersionedValues::Pool {
 public:
  Pool(int64_t block_elements, size_t max_full, size_t max_tail)
      : block_elements_(block_elements), max_full_(max_full), max_tail_(max_tail) {
    // Put never allocates.
    full_.reserve(max_full_);
    tail_.reserve(max_tail_);
  }

  // A buffer of n elements (contents undefined), with no references.
  std::unique_ptr<Buffer> Take(int64_t n) {
    {
      std::lock_guard lock(mu_);
      auto& idle = n == block_elements_ ? full_ : tail_;
      if (!idle.empty()) {
        // One partition's blocks have two sizes at most: full ones and its last one.
        std::unique_ptr<Buffer> b = std::move(idle.back());
        idle.pop_back();
        return b;
      }
    }
    return std::make_unique<Buffer>(n);
  }

  void Put(std::unique_ptr<Buffer> b) {
    std::lock_guard lock(mu_);
    auto& idle = b->size == block_elements_ ? full_ : tail_;
    if (idle.size() < (b->size == block_elements_ ? max_full_ : max_tail_)) {
      idle.push_back(std::move(b));
    }
  }

 private:
  const int64_t block_elements_;
  const size_t max_full_;
  const size_t max_tail_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Buffer>> full_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Buffer>> tail_ ABSL_GUARDED_BY(mu_);
};

VersionedValues::VersionedValues(int64_t elements, int64_t block_elements)
    : elements_(elements), block_elements_(std::max<int64_t>(1, block_elements)) {
  const auto full = static_cast<size_t>(elements_ / block_elements_);
  const size_t tail = elements_ % block_elements_ == 0 ? 0 : 1;
  pool_ = std::make_shared<Pool>(block_elements_, full, tail);
  blocks_.reserve(full + tail);
  for (size_t b = 0; b < full + tail; ++b) {
    auto buffer = std::make_unique<Buffer>(BlockSize(b));
    std::fill_n(buffer->data.get(), buffer->size, 0.0f);
    buffer->refs.store(1, std::memory_order_relaxed);
    buffer->pool = pool_;
    blocks_.push_back(buffer.release());
  }
}

VersionedValues::~VersionedValues() {
  for (Buffer* b : blocks_) Unpin(b);
}

int64_t VersionedValues::BlockSize(size_t block) const {
  return std::min(block_elements_, elements_ - static_cast<int64_t>(block) * block_elements_);
}

template <class Fn>
void VersionedValues::ForEachBlock(int64_t offset, int64_t count, Fn fn) const {
  const int64_t end = offset + count;
  for (int64_t at = offset; at < end;) {
    const auto block = static_cast<size_t>(at / block_elements_);
    const int64_t base = static_cast<int64_t>(block) * block_elements_;
    const int64_t hi = std::min(end, base + block_elements_) - base;
    fn(block, at - base, hi);
    at = base + hi;
  }
}

void VersionedValues::Unpin(void* handle) {
  auto* b = static_cast<Buffer*>(handle);
  // acq_rel: the reader's last reads of the buffer happen before whoever sees the count drop
  // (an update then writing the block in place, or the buffer's next use).
  if (b->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  std::shared_ptr<Pool> pool = std::move(b->pool);
  pool->Put(std::unique_ptr<Buffer>(b));
}

void VersionedValues::Read(int64_t offset, std::span<float> out) const {
  float* to = out.data();
  ForEachRun(offset, static_cast<int64_t>(out.size()), [&](std::span<const float> run) {
    std::memcpy(to, run.data(), run.size_bytes());
    to += run.size();
  });
}

void VersionedValues::ForEachRun(int64_t offset, int64_t count,
                                 absl::FunctionRef<void(std::span<const float>)> fn) const {
  ForEachBlock(offset, count, [&](size_t block, int64_t lo, int64_t hi) {
    fn({blocks_[block]->data.get() + lo, static_cast<size_t>(hi - lo)});
  });
}

void VersionedValues::PinRuns(int64_t offset, int64_t count,
                              absl::FunctionRef<void(const Pin&)> fn) const {
  ForEachBlock(offset, count, [&](size_t block, int64_t lo, int64_t hi) {
    Buffer* b = blocks_[block];
    // Relaxed: pins are only added under the caller's lock, which orders them before any update.
    b->refs.fetch_add(1, std::memory_order_relaxed);
    fn({{b->data.get() + lo, static_cast<size_t>(hi - lo)}, b});
  });
}

VersionedValues::Buffer* VersionedValues::MakeWritable(size_t block, int64_t lo, int64_t hi) {
  Buffer* old = blocks_[block];
  // Acquire: pairs with Unpin's release, so the last reader is done before the block is written
  // in place. Pins are only added under the caller's lock, so none appears meanwhile.
  if (old->refs.load(std::memory_order_acquire) == 1) return nullptr;
  std::unique_ptr<Buffer> fresh = pool_->Take(old->size);
  fresh->refs.store(1, std::memory_order_relaxed);
  fresh->pool = pool_;
  std::memcpy(fresh->data.get(), old->data.get(), static_cast<size_t>(lo) * 4);
  std::memcpy(fresh->data.get() + hi, old->data.get() + hi,
              static_cast<size_t>(old->size - hi) * 4);
  blocks_[block] = fresh.release();
  return old;
}

void VersionedValues::Write(int64_t offset, std::span<const float> values) {
  const float* from = values.data();
  ForEachBlock(
      offset, static_cast<int64_t>(values.size()), [&](size_t block, int64_t lo, int64_t hi) {
        Buffer* old = MakeWritable(block, lo, hi);
        std::memcpy(blocks_[block]->data.get() + lo, from, static_cast<size_t>(hi - lo) * 4);
        from += hi - lo;
        if (old != nullptr) Unpin(old);
      });
}

void VersionedValues::Update(int64_t offset, int64_t count,
                             absl::FunctionRef<void(std::span<float> run, int64_t at)> fn) {
  ForEachBlock(offset, count, [&](size_t block, int64_t lo, int64_t hi) {
    Buffer* old = MakeWritable(block, lo, hi);
    float* data = blocks_[block]->data.get();
    const int64_t base = static_cast<int64_t>(block) * block_elements_;
    for (int64_t at = lo; at < hi; at += kRunElements) {
      const auto n = static_cast<size_t>(std::min(kRunElements, hi - at));
      // Copy-on-write run by run: the update reads the copy while it is still in L1, so the
      // old version is read once, as an update in place would.
      if (old != nullptr) std::memcpy(data + at, old->data.get() + at, n * 4);
      fn({data + at, n}, base + at);
    }
    if (old != nullptr) Unpin(old);
  });
}

}  // namespace psflow
