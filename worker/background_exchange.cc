#include "worker/background_exchange.h"

#include <chrono>
#include <utility>

namespace psflow {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

BackgroundExchange::BackgroundExchange(ParameterSync& sync, const nn::ParameterSet& layout,
                                       HandOver hand_over)
    : sync_(sync),
      buffers_(nn::ParameterSet::SameLayoutAs(layout)),
      // Buffers swapped between two memories would leave the trainer's set on the heap every
      // other step (a GPU's copies to pageable memory wait for the device): copy instead.
      hand_over_(buffers_->host_memory() == layout.host_memory() ? hand_over : HandOver::kCopy),
      thread_([this] { Run(); }) {}

BackgroundExchange::~BackgroundExchange() {
  {
    std::unique_lock lock(mu_);
    // An exchange in flight uses sync_ and buffers_: let it end first.
    cv_.wait(lock, [this] { return !started_ || done_; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BackgroundExchange::Start(nn::ParameterSet& params, int64_t examples) {
  if (hand_over_ == HandOver::kSwap) {
    params.SwapGradients(*buffers_);
  } else {
    buffers_->CopyGradientsFrom(params);
  }
  buffers_->CopyRowsToPullFrom(params);
  {
    std::lock_guard lock(mu_);
    started_ = true;
    done_ = false;
    examples_ = examples;
  }
  cv_.notify_all();
  in_flight_ = true;
}

absl::StatusOr<Exchange> BackgroundExchange::Finish(nn::ParameterSet& params) {
  absl::Status status;
  Exchange result;
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return done_; });
    started_ = false;
    status = std::exchange(status_, absl::OkStatus());
    result = result_;
  }
  in_flight_ = false;
  if (!status.ok()) return status;
  if (hand_over_ == HandOver::kSwap) {
    params.SwapValues(*buffers_);
  } else {
    params.CopyValuesFrom(*buffers_);
  }
  return result;
}

void BackgroundExchange::Run() {
  for (;;) {
    int64_t examples = 0;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stop_ || (started_ && !done_); });
      if (stop_) return;
      examples = examples_;
    }
    Exchange result;
    absl::Status status;
    const auto start = Clock::now();
    absl::StatusOr<SyncResult> pushed = sync_.Push(*buffers_, examples);
    const auto pushed_at = Clock::now();
    result.push_seconds = Seconds(pushed_at - start);
    if (!pushed.ok()) {
      status = pushed.status();
    } else {
      result.pushed = *pushed;
      absl::StatusOr<SyncResult> pulled = sync_.Pull(*buffers_);
      result.pull_seconds = Seconds(Clock::now() - pushed_at);
      if (pulled.ok()) {
        result.pulled = *pulled;
      } else {
        status = pulled.status();
      }
    }
    {
      std::lock_guard lock(mu_);
      status_ = std::move(status);
      result_ = result;
      done_ = true;
    }
    cv_.notify_all();
  }
}

}  // namespace psflow
