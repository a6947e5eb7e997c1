#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/store/store.hpp"

namespace sluice::memory_detail {

/// Where one reservation stands on one bucket.
enum class HoldState : std::uint8_t { kHeld, kCommitted, kReleased, kExpired };

/// One reservation's hold on one bucket, or (once settled or expired) its memory, kept until
/// `forget_at` so that a second commit charges nothing.
struct Hold {
  std::uint64_t nonce = 0;
  std::int64_t amount = 0;
  Micros expires_at = 0;
  Micros forget_at = 0;
  HoldState state = HoldState::kHeld;
};

/// The holds of one bucket.
struct HoldSet {
  std::vector<Hold> holds;
};

/// What the live holds of a bucket add up to at an instant.
struct HeldAmount {
  std::int64_t held = 0;      ///< the sum of the live holds
  Micros first_expiry = 0;    ///< the earliest live hold's expiry (0: none)
  std::uint32_t expired = 0;  ///< holds found expired unsettled by this refresh
};

/// Marks the holds past their expiry as expired (counted in `expired`), forgets those past
/// `forget_at`, and sums the live ones.
HeldAmount refreshHolds(HoldSet& set, Micros now);

/// The hold of `nonce` in `set`, or null.
Hold* findHold(HoldSet& set, std::uint64_t nonce);

/// Live holds in `set` (refreshed).
std::size_t liveHolds(const HoldSet& set);

/// Adds a live hold, forgetting the settled holds that are remembered longest ago when the
/// set would pass `2 * max(max_holds, 1)` entries.
void addHold(HoldSet& set, const Hold& hold, std::int64_t max_holds);

/// 16 hex digits -> the nonce; false when the text is not that.
bool parseNonce(std::string_view text, std::uint64_t& nonce);

/// The holds of one memory-store shard, keyed by bucket store key (guarded by the shard's
/// mutex). Empty in a process that never reserved: a decision then costs one branch.
class HoldTable {
 public:
  bool empty() const { return sets_.empty(); }
  /// The set of `key`, or null.
  HoldSet* find(std::string_view key);
  /// The set of `key`, created when absent.
  HoldSet& obtain(std::string_view key);
  /// Drops the set of `key` when it holds nothing any more.
  void dropIfEmpty(std::string_view key);
  /// Removes the sets whose key starts with one of `prefixes`; returns the live holds removed.
  std::size_t erasePrefixes(const std::vector<std::string>& prefixes);
  /// At most once a second: forgets what is past its memory in every set and drops empty
  /// sets. Holds past their expiry that no request saw are counted in the return value.
  std::size_t sweep(Micros now);

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view key) const {
      return std::hash<std::string_view>{}(key);
    }
  };
  std::unordered_map<std::string, HoldSet, Hash, std::equal_to<>> sets_;
  Micros next_sweep_ = 0;
};

/// Applies a commit or a release of `nonce` to the holds of a request's buckets (`sets`,
/// one per limit, null where a bucket has none) at `now`; `id_expiry` is the expiry the id
/// carries, `keep_us` how long a settled hold is remembered. Returns the status; for
/// kCommitted, `amount` is the amount the hold was made for. A commit that finds no live
/// hold but an expired one (or none, past `id_expiry`) is kLate: the caller charges it as
/// a report, and the buckets remember it as committed (`obtain` makes their sets).
struct SettleInput {
  HoldOp op = HoldOp::kNone;
  std::uint64_t nonce = 0;
  Micros id_expiry = 0;
  Micros keep_us = 0;
  Micros now = 0;
};
HoldStatus settleHolds(const SettleInput& input, std::vector<HoldSet*>& sets, std::int64_t& amount);

}  // namespace sluice::memory_detail
