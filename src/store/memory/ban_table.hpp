#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/limiter/ban.hpp"
#include "sluice/limiter/limiter.hpp"
#include "store/memory/hashed_key.hpp"

namespace sluice::memory_detail {

/// The penalty box's state of one memory-store shard (docs/bans.md), keyed by the bucket's
/// store key, guarded by the shard's mutex. Only clients denied by a limit with `ban:` have
/// an entry, kept until it is a fresh state again (banTtl). Empty in a process without
/// bans: a decision then costs one branch.
class BanTable {
 public:
  bool empty() const { return entries_.empty(); }
  std::size_t size() const { return entries_.size(); }
  /// The state of `key` at `now`; null when it has none (or it outlived its ttl). The key's
  /// hash is the bucket's (BucketTable::hashKey), computed once per request.
  const BanState* find(const HashedKey& key, Micros now) const;
  /// Stores `state` for `key` until `expires_at` (erases it when expires_at <= now). Returns
  /// +1 for a new entry, -1 for an erased one, 0 otherwise.
  int store(const HashedKey& key, const BanState& state, Micros expires_at, Micros now);
  /// Removes the entries whose key starts with one of `prefixes` (the admin reset); returns
  /// how many were removed.
  std::size_t erasePrefixes(const std::vector<std::string>& prefixes);
  /// Drops up to `budget` buckets' entries past their ttl, resuming where the last sweep
  /// stopped; returns how many were dropped. Costs one comparison while no entry can have
  /// expired (before the earliest expiry a whole pass saw): a client banned for an hour
  /// adds no sweeping to the answers of its flood.
  std::size_t sweep(Micros now, std::size_t budget);

 private:
  struct Entry {
    BanState state;
    Micros expires_at = 0;
  };
  static constexpr Micros kNever = INT64_MAX;
  std::unordered_map<std::string, Entry, HashedKeyHash, HashedKeyEqual> entries_;
  std::size_t sweep_bucket_ = 0;
  /// The bucket count the current pass walks (a rehash starts a new pass).
  std::size_t pass_buckets_ = 0;
  /// No entry expires before this: the earliest expiry of the last whole pass and of every
  /// store since (0 until a first pass ends).
  Micros earliest_ = 0;
  /// The earliest expiry seen by the current pass and the stores since it began.
  Micros pass_earliest_ = kNever;
};

/// The answer of a limit whose client is banned until `until` (> now).
Outcome bannedOutcome(Micros until, Micros now);

}  // namespace sluice::memory_detail
