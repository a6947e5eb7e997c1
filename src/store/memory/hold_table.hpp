#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/store/store.hpp"
#include "store/memory/hashed_key.hpp"

namespace sluice::memory_detail {

/// Where one reservation stands on one bucket.
enum class HoldState : std::uint8_t { kHeld, kCommitted, kReleased, kExpired };

/// A reservation's nonce (HoldCall::nonce, 16 characters) as the two words of its text: the
/// memory store tells holds apart by the exact text, as the Redis script does, without
/// converting the digits.
struct HoldNonce {
  std::uint64_t first = 0;
  std::uint64_t second = 0;
  friend bool operator==(const HoldNonce&, const HoldNonce&) = default;
};

/// `text` as a HoldNonce; false unless it has the 16 characters of a nonce.
inline bool holdNonce(std::string_view text, HoldNonce& nonce) {
  if (text.size() != 16) {
    return false;
  }
  std::memcpy(&nonce.first, text.data(), 8);
  std::memcpy(&nonce.second, text.data() + 8, 8);
  return true;
}

/// One reservation's hold on one bucket, or (once settled or expired) its memory, kept until
/// `forget_at` so that a second commit charges nothing.
struct Hold {
  HoldNonce nonce{};
  std::int64_t amount = 0;
  Micros expires_at = 0;
  Micros forget_at = 0;
  /// The order the bucket first saw the nonce in (80_holds.lua keeps one array in that
  /// order): among memories forgotten at the same instant, the older goes first.
  std::uint64_t seq = 0;
  HoldState state = HoldState::kHeld;
};

/// What the live holds of a bucket add up to at an instant.
struct HeldAmount {
  std::int64_t held = 0;      ///< the sum of the live holds
  Micros first_expiry = 0;    ///< the earliest live hold's expiry (0: none)
  std::uint32_t expired = 0;  ///< holds found expired unsettled by this refresh
};

/// The holds of one bucket: the live ones (few: at most --max-reservation-holds) apart from
/// the memories of settled and expired ones (up to twice that many), which are only read to
/// tell a second or late commit apart and to be forgotten in order. So a reserve, a commit
/// of a live hold and a decision cost the live holds, not the memories: the sums are kept,
/// and the memories form a heap on (forget_at, seq).
class HoldSet {
 public:
  bool empty() const { return live_.empty() && memories_.empty(); }
  /// Live holds plus memories.
  std::size_t size() const { return live_.size() + memories_.size(); }
  std::size_t liveCount() const { return live_.size(); }
  /// The sum of the live holds and the earliest live expiry (0: none) as the last refresh(),
  /// add() or settle() left them: a second refresh() at the same instant changes nothing.
  std::int64_t held() const { return held_; }
  Micros firstExpiry() const { return first_expiry_; }
  /// Forgets the memories past `forget_at` (what refresh() forgets of them), cheaply when
  /// none is.
  void forgetMemoriesDue(Micros now) {
    while (!memories_.empty() && memories_.front().forget_at <= now) {
      popMemory();
    }
  }

  /// Marks the holds past their expiry as expired (counted in `expired`), forgets those past
  /// `forget_at`, and sums the live ones. Inline where nothing is due (the usual step).
  HeldAmount refresh(Micros now) {
    if ((first_expiry_ != 0 && first_expiry_ <= now) ||
        (!memories_.empty() && memories_.front().forget_at <= now)) {
      return refreshDue(now);
    }
    return HeldAmount{held_, first_expiry_, 0};
  }

  /// The live hold of `nonce`, or null.
  Hold* findLive(const HoldNonce& nonce);
  /// The memory of `nonce` (settled or expired), or null. Walks every memory: for the rare
  /// steps only (a second, late or unknown settlement).
  Hold* findMemory(const HoldNonce& nonce);

  /// Adds a live hold of a nonce the set does not carry, forgetting the memories that are
  /// remembered the shortest time ahead when the set would pass `2 * max(max_holds, 1)`
  /// entries.
  void add(const HoldNonce& nonce, std::int64_t amount, Micros expires_at, Micros forget_at,
           std::int64_t max_holds);

  /// Settles the hold of `nonce` as `state` (committed or released): a live hold becomes a
  /// memory kept at least until `forget_at`, a memory takes the state, and a nonce the set
  /// does not carry is remembered (a late commit is remembered too).
  void settle(const HoldNonce& nonce, HoldState state, Micros id_expiry, Micros forget_at);

  /// Forgets what is past its memory; returns the live holds forgotten (their expiry passed
  /// with no request reading them).
  std::size_t forgetPast(Micros now);

 private:
  HeldAmount refreshDue(Micros now);
  void pushMemory(const Hold& hold);
  void popMemory();
  void sumLive();

  std::vector<Hold> live_;
  std::vector<Hold> memories_;  ///< a min-heap on (forget_at, seq)
  std::uint64_t next_seq_ = 0;
  std::int64_t held_ = 0;    ///< the sum of live_'s amounts
  Micros first_expiry_ = 0;  ///< the earliest of live_'s expiries (0: none)
};

/// The holds of one memory-store shard, keyed by bucket store key (guarded by the shard's
/// mutex). Empty in a process that never reserved: a decision then costs one branch.
class HoldTable {
 public:
  bool empty() const { return sets_.empty(); }
  /// The set of `key`, or null.
  HoldSet* find(const HashedKey& key);
  /// The set of `key`, created when absent.
  HoldSet& obtain(const HashedKey& key);
  /// Drops the set of `key` when it holds nothing any more.
  void dropIfEmpty(const HashedKey& key);
  /// Removes the sets whose key starts with one of `prefixes`; returns the live holds removed.
  std::size_t erasePrefixes(const std::vector<std::string>& prefixes);
  /// At most once a second: forgets what is past its memory in every set and drops empty
  /// sets. Holds past their expiry that no request saw are counted in the return value.
  std::size_t sweep(Micros now);

 private:
  std::unordered_map<std::string, HoldSet, HashedKeyHash, HashedKeyEqual> sets_;
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
  HoldNonce nonce{};
  Micros id_expiry = 0;
  Micros keep_us = 0;
  Micros now = 0;
};
HoldStatus settleHolds(const SettleInput& input, std::span<HoldSet* const> sets,
                       std::int64_t& amount);

}  // namespace sluice::memory_detail
