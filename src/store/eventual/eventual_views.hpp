#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <vector>

#include "sluice/limiter/eventual.hpp"
#include "sluice/limiter/limiter.hpp"

/// Helpers of the eventual engine's key views, shared by its files (src/store/eventual/).
namespace sluice::eventual_detail {

/// The hits of a view not yet confirmed by Redis.
inline std::int64_t unsentOf(const eventual::View& view) {
  return view.cur.unsent() + view.prev.unsent();
}

/// True for the algorithms counted per window (a token bucket is one "window").
inline bool isWindowed(const LimitParams& params) {
  return params.algorithm != Algorithm::kTokenBucket;
}

/// The views of `slots` (each with a `view` member), read-only.
template <typename SlotT>
std::vector<const eventual::View*> constViews(const std::vector<SlotT*>& slots) {
  std::vector<const eventual::View*> views;
  views.reserve(slots.size());
  for (const SlotT* slot : slots) {
    views.push_back(&slot->view);
  }
  return views;
}

/// Locks the shards of a request in ascending order (no deadlock between requests), without
/// allocating for requests of up to kInline distinct shards.
class ShardLocks {
 public:
  /// `keys`: anything with keys; `key_of(k)` its key; `shard_of(key)` its shard (a `mutex`).
  template <typename Keys, typename KeyOf, typename ShardOf>
  ShardLocks(const Keys& keys, KeyOf key_of, ShardOf shard_of) {
    for (const auto& k : keys) {
      add(&shard_of(key_of(k)).mutex);
    }
    lockAll();
  }
  ~ShardLocks() {
    for (std::mutex** m = begin(); m != end(); ++m) {
      (*m)->unlock();
    }
  }
  ShardLocks(const ShardLocks&) = delete;
  ShardLocks& operator=(const ShardLocks&) = delete;

 private:
  static constexpr std::size_t kInline = 8;
  void add(std::mutex* m) {
    if (count_ < kInline && more_.empty()) {
      inline_[count_++] = m;
      return;
    }
    if (more_.empty()) {
      more_.assign(inline_.begin(), inline_.begin() + static_cast<std::ptrdiff_t>(count_));
    }
    more_.push_back(m);
    ++count_;
  }
  /// Locks each distinct shard once, in address order (no deadlock between requests).
  void lockAll() {
    if (count_ > 1) {
      std::sort(begin(), end());
      std::mutex** last = std::unique(begin(), end());
      count_ = static_cast<std::size_t>(last - begin());
    }
    if (!more_.empty()) {
      more_.resize(count_);
    }
    for (std::mutex** m = begin(); m != end(); ++m) {
      (*m)->lock();
    }
  }
  std::mutex** begin() { return more_.empty() ? inline_.data() : more_.data(); }
  std::mutex** end() { return begin() + count_; }

  std::array<std::mutex*, kInline> inline_{};
  std::vector<std::mutex*> more_;
  std::size_t count_ = 0;
};

}  // namespace sluice::eventual_detail
