#include <algorithm>

#include "limiter/algorithms.hpp"

namespace sluice::limiter_detail {

// fixed_window (contract: algorithms.hpp). State: a = window start, b = count.
//   start = floor(now / W) * W; count = (a == start) ? b : 0; left = start + W - now
//   never    iff c > L:              denied, retry = -1, nothing recorded
//   allowed  iff count + c <= L:     b' = count + c, remaining = L - b'
//   denied otherwise:                remaining = max(0, L - count), retry = left,
//                                    b' = count + c only with count_rejected
//   reset_after = ttl = left when b' > 0, else 0.
Evaluation evaluateFixedWindow(const LimitParams& params, const BucketState& state, Micros now,
                               std::int64_t cost) {
  const FixedWindowView old(state);
  const std::int64_t limit = params.limit;
  const Micros start = windowStart(now, params.window_us);
  const std::int64_t count = old.windowStart() == start ? old.count() : 0;
  const Micros left = start + params.window_us - now;

  Evaluation e;
  const FixedWindowView next(e.next);
  next.windowStart() = start;
  next.count() = count;
  Outcome& o = e.outcome;
  if (cost > limit) {
    o.allowed = false;
    o.never = true;
    o.retry_after_us = kRetryNever;
    o.remaining = std::max<std::int64_t>(0, limit - count);
  } else if (count + cost <= limit) {
    next.count() = count + cost;
    o.remaining = limit - next.count();
  } else {
    o.allowed = false;
    o.remaining = std::max<std::int64_t>(0, limit - count);
    o.retry_after_us = left;
    if (params.count_rejected) {
      next.count() = count + cost;
    }
  }
  o.reset_after_us = next.count() > 0 ? left : 0;
  e.ttl_us = o.reset_after_us;
  return e;
}

namespace {

/// The count of the window containing `now` (0 when the stored one is of an earlier window).
BucketState withCount(const LimitParams& params, const BucketState& state, Micros now,
                      std::int64_t delta) {
  const FixedWindowView old(state);
  const Micros start = windowStart(now, params.window_us);
  const std::int64_t count = old.windowStart() == start ? old.count() : 0;
  BucketState next;
  const FixedWindowView view(next);
  view.windowStart() = start;
  view.count() = std::max<std::int64_t>(0, count + delta);
  return next;
}

}  // namespace

BucketState refundFixedWindow(const LimitParams& params, const BucketState& state, Micros now,
                              std::int64_t amount) {
  return withCount(params, state, now, -amount);
}

BucketState chargeFixedWindow(const LimitParams& params, const BucketState& state, Micros now,
                              std::int64_t cost) {
  return withCount(params, state, now, cost);
}

}  // namespace sluice::limiter_detail
