#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/limiter/ban.hpp"
#include "sluice/limiter/limiter.hpp"

namespace sluice::memory_detail {

/// The penalty box's state of one memory-store shard (docs/bans.md), keyed by the bucket's
/// store key, guarded by the shard's mutex. Only clients denied by a limit with `ban:` have
/// an entry, kept until it is a fresh state again (banTtl). Empty in a process without
/// bans: a decision then costs one branch.
class BanTable {
 public:
  bool empty() const { return entries_.empty(); }
  std::size_t size() const { return entries_.size(); }
  /// The state of `key` at `now`; null when it has none (or it outlived its ttl).
  const BanState* find(std::string_view key, Micros now) const;
  /// Stores `state` for `key` until `expires_at` (erases it when expires_at <= now). Returns
  /// +1 for a new entry, -1 for an erased one, 0 otherwise.
  int store(std::string_view key, const BanState& state, Micros expires_at, Micros now);
  /// Removes the entries whose key starts with one of `prefixes` (the admin reset); returns
  /// how many were removed.
  std::size_t erasePrefixes(const std::vector<std::string>& prefixes);
  /// Drops up to `budget` entries past their ttl, resuming where the last sweep stopped;
  /// returns how many were dropped.
  std::size_t sweep(Micros now, std::size_t budget);

 private:
  struct Entry {
    BanState state;
    Micros expires_at = 0;
  };
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view key) const {
      return std::hash<std::string_view>{}(key);
    }
  };
  std::unordered_map<std::string, Entry, Hash, std::equal_to<>> entries_;
  std::size_t sweep_bucket_ = 0;
};

/// The answer of a limit whose client is banned until `until` (> now).
Outcome bannedOutcome(Micros until, Micros now);

}  // namespace sluice::memory_detail
