#include <algorithm>

#include "limiter/algorithms.hpp"

namespace sluice {

CalendarWindow fixedWindowAt(const LimitParams& params, Micros now) {
  if (params.calendar.enabled()) {
    return calendarWindowAt(params.calendar, now);
  }
  const Micros start = limiter_detail::windowStart(now, params.window_us);
  return CalendarWindow{start, start + params.window_us};
}

}  // namespace sluice

namespace sluice::limiter_detail {

// fixed_window (contract: algorithms.hpp). State: a = window start, b = count.
//   start = floor(now / W) * W, end = start + W (a calendar window: calendarWindowAt)
//   count = (a == start) ? b : 0; left = end - now
//   never    iff c > L:              denied, retry = -1, nothing recorded
//   allowed  iff count + c <= L:     b' = count + c, remaining = L - b'
//   denied otherwise:                remaining = max(0, L - count), retry = left,
//                                    b' = count + c only with count_rejected
//   reset_after = ttl = left when b' > 0, else 0.
Evaluation evaluateFixedWindow(const LimitParams& params, const BucketState& state, Micros now,
                               std::int64_t cost) {
  const FixedWindowView old(state);
  const std::int64_t limit = params.limit;
  const CalendarWindow window = fixedWindowAt(params, now);
  const Micros start = window.start;
  const std::int64_t count = old.windowStart() == start ? old.count() : 0;
  const Micros left = window.end - now;

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
  const Micros start = fixedWindowAt(params, now).start;
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
