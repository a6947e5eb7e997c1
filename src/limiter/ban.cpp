#include "sluice/limiter/ban.hpp"

#include <algorithm>

namespace sluice {

Micros banLength(const BanParams& params, std::int64_t step, Micros previous_us) {
  if (step <= 1 || previous_us <= 0) {
    return std::min(params.duration_us, params.max_us);
  }
  // previous x backoff / 1000 in two parts, so that no product passes 2^53 (Lua's doubles):
  // previous <= 10 years (< 2^49 us) / 1000 x backoff (<= 10 x 1000) stays below 2^53.
  const Micros grown = (previous_us / 1000) * params.backoff_milli +
                       (previous_us % 1000) * params.backoff_milli / 1000;
  return std::min(std::max(grown, previous_us), params.max_us);
}

BanStrike recordDenial(const BanParams& params, const BanState& state, Micros now) {
  BanStrike out;
  BanState& s = out.next;
  s = state;
  const Micros quiet_since = std::max(s.until, s.last_denial);
  if (s.step > 0 && now - quiet_since >= params.forgive_us) {
    s.step = 0;
    s.last_length = 0;
  }
  if (s.strikes == 0 || now >= s.strikes_since + params.within_us) {
    s.strikes = 0;
    s.strikes_since = now;
  }
  s.strikes += 1;
  s.last_denial = now;
  if (s.strikes >= params.after) {
    s.step += 1;
    s.last_length = banLength(params, s.step, s.last_length);
    s.until = now + s.last_length;
    s.strikes = 0;
    s.strikes_since = now;
    out.started = true;
  }
  out.ttl_us = banTtl(params, s, now);
  return out;
}

Micros banTtl(const BanParams& params, const BanState& state, Micros now) {
  Micros end = state.until;
  if (state.strikes > 0) {
    end = std::max(end, state.strikes_since + params.within_us);
  }
  if (state.step > 0) {
    end = std::max(end, std::max(state.until, state.last_denial) + params.forgive_us);
  }
  return std::max<Micros>(end - now, 0);
}

}  // namespace sluice
