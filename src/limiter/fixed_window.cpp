#include <algorithm>

#include "limiter/algorithms.hpp"

namespace sluice::limiter_detail {

// fixed_window (DESIGN.md §4). State: a = window start, b = count.
//   start = floor(now / W) * W; count = (a == start) ? b : 0; left = start + W - now
//   never    iff c > L:              denied, retry = -1, nothing recorded
//   allowed  iff count + c <= L:     b' = count + c, remaining = L - b'
//   denied otherwise:                remaining = max(0, L - count), retry = left,
//                                    b' = count + c only with count_rejected
//   reset_after = ttl = left when b' > 0, else 0.
Evaluation evaluateFixedWindow(const LimitParams& params, const BucketState& state, Micros now,
                               std::int64_t cost) {
  const std::int64_t limit = params.limit;
  const Micros start = windowStart(now, params.window_us);
  const std::int64_t count = state.a == start ? state.b : 0;
  const Micros left = start + params.window_us - now;

  Evaluation e;
  e.next.a = start;
  e.next.b = count;
  Outcome& o = e.outcome;
  if (cost > limit) {
    o.allowed = false;
    o.never = true;
    o.retry_after_us = kRetryNever;
    o.remaining = std::max<std::int64_t>(0, limit - count);
  } else if (count + cost <= limit) {
    e.next.b = count + cost;
    o.remaining = limit - e.next.b;
  } else {
    o.allowed = false;
    o.remaining = std::max<std::int64_t>(0, limit - count);
    o.retry_after_us = left;
    if (params.count_rejected) {
      e.next.b = count + cost;
    }
  }
  o.reset_after_us = e.next.b > 0 ? left : 0;
  e.ttl_us = o.reset_after_us;
  return e;
}

}  // namespace sluice::limiter_detail
