#include <algorithm>
#include <cmath>

#include "limiter/algorithms.hpp"

namespace sluice::limiter_detail {

// sliding_window_counter (contract: algorithms.hpp). State: a = start of the current window, b =
// its count, c = the previous window's count.
//   start = floor(now / W) * W; elapsed = now - start
//   (curr, prev) = (b, c) if a == start; (0, b) if a == start - W; (0, 0) otherwise
//   estimate = prev * (W - elapsed) / W + curr     IEEE-754 double, evaluated exactly in this
//       order: double(prev) * double(W - elapsed), then / double(W), then + double(curr)
//       (Lua: `prev * (W - elapsed) / W + curr`; counts and W below 2^53 are exact doubles)
//   total = estimate + double(c)   (one more rounded double addition)
//   never    iff c > L
//   allowed  iff total <= L:  curr' = curr + c; remaining = floor(L - total)
//   denied otherwise:         remaining = max(0, floor(L - estimate)); curr' = curr + c only
//                             with count_rejected
//   retry (denied) = the smallest integer t > 0 for which the same formulas, applied to the
//     state after this attempt at now + t, allow; the predicate is monotone in t inside a
//     window, so it is found by bisection over the rest of this window, then of the next;
//     two windows later the estimate is 0 and c <= L passes.
//   reset_after = ttl = start + 2W - now if curr' > 0, start + W - now if prev > 0, else 0.
namespace {

struct Counts {
  std::int64_t curr = 0;
  std::int64_t prev = 0;
};

double estimate(const Counts& counts, Micros window, Micros elapsed) {
  return static_cast<double>(counts.prev) * static_cast<double>(window - elapsed) /
             static_cast<double>(window) +
         static_cast<double>(counts.curr);
}

bool passes(const Counts& counts, Micros window, Micros elapsed, std::int64_t cost,
            std::int64_t limit) {
  return estimate(counts, window, elapsed) + static_cast<double>(cost) <=
         static_cast<double>(limit);
}

/// Smallest elapsed in [from, window) at which the request passes, or `window` if none.
Micros firstPassing(const Counts& counts, Micros window, Micros from, std::int64_t cost,
                    std::int64_t limit) {
  Micros lo = from;
  Micros hi = window;  // invariant: passes at hi (or hi == window), and not below lo
  while (lo < hi) {
    const Micros mid = lo + (hi - lo) / 2;
    if (passes(counts, window, mid, cost, limit)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

}  // namespace

Evaluation evaluateSlidingWindowCounter(const LimitParams& params, const BucketState& state,
                                        Micros now, std::int64_t cost) {
  const std::int64_t limit = params.limit;
  const Micros window = params.window_us;
  const Micros start = windowStart(now, window);
  const Micros elapsed = now - start;
  const SlidingWindowCounterView old(state);
  Counts counts;
  if (old.windowStart() == start) {
    counts = {old.currentCount(), old.previousCount()};
  } else if (old.windowStart() == start - window) {
    counts = {0, old.currentCount()};
  }
  const double current = estimate(counts, window, elapsed);
  const double total = current + static_cast<double>(cost);

  Evaluation e;
  Outcome& o = e.outcome;
  Counts next = counts;
  if (cost > limit) {
    o.allowed = false;
    o.never = true;
    o.retry_after_us = kRetryNever;
    o.remaining = std::max<std::int64_t>(
        0, static_cast<std::int64_t>(std::floor(static_cast<double>(limit) - current)));
  } else if (total <= static_cast<double>(limit)) {
    next.curr += cost;
    o.remaining = static_cast<std::int64_t>(std::floor(static_cast<double>(limit) - total));
  } else {
    o.allowed = false;
    o.remaining = std::max<std::int64_t>(
        0, static_cast<std::int64_t>(std::floor(static_cast<double>(limit) - current)));
    if (params.count_rejected) {
      next.curr += cost;
    }
    const Micros in_this = firstPassing(next, window, elapsed + 1, cost, limit);
    if (in_this < window) {
      o.retry_after_us = in_this - elapsed;
    } else {
      const Counts rolled{0, next.curr};
      const Micros in_next = firstPassing(rolled, window, 0, cost, limit);
      o.retry_after_us = (window - elapsed) + in_next;
    }
  }

  const SlidingWindowCounterView stored(e.next);
  stored.windowStart() = start;
  stored.currentCount() = next.curr;
  stored.previousCount() = next.prev;
  if (next.curr > 0) {
    o.reset_after_us = start + 2 * window - now;
  } else if (next.prev > 0) {
    o.reset_after_us = start + window - now;
  }
  e.ttl_us = o.reset_after_us;
  return e;
}

namespace {

Counts countsAt(const LimitParams& params, const BucketState& state, Micros start) {
  const SlidingWindowCounterView old(state);
  if (old.windowStart() == start) {
    return {old.currentCount(), old.previousCount()};
  }
  if (old.windowStart() == start - params.window_us) {
    return {0, old.currentCount()};
  }
  return {};
}

BucketState stateOf(Micros start, const Counts& counts) {
  BucketState next;
  const SlidingWindowCounterView view(next);
  view.windowStart() = start;
  view.currentCount() = counts.curr;
  view.previousCount() = counts.prev;
  return next;
}

}  // namespace

BucketState refundSlidingWindowCounter(const LimitParams& params, const BucketState& state,
                                       Micros now, std::int64_t amount) {
  const Micros start = windowStart(now, params.window_us);
  Counts counts = countsAt(params, state, start);
  const std::int64_t from_current = std::min(amount, counts.curr);
  counts.curr -= from_current;
  counts.prev = std::max<std::int64_t>(0, counts.prev - (amount - from_current));
  return stateOf(start, counts);
}

BucketState chargeSlidingWindowCounter(const LimitParams& params, const BucketState& state,
                                       Micros now, std::int64_t cost) {
  const Micros start = windowStart(now, params.window_us);
  Counts counts = countsAt(params, state, start);
  counts.curr += cost;
  return stateOf(start, counts);
}

}  // namespace sluice::limiter_detail
