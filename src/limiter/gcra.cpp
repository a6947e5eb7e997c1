#include <algorithm>
#include <cmath>

#include "limiter/algorithms.hpp"

namespace sluice::limiter_detail {

// token_bucket and leaky_bucket (contract: algorithms.hpp): GCRA over one theoretical arrival time
// (TAT).
//
// Exact rational time. The emission interval T = W / L is rarely a whole number of
// microseconds, so every GCRA time is a pair (us, rem) meaning us + rem / L microseconds with
// 0 <= rem < L. With q = floor(W / L) and r = W mod L, n requests take
//     D(n) = (n*q + floor(n*r / L), (n*r) mod L)
// Pairs add with a carry (rem1 + rem2 >= L → us + 1, rem - L), subtract with a borrow, and
// compare lexicographically; ceil(us, rem) = us + (rem > 0 ? 1 : 0). Every intermediate is an
// integer below 2^53 as long as B * L < 2^53 and times are microseconds since the epoch, so
// Lua 5.1 doubles reproduce it exactly. State: a = TAT.us, b = TAT.rem, c = warm-up store S.
//
// With B = burst (or L), N = (now, 0), base = max(TAT, N):
//   never    iff c > B:                        denied, retry = -1, nothing recorded
//   allowed  iff base + D(c) <= N + D(B):      TAT' = base + D(c) + (extra, 0)
//   denied otherwise: TAT' = TAT, or with count_rejected TAT' = N + D(B) (S' = S): the
//     attempt empties the bucket, so a client hammering faster than c per T stays blocked
//     until it pauses, and one that pauses waits c * T at most (rejected attempts never push
//     TAT further, unlike an unbounded charge).
//   remaining = the largest k in [0, B] with X + D(k) <= N + D(B), X = TAT' if allowed else base
//   retry (denied) = max(0, ceil(TAT' + D(c) - D(B)) - now): the first whole microsecond at
//     which the same request passes (until then max(TAT', t) = TAT').
//   reset_after = max(0, ceil(TAT') - now)        (the bucket is full again)
//   ttl = reset_after + (P - S') with warm-up, else reset_after.
//   leaky_bucket only: delay_us = ceil(base) - now, the wait until the queue ahead of this
//     request has drained (0, W/L, 2W/L, ... rounded up); warm-up does not apply.
//
// Warm-up (token_bucket with warmup P > 0), Guava's SmoothWarmingUp with cold factor 3
// measured in time rather than permits: Guava's stored permits s become S = s * T
// microseconds, maxPermits = P / T becomes S_max = P, its threshold P / 2 becomes
// half = floor(P / 2), and its cool-down interval P / maxPermits = T means S grows by one
// microsecond per idle microsecond. The interval of a permit taken at level x is
// T * (1 + max(0, x - half) * 4 / P): T when warm, 3T when fully cold.
//   idle = max(0, now - ceil(TAT)); S_now = min(P, S + idle)      (a fresh bucket is cold)
//   on a charge: delta = min(S_now, D(c).us); hi = max(0, S_now - half);
//     lo = max(0, S_now - delta - half);
//     extra = ceil(2 * (hi - lo) * (hi + lo) / P)   IEEE doubles in this order (Lua:
//       `math.ceil(2 * (hi - lo) * (hi + lo) / P)`), the integral of the surcharge above T;
//     S' = S_now - delta
//   a denial without count_rejected returns the state unchanged (TAT' = TAT, S' = S).
// The admission test is exactly docs/algorithms.md's base + D(c) <= now + D(B); the warm-up
// surcharge only pushes TAT for the requests after this one, as Guava makes the next caller pay, so
// a cold bucket admits at L/3 per W and ramps to L per W while S falls from P to P/2, and every c
// <= B still passes eventually. `remaining` counts requests at the stable interval T.
namespace {

// Products n * r can exceed 64 bits for huge bursts before they are divided by L.
__extension__ using Wide = __int128;

struct Time {
  std::int64_t us = 0;
  std::int64_t rem = 0;  // in 1/L microseconds, 0 <= rem < L
};

bool lessEq(const Time& x, const Time& y) {
  return x.us < y.us || (x.us == y.us && x.rem <= y.rem);
}

class Gcra {
 public:
  explicit Gcra(const LimitParams& params)
      : limit_(params.limit),
        q_(params.window_us / params.limit),
        r_(params.window_us % params.limit) {}

  Time span(std::int64_t n) const {
    // n * r in 64 bits when it fits (the usual case: the same quotient and remainder without
    // a call to the 128-bit division), else in 128.
    if (std::int64_t nr64 = 0; !__builtin_mul_overflow(n, r_, &nr64)) {
      return Time{n * q_ + nr64 / limit_, nr64 % limit_};
    }
    const Wide nr = static_cast<Wide>(n) * r_;
    return Time{n * q_ + static_cast<std::int64_t>(nr / limit_),
                static_cast<std::int64_t>(nr % limit_)};
  }
  /// D(min(n, 2B)) as D(min(n, B)) + D(the rest, at most B): each product below 2^53.
  Time twoBuckets(std::int64_t n, std::int64_t burst) const {
    const std::int64_t first = std::min(n, burst);
    return add(span(first), span(std::min(n - first, burst)));
  }
  Time add(const Time& x, const Time& y) const {
    Time t{x.us + y.us, x.rem + y.rem};
    if (t.rem >= limit_) {
      t.us += 1;
      t.rem -= limit_;
    }
    return t;
  }
  Time sub(const Time& x, const Time& y) const {
    Time t{x.us - y.us, x.rem - y.rem};
    if (t.rem < 0) {
      t.us -= 1;
      t.rem += limit_;
    }
    return t;
  }
  Time normalize(std::int64_t us, std::int64_t rem) const {
    return Time{us + floorDiv(rem, limit_), rem - floorDiv(rem, limit_) * limit_};
  }
  /// The largest k in [0, most] with from + span(k) <= until (0 if none).
  std::int64_t fits(const Time& from, const Time& until, std::int64_t most) const {
    if (!lessEq(from, until)) {
      return 0;
    }
    std::int64_t lo = 0;
    std::int64_t hi = most;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo + 1) / 2;
      if (lessEq(add(from, span(mid)), until)) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }

 private:
  std::int64_t limit_;
  std::int64_t q_;
  std::int64_t r_;
};

Micros ceilMicros(const Time& t) { return t.us + (t.rem > 0 ? 1 : 0); }

/// Guava's warm-up surcharge for taking `delta` microseconds of stored time at level `stored`.
Micros warmupExtra(Micros stored, Micros delta, Micros period) {
  const Micros half = period / 2;
  const Micros hi = std::max<Micros>(0, stored - half);
  const Micros lo = std::max<Micros>(0, stored - delta - half);
  const double extra = 2.0 * static_cast<double>(hi - lo) * static_cast<double>(hi + lo) /
                       static_cast<double>(period);
  return static_cast<Micros>(std::ceil(extra));
}

}  // namespace

Evaluation evaluateGcra(const LimitParams& params, const BucketState& state, Micros now,
                        std::int64_t cost, bool leaky) {
  const Gcra g(params);
  const std::int64_t burst = effectiveBurst(params);
  const Micros period = leaky ? 0 : std::max<Micros>(params.warmup_us, 0);
  const GcraView old(state);
  const Time tat = g.normalize(old.tatMicros(), old.tatRemainder());
  const Time n{now, 0};
  const Time base = lessEq(tat, n) ? n : tat;
  const Time ceiling = g.add(n, g.span(burst));
  // Only used when cost <= burst; D(cost) of a larger cost (hits up to 10^9 against a slow
  // limit) would overflow int64.
  const Time charged = g.add(base, g.span(std::min(cost, burst)));

  Micros stored = 0;
  if (period > 0) {
    const Micros idle = std::max<Micros>(0, now - ceilMicros(tat));
    stored = std::min(period, std::max<Micros>(old.warmupStored(), 0) + std::min(idle, period));
  }

  Evaluation e;
  Outcome& o = e.outcome;
  Time next = tat;
  Micros next_stored = std::max<Micros>(old.warmupStored(), 0);
  const auto charge = [&] {
    next = charged;
    next_stored = stored;
    if (period > 0) {
      const Micros delta = std::min(stored, g.span(cost).us);
      next = g.add(next, Time{warmupExtra(stored, delta, period), 0});
      next_stored = stored - delta;
    }
  };

  if (cost > burst) {
    o.allowed = false;
    o.never = true;
    o.retry_after_us = kRetryNever;
    o.remaining = g.fits(base, ceiling, burst);
  } else if (lessEq(charged, ceiling)) {
    charge();
    o.remaining = g.fits(next, ceiling, burst);
    if (leaky) {
      o.delay_us = ceilMicros(base) - now;
    }
  } else {
    o.allowed = false;
    o.remaining = g.fits(base, ceiling, burst);
    if (params.count_rejected) {
      next = ceiling;  // denied implies TAT > now, so no idle time is credited to S
    }
    const Time passes_at = g.sub(g.add(next, g.span(cost)), g.span(burst));
    o.retry_after_us = std::max<Micros>(0, ceilMicros(passes_at) - now);
  }

  const GcraView written(e.next);
  written.tatMicros() = next.us;
  written.tatRemainder() = next.rem;
  written.warmupStored() = period > 0 ? next_stored : 0;
  o.reset_after_us = std::max<Micros>(0, ceilMicros(next) - now);
  e.ttl_us = o.reset_after_us;
  if (period > 0) {
    e.ttl_us += period - std::min(period, next_stored);
  }
  return e;
}

BucketState refundGcra(const LimitParams& params, const BucketState& state, Micros now,
                       std::int64_t amount, bool leaky) {
  const Gcra g(params);
  const GcraView old(state);
  const Time tat = g.normalize(old.tatMicros(), old.tatRemainder());
  const Time n{now, 0};
  Time back = tat;
  if (!lessEq(tat, n)) {
    // A TAT never holds more than D(2B) beyond now (chargeGcra), so a larger amount gives
    // back no more; capping it keeps every product below 2^53, as in the Lua script.
    back = g.sub(tat, g.twoBuckets(amount, effectiveBurst(params)));
    if (!lessEq(n, back)) {
      back = n;
    }
  }
  BucketState next;
  const GcraView written(next);
  written.tatMicros() = back.us;
  written.tatRemainder() = back.rem;
  written.warmupStored() =
      (!leaky && params.warmup_us > 0) ? std::max<Micros>(old.warmupStored(), 0) : 0;
  return next;
}

BucketState chargeGcra(const LimitParams& params, const BucketState& state, Micros now,
                       std::int64_t cost, bool leaky) {
  const Gcra g(params);
  const std::int64_t burst = effectiveBurst(params);
  const Micros period = leaky ? 0 : std::max<Micros>(params.warmup_us, 0);
  const GcraView old(state);
  const Time tat = g.normalize(old.tatMicros(), old.tatRemainder());
  const Time n{now, 0};
  const Time base = lessEq(tat, n) ? n : tat;
  const Time span = g.twoBuckets(cost, burst);
  Time next = g.add(base, span);
  Micros next_stored = 0;
  if (period > 0) {
    const Micros idle = std::max<Micros>(0, now - ceilMicros(tat));
    const Micros stored =
        std::min(period, std::max<Micros>(old.warmupStored(), 0) + std::min(idle, period));
    const Micros delta = std::min(stored, span.us);
    next = g.add(next, Time{warmupExtra(stored, delta, period), 0});
    next_stored = stored - delta;
  }
  const Time cap = g.add(g.add(n, g.span(burst)), g.span(burst));
  if (!lessEq(next, cap)) {
    next = cap;
  }
  BucketState out;
  const GcraView written(out);
  written.tatMicros() = next.us;
  written.tatRemainder() = next.rem;
  written.warmupStored() = next_stored;
  return out;
}

}  // namespace sluice::limiter_detail
