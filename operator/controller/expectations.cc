#include "operator/controller/expectations.h"

#include <algorithm>
#include <utility>

namespace psflow::controller {

Expectations::Expectations(absl::Duration ttl, std::function<absl::Time()> now)
    : ttl_(ttl), now_(std::move(now)) {}

void Expectations::Expect(const std::string& key, int creations, int deletions) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entries_[key];
  const absl::Time now = now_();
  // Counts left by a lost event are dropped once they expired, as client-go's SetExpectations.
  if (now - e.set_at > ttl_) e.creations = e.deletions = 0;
  e.creations += creations;
  e.deletions += deletions;
  e.set_at = now;
}

void Expectations::CreationObserved(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end()) it->second.creations = std::max(0, it->second.creations - 1);
}

void Expectations::DeletionObserved(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  DeletionObservedLocked(key);
}

void Expectations::DeletionObservedLocked(const std::string& key) {
  auto it = entries_.find(key);
  if (it != entries_.end()) it->second.deletions = std::max(0, it->second.deletions - 1);
}

void Expectations::PodTerminating(const std::string& key, const std::string& uid) {
  std::lock_guard<std::mutex> lock(mu_);
  if (terminating_.emplace(uid, key).second) DeletionObservedLocked(key);
}

void Expectations::PodGone(const std::string& key, const std::string& uid) {
  std::lock_guard<std::mutex> lock(mu_);
  if (terminating_.erase(uid) == 0) DeletionObservedLocked(key);
}

bool Expectations::Satisfied(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return true;
  const Entry& e = it->second;
  return (e.creations <= 0 && e.deletions <= 0) || now_() - e.set_at > ttl_;
}

void Expectations::Forget(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.erase(key);
  std::erase_if(terminating_, [&](const auto& pod) { return pod.second == key; });
}

}  // namespace psflow::controller
