#pragma once

#include <cstdint>

#include "sluice/limiter/limiter.hpp"

/// The five algorithms, one function each. Every function is pure and deterministic; the
/// exact formulas, which the Redis Lua scripts reproduce, are in the comment at the top of
/// each implementation (fixed_window.cpp, sliding_window_log.cpp, sliding_window_counter.cpp,
/// gcra.cpp). What they share:
///
/// - Units: times are integer microseconds since the Unix epoch, W = LimitParams::window_us,
///   L = limit, c = cost. Integer arithmetic everywhere (exact in Lua 5.1 doubles while every
///   value stays below 2^53), except the sliding counter's estimate and the warm-up
///   surcharge, which are IEEE doubles evaluated in the documented order (neither has a
///   product feeding an addition, so FMA contraction cannot change them).
/// - sluice::evaluate(): a negative cost counts as 0; L <= 0 or W <= 0 blocks everything
///   (c > 0: denied with never = true, retry = -1; c = 0: allowed, remaining 0; state kept).
/// - c = 0 is a check: the decision is computed as usual but consumes nothing (for
///   sliding_window_log, min_interval does not apply to a check).
/// - never: c > L (c > B for token/leaky buckets) is denied with never = true and
///   retry_after = kRetryNever (-1); nothing is recorded, even with count_rejected.
/// - Evaluation::next is the state with this attempt recorded: the store writes it when the
///   whole request is allowed and this limit allowed, or whenever count_rejected is set; a
///   denied limit without count_rejected returns the (normalised) old state.
/// - retry_after (denied, not never) is the smallest whole t > 0 such that the same request
///   evaluated on `next` at now + t is allowed, so it is exact at the microsecond.
/// - reset_after is the time until the bucket is entirely fresh (the same answers as an empty
///   state); ttl_us is how long `next` must be stored (0: drop it). They are equal except
///   for token_bucket with warm-up, whose ttl also covers cooling down to fully cold.
/// - remaining >= 0: the unit-cost requests that would still pass right now after this one
///   (allowed) or now (denied); token_bucket with warm-up counts them at the stable rate.
namespace sluice::limiter_detail {

Evaluation evaluateFixedWindow(const LimitParams& params, const BucketState& state, Micros now,
                               std::int64_t cost);
Evaluation evaluateSlidingWindowLog(const LimitParams& params, const BucketState& state, Micros now,
                                    std::int64_t cost);
Evaluation evaluateSlidingWindowCounter(const LimitParams& params, const BucketState& state,
                                        Micros now, std::int64_t cost);
/// token_bucket and leaky_bucket share one GCRA state; `leaky` adds delay_us.
Evaluation evaluateGcra(const LimitParams& params, const BucketState& state, Micros now,
                        std::int64_t cost, bool leaky);

/// concurrency (src/limiter/concurrency.cpp): take lease `lease` when admitting cost > 0;
/// refund: release `lease` (nothing when it is 0 or not held);
/// check: the answer of a cost-0 request (a report or a counted charge takes no lease).
Evaluation evaluateConcurrency(const LimitParams& params, const BucketState& state, Micros now,
                               std::int64_t cost, LeaseNumber lease);
Evaluation refundConcurrency(const LimitParams& params, const BucketState& state, Micros now,
                             std::int64_t amount, LeaseNumber lease);
Evaluation checkConcurrency(const LimitParams& params, const BucketState& state, Micros now);

/// Refunds and charges that land whatever the limit says (limiter.hpp: refund,
/// chargeAnyway): each returns the state after the change; the caller derives the outcome
/// and ttl from a check (cost 0) on it. amount/cost > 0. Per algorithm:
/// - fixed_window: the current window's count -/+ amount, floored at 0 (a count of an
///   earlier window is already gone).
/// - sliding_window_counter: a refund takes from the current window's count first, then
///   from the previous window's, each floored at 0; a charge adds to the current window.
/// - sliding_window_log: a refund removes cost from the newest live entries first (the
///   min_interval clock is kept); a charge logs (now, cost) with the log's usual hygiene.
/// - token/leaky bucket (GCRA): a refund moves TAT back by D(amount), never before now (a
///   TAT at or before now is a full bucket: moving it earlier would add nothing but warm-up
///   idleness); the warm-up store is kept. A charge moves TAT to max(TAT, now) + D(cost)
///   plus the warm-up surcharge, capped at now + D(B) + D(B): at most one bucket of debt
///   beyond an empty bucket, however large the charge (D of at most 2B is computed as
///   D(min(c, B)) + D(min(c - B, B)), every product below 2^53).
/// Sketch limits never come here (refundRefusal; the stores charge a sketch through its
/// rule's shared sketch).
BucketState refundFixedWindow(const LimitParams& params, const BucketState& state, Micros now,
                              std::int64_t amount);
BucketState chargeFixedWindow(const LimitParams& params, const BucketState& state, Micros now,
                              std::int64_t cost);
BucketState refundSlidingWindowLog(const LimitParams& params, const BucketState& state, Micros now,
                                   std::int64_t amount);
BucketState chargeSlidingWindowLog(const LimitParams& params, const BucketState& state, Micros now,
                                   std::int64_t cost);
BucketState refundSlidingWindowCounter(const LimitParams& params, const BucketState& state,
                                       Micros now, std::int64_t amount);
BucketState chargeSlidingWindowCounter(const LimitParams& params, const BucketState& state,
                                       Micros now, std::int64_t cost);
BucketState refundGcra(const LimitParams& params, const BucketState& state, Micros now,
                       std::int64_t amount, bool leaky);
BucketState chargeGcra(const LimitParams& params, const BucketState& state, Micros now,
                       std::int64_t cost, bool leaky);

/// Typed views over BucketState's scalar fields, one per algorithm, so that no algorithm
/// reads a field named `a`, `b` or `c` (BucketState lists what each holds). They own
/// nothing and work on const and mutable states alike: `const FixedWindowView old(state);`.
template <typename State>
class FixedWindowView {
 public:
  explicit FixedWindowView(State& state) : state_(state) {}
  auto& windowStart() const { return state_.a; }
  auto& count() const { return state_.b; }

 private:
  State& state_;
};

template <typename State>
class SlidingWindowLogView {
 public:
  explicit SlidingWindowLogView(State& state) : state_(state) {}
  /// The last admitted request (for min_interval), valid when hasLast() is 1.
  auto& lastAdmitted() const { return state_.a; }
  auto& hasLast() const { return state_.b; }

 private:
  State& state_;
};

template <typename State>
class SlidingWindowCounterView {
 public:
  explicit SlidingWindowCounterView(State& state) : state_(state) {}
  auto& windowStart() const { return state_.a; }
  auto& currentCount() const { return state_.b; }
  auto& previousCount() const { return state_.c; }

 private:
  State& state_;
};

/// token_bucket and leaky_bucket (GCRA).
template <typename State>
class GcraView {
 public:
  explicit GcraView(State& state) : state_(state) {}
  /// The theoretical arrival time: whole microseconds, and the remainder in 1/L µs.
  auto& tatMicros() const { return state_.a; }
  auto& tatRemainder() const { return state_.b; }
  /// token_bucket warm-up: the stored (cooled) time in microseconds.
  auto& warmupStored() const { return state_.c; }

 private:
  State& state_;
};

using ::sluice::floorDiv;

/// Start of the epoch-aligned window of length `window` containing `now`.
inline Micros windowStart(Micros now, Micros window) { return floorDiv(now, window) * window; }

}  // namespace sluice::limiter_detail
