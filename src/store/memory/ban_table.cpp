#include "store/memory/ban_table.hpp"

#include <algorithm>

namespace sluice::memory_detail {

const BanState* BanTable::find(const HashedKey& key, Micros now) const {
  if (entries_.empty()) {
    return nullptr;
  }
  const auto it = entries_.find(key);
  if (it == entries_.end() || it->second.expires_at <= now) {
    return nullptr;
  }
  return &it->second.state;
}

int BanTable::store(const HashedKey& key, const BanState& state, Micros expires_at, Micros now) {
  auto it = entries_.find(key);
  if (expires_at <= now) {
    if (it != entries_.end()) {
      entries_.erase(it);
      return -1;
    }
    return 0;
  }
  earliest_ = std::min(earliest_, expires_at);
  pass_earliest_ = std::min(pass_earliest_, expires_at);
  if (it != entries_.end()) {
    it->second = Entry{state, expires_at};
    return 0;
  }
  entries_.emplace(std::string(key.key), Entry{state, expires_at});
  return 1;
}

std::size_t BanTable::erasePrefixes(const std::vector<std::string>& prefixes) {
  return std::erase_if(entries_, [&](const auto& kv) {
    return std::any_of(prefixes.begin(), prefixes.end(),
                       [&](const std::string& p) { return kv.first.compare(0, p.size(), p) == 0; });
  });
}

std::size_t BanTable::sweep(Micros now, std::size_t budget) {
  if (entries_.empty() || now < earliest_) {
    return 0;
  }
  const std::size_t buckets = entries_.bucket_count();
  if (buckets != pass_buckets_) {
    // A rehash moved entries between buckets: the pass starts over (earliest_ still holds).
    pass_buckets_ = buckets;
    sweep_bucket_ = 0;
    pass_earliest_ = kNever;
  }
  std::size_t removed = 0;
  for (std::size_t n = 0; n < budget && n < buckets; ++n) {
    for (auto it = entries_.begin(sweep_bucket_); it != entries_.end(sweep_bucket_);) {
      if (it->second.expires_at <= now) {
        // Erasing from a bucket invalidates only that element's local iterator.
        const std::string key = it->first;
        ++it;
        entries_.erase(key);
        ++removed;
      } else {
        pass_earliest_ = std::min(pass_earliest_, it->second.expires_at);
        ++it;
      }
    }
    if (++sweep_bucket_ == buckets) {
      // A whole pass: nothing left expires before the earliest expiry it saw.
      sweep_bucket_ = 0;
      earliest_ = pass_earliest_;
      pass_earliest_ = kNever;
    }
  }
  return removed;
}

Outcome bannedOutcome(Micros until, Micros now) {
  Outcome o;
  o.allowed = false;
  o.remaining = 0;
  o.retry_after_us = until - now;
  o.reset_after_us = until - now;
  o.banned = true;
  return o;
}

}  // namespace sluice::memory_detail
