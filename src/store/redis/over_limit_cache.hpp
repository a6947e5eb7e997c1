#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/limiter/limiter.hpp"
#include "sluice/store/store.hpp"

namespace sluice::redis {

/// A Redis store's local over-limit cache (--redis-local-cache): what Redis last said about
/// keys it denied, so that the same request is denied again without a round trip until the
/// denial ends. One per store (one I/O thread); not thread-safe.
class OverLimitCache {
 public:
  /// A limit of a request, as the cache needs it.
  struct Limit {
    LimitParams params;
    std::int64_t cost = 0;
    bool never_denies = false;  ///< shadow or quota mode: its denial alone decides nothing
    /// It may take a runtime override, which another sidecar may set at any time: its
    /// denial is kept at most kOverridableFor.
    bool overridable = false;
  };
  /// How long a denial of an overridable limit is kept: a raise set through another sidecar
  /// reaches a client this cache denies within this (docs/overrides.md).
  static constexpr Micros kOverridableFor = 100 * kMicrosPerMilli;
  /// How long a ban (docs/bans.md) is answered from here before Redis is asked again: an
  /// admin reset through another sidecar lifts it here within this, and a banned client
  /// costs at most one Redis read per this interval.
  static constexpr Micros kBanRecheckEvery = kMicrosPerSecond;
  /// What the reply handler needs of a request to update the cache: its Redis keys (the
  /// client's, also for a sketch) and its limits, in the request's order.
  struct Context {
    std::vector<std::string> keys;
    std::vector<Limit> limits;
    /// Envoy's counting (Charge::kEvery): only bans are learnt (its other denials charged).
    bool bans_only = false;
  };

  explicit OverLimitCache(std::size_t max_keys) : max_keys_(max_keys) {}

  bool empty() const { return entries_.empty(); }
  void clear() { entries_.clear(); }
  /// Drops what is known of `redis_key` (a refund, report or counted denial changed it).
  void forget(const std::string& redis_key) {
    if (!entries_.empty()) {
      entries_.erase(redis_key);
    }
  }

  /// Denies from the cache when the request's only limit is known to deny this cost until
  /// later; fills `response` and returns true then. Exact for the decision and retry_after:
  /// a denied request consumes nothing (count_rejected limits never come here), and the
  /// bucket can only fill up further until then. A request with several limits always asks
  /// Redis: a denied answer reports the true state of every limit it did not charge, which
  /// only Redis knows. `prefix` is the store's key prefix (BucketKey::redisKey).
  /// `bans_only`: the request is charged even when denied (envoy's counting), so only a
  /// ban, whose refusal charges nothing in any mode, may answer it.
  bool answer(const StoreRequest& request, std::string_view prefix, const Clock& clock,
              bool bans_only, StoreResponse& response);

  /// Updates the cache from a Redis answer. A key this store just charged loses its entry:
  /// a smaller request admitted while a larger one is cached as denied pushes the larger
  /// one's retry later. (Charges by other sidecars are not seen: their local denials stay
  /// right, but the retry_after they report may be shorter than Redis would say; the first
  /// request after it asks Redis again.) `sent_at` is when the call was sent (local time).
  void remember(const Context& request, const StoreResponse& response, Micros sent_at);

 private:
  /// What Redis last said about a denied key.
  struct Entry {
    Micros denied_until = 0;  ///< local time
    Micros known_until = 0;   ///< local time: answered from here until then
    Micros reset_until = 0;   ///< local time
    std::int64_t cost = 0;    ///< the denied cost (only this cost is answered locally)
    std::int64_t remaining = 0;
    bool banned = false;  ///< a ban: any cost is refused until denied_until
    LimitParams params;   ///< a reload that changes the limit invalidates the entry
  };

  /// Every field of the limit, so that a reload changing any of them invalidates the entry.
  static bool sameParams(const LimitParams& a, const LimitParams& b);
  void evictExpired(Micros now);

  std::size_t max_keys_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace sluice::redis
