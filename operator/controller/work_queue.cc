#include "operator/controller/work_queue.h"

#include <algorithm>
#include <cmath>

namespace psflow::controller {

WorkQueue::WorkQueue(Options options) : options_(std::move(options)) {}

WorkQueue::TimePoint WorkQueue::Now() const {
  return options_.now ? options_.now() : std::chrono::steady_clock::now();
}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  AddLocked(key);
}

void WorkQueue::AddLocked(const std::string& key) {
  if (shutting_down_) return;
  if (!dirty_.insert(key).second) return;  // already waiting to be handed out
  // A key being processed stays out of the queue: Done puts it back, so that no two workers
  // ever hold it at once.
  if (processing_.count(key) != 0) return;
  queue_.push_back(key);
  cv_.notify_one();
}

void WorkQueue::AddAfter(const std::string& key, std::chrono::milliseconds delay) {
  if (delay <= std::chrono::milliseconds::zero()) {
    Add(key);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_) return;
  const TimePoint when = Now() + delay;
  auto [it, inserted] = delayed_.emplace(key, when);
  if (!inserted) {
    if (it->second <= when) return;  // the earlier time wins
    delayed_order_.erase({it->second, key});
    it->second = when;
  }
  delayed_order_.insert({when, key});
  // A blocked Get may be sleeping until a later time than this one.
  cv_.notify_one();
}

void WorkQueue::AddRateLimited(const std::string& key) {
  std::chrono::milliseconds delay;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int& failures = failures_[key];
    // In double so that many failures cannot overflow before the cap applies.
    const double ms = static_cast<double>(options_.base_delay.count()) *
                      std::ldexp(1.0, std::min(failures, 1000));
    delay = ms >= static_cast<double>(options_.max_delay.count())
                ? options_.max_delay
                : std::chrono::milliseconds(static_cast<int64_t>(ms));
    ++failures;
  }
  AddAfter(key, delay);
}

void WorkQueue::Forget(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.erase(key);
}

int WorkQueue::NumRequeues(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

void WorkQueue::PromoteDueLocked(TimePoint now) {
  while (!delayed_order_.empty() && delayed_order_.begin()->first <= now) {
    std::string key = delayed_order_.begin()->second;
    delayed_order_.erase(delayed_order_.begin());
    delayed_.erase(key);
    AddLocked(key);
  }
}

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (!shutting_down_) PromoteDueLocked(Now());
    if (!queue_.empty()) {
      std::string key = std::move(queue_.front());
      queue_.pop_front();
      dirty_.erase(key);
      processing_.insert(key);
      // Promotion may have readied several keys while only this caller was awake.
      if (!queue_.empty()) cv_.notify_one();
      return key;
    }
    if (shutting_down_) return std::nullopt;
    if (delayed_order_.empty()) {
      cv_.wait(lock);
    } else {
      cv_.wait_for(lock, delayed_order_.begin()->first - Now());
    }
  }
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (processing_.erase(key) == 0) return;
  // Added while it was being processed: hand it out again now that its worker is finished.
  if (dirty_.count(key) != 0) {
    queue_.push_back(key);
    cv_.notify_one();
  }
}

void WorkQueue::ShutDown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutting_down_ = true;
  delayed_.clear();
  delayed_order_.clear();
  cv_.notify_all();
}

bool WorkQueue::ShuttingDown() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutting_down_;
}

size_t WorkQueue::Depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  // Delayed keys whose time has come count as ready when Add would queue them: not already
  // waiting, not being processed.
  size_t due = 0;
  const TimePoint now = Now();
  for (const auto& [when, key] : delayed_order_) {
    if (when > now) break;
    if (dirty_.count(key) == 0 && processing_.count(key) == 0) ++due;
  }
  return queue_.size() + due;
}

}  // namespace psflow::controller
