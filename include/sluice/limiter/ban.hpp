#pragma once

#include <cstdint>

#include "sluice/common/clock.hpp"

/// The penalty box (docs/bans.md): a client whose limit denies it `after` times within the
/// limit's window is refused for `duration`, each repeat ban `backoff` times longer up to
/// `max`, and the ladder is forgiven (the next ban is `duration` again) after `forgive_after`
/// without a denial or a ban. Pure functions of (params, state, now), as the algorithms are;
/// the memory store keeps BanState beside each bucket, the Redis scripts (05_ban.lua) decide
/// identically on the same numbers.
namespace sluice {

/// A rule's `ban:` block, ready for the stores. after == 0: no ban.
struct BanParams {
  std::int64_t after = 0;             ///< denials within `within_us` that start a ban, >= 1
  Micros duration_us = 0;             ///< the first ban's length, > 0
  std::int64_t backoff_milli = 1000;  ///< factor between two bans of a ladder, x1000 (1000..10000)
  Micros max_us = 0;                  ///< the longest ban, >= duration_us
  Micros forgive_us = 0;              ///< quiet time after which the ladder starts over, > 0
  Micros within_us = 0;               ///< the window the denials are counted in (the rule's)

  bool enabled() const { return after > 0; }
  bool operator==(const BanParams&) const = default;
};

/// One bucket's ban state; a default-constructed one is a client never denied. Times are
/// microseconds on the store's clock.
struct BanState {
  std::int64_t strikes = 0;  ///< denials counted since strikes_since
  Micros strikes_since = 0;  ///< start of the window the strikes are counted in
  std::int64_t step = 0;     ///< bans in the current ladder (the last one's number)
  Micros until = 0;          ///< end of the current (or last) ban
  Micros last_denial = 0;    ///< the last denial recorded
  Micros last_length = 0;    ///< the length of the last ban of the ladder
};

/// True while `state` refuses the client.
inline bool banActive(const BanState& state, Micros now) { return now < state.until; }

/// What a denial does to a bucket's ban state.
struct BanStrike {
  BanState next;
  bool started = false;  ///< this denial starts a ban (next.until is its end, next.step its step)
  /// How long `next` must be kept before it is a fresh state again (0: it already is).
  Micros ttl_us = 0;
};

/// The length of ban `step` (1-based) of a ladder whose previous ban lasted `previous_us`:
/// duration for the first; previous x backoff (rounded down to a microsecond) after, at most
/// max. Exact in the Redis scripts' doubles for every span a rule may give.
Micros banLength(const BanParams& params, std::int64_t step, Micros previous_us);

/// Records one denial at `now` (the client not banned at `now`): forgives the ladder after
/// a quiet `forgive_us`, counts the strike in the current window, and starts ban
/// `step + 1` on the `after`-th.
BanStrike recordDenial(const BanParams& params, const BanState& state, Micros now);

/// How long `state` must be kept at `now` before it is indistinguishable from a fresh one.
Micros banTtl(const BanParams& params, const BanState& state, Micros now);

}  // namespace sluice
