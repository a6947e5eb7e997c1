#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/limiter/ban.hpp"
#include "sluice/limiter/calendar.hpp"
#include "sluice/limiter/sketch_params.hpp"

/// The rate-limiting algorithms as pure functions of (state, now, cost): no I/O, no clock
/// reads. The memory store keeps BucketState in process; the Redis store runs Lua scripts
/// that make identical decisions (README.md, "Rules"; docs/redis.md).
namespace sluice {

enum class Algorithm : std::uint8_t {
  kFixedWindow,
  kSlidingWindowLog,
  kSlidingWindowCounter,
  kTokenBucket,
  kLeakyBucket,
  kSketch,  ///< approximate, per-rule count-min sketches (sluice/limiter/sketch.hpp)
  /// In-flight limit: at most `limit` leases held at once, each for `window_us` unless
  /// released or renewed earlier (docs/algorithms.md, "concurrency").
  kConcurrency,
};

/// "fixed_window", "sliding_window_log", ...
std::string_view algorithmName(Algorithm algorithm);
/// The short code that names the algorithm inside bucket keys: "fw", "swl", "swc", "tb",
/// "lb", "sk", "cc" (every byte of a key is stored per tracked client).
std::string_view algorithmCode(Algorithm algorithm);
/// Parses the YAML spelling; nullopt when unknown.
std::optional<Algorithm> parseAlgorithm(std::string_view name);
/// The algorithm whose algorithmCode() is `code`; nullopt when none is.
std::optional<Algorithm> algorithmFromCode(std::string_view code);

/// Where a limit is decided on the Redis stores (`consistency:` in a rule). kStrict: one
/// Redis round trip per decision. kEventual: decided from the sidecar's local view, synced
/// in the background (docs/eventual.md). The algorithms themselves ignore it.
enum class Consistency : std::uint8_t { kStrict, kEventual };

/// Everything an algorithm needs to know about one limit.
struct LimitParams {
  Algorithm algorithm = Algorithm::kFixedWindow;
  std::int64_t limit = 0;               ///< L: requests per window (0 blocks everything)
  Micros window_us = kMicrosPerSecond;  ///< W = unit x unit_multiplier, > 0
  std::int64_t burst = 0;               ///< B for token/leaky bucket; 0 means B = L
  Micros min_interval_us = 0;           ///< sliding_window_log: min gap between admitted requests
  bool count_rejected = false;          ///< a denied attempt is recorded too
  Micros warmup_us = 0;                 ///< token_bucket: Guava SmoothWarmingUp period (0 = off)
  bool shape = false;                   ///< leaky_bucket: the server holds the answer for delay
  SketchParams sketch;                  ///< sketch: geometry and identity of the rule's sketch
  Consistency consistency = Consistency::kStrict;  ///< Redis stores only (see Consistency)
  /// fixed_window only: windows aligned to the calendar of a time zone (calendar.hpp)
  /// instead of epoch-aligned lengths; window_us stays the unit's nominal length.
  CalendarSpec calendar;
  /// The penalty box of the limit's rule (ban.hpp); disabled unless the rule has `ban:`.
  BanParams ban;
};

/// Outcome::retry_after_us of a request that can never pass (cost > limit or > burst).
inline constexpr Micros kRetryNever = -1;

/// floor(a / b) for b > 0 (C++ division truncates towards zero): with a time and a window
/// length, the number of the epoch-aligned window that holds the time.
inline std::int64_t floorDiv(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && (a < 0)) {
    --q;
  }
  return q;
}

/// The fixed window holding `now`: [start, end). Epoch-aligned multiples of window_us, or
/// the calendar window when params.calendar is enabled.
CalendarWindow fixedWindowAt(const LimitParams& params, Micros now);

/// B for token_bucket / leaky_bucket: `burst`, or L when burst is 0.
inline std::int64_t effectiveBurst(const LimitParams& params) {
  return params.burst > 0 ? params.burst : params.limit;
}

/// One logged request of a sliding_window_log bucket.
struct LogEntry {
  Micros at = 0;
  std::int64_t cost = 0;
};

/// The stored state of one bucket. The meaning of the scalar fields depends on the
/// algorithm; a default-constructed state is a fresh bucket. All times are microseconds
/// since the Unix epoch (src/limiter/algorithms.hpp has the full formulas):
/// - fixed_window:           a = window start, b = count in that window
/// - sliding_window_log:     log = (at, cost) entries, oldest first; a = last admitted request,
///                           b = 1 when a is set (min_interval)
/// - sliding_window_counter: a = current window start, b = its count, c = previous window's count
/// - token/leaky_bucket:     a = TAT whole microseconds, b = TAT remainder in 1/L microseconds
///                           (0 <= b < L), c = warm-up stored time in microseconds (token only)
/// - concurrency:            log = the leases held, (at = expiry, cost = lease number), soonest
///                           expiry first (src/limiter/concurrency.cpp)
struct BucketState {
  std::int64_t a = 0;
  std::int64_t b = 0;
  std::int64_t c = 0;
  std::vector<LogEntry> log;  ///< sliding_window_log only
};

/// Whether `state` is one the algorithm could have written (read back from outside the
/// process: a memory snapshot): every time and count within ±2^53, counts and the warm-up
/// store not negative, a log only for sliding_window_log, its entries oldest first with
/// positive costs, `b` of sliding_window_log 0 or 1. The algorithms' answers stay within
/// their bounds only for such states.
bool plausibleState(Algorithm algorithm, const BucketState& state);

/// What one limit says about one request.
struct Outcome {
  bool allowed = true;
  std::int64_t remaining = 0;  ///< requests left after this one (allowed) / now (denied), >= 0
  Micros reset_after_us = 0;   ///< until the bucket is entirely fresh again
  Micros retry_after_us = 0;   ///< 0 when allowed; exact wait until the same request passes;
                               ///< kRetryNever (-1) when it never can (`never`)
  Micros delay_us = 0;         ///< leaky_bucket: until this request leaves the queue
  bool never = false;          ///< the cost exceeds what the limit can ever admit
  /// The client is in this limit's penalty box (ban.hpp): refused until retry_after_us, the
  /// bucket left alone.
  bool banned = false;
  /// > 0: this very request started the ban, step `ban_step` of its ladder (the log line
  /// and sluice_bans_total are written once per ban, from this).
  std::int32_t ban_step = 0;
};

/// The result of evaluating one limit: the outcome and the state to write back.
struct Evaluation {
  Outcome outcome;
  /// The state with this attempt recorded: to be stored when the whole request is allowed,
  /// or when params.count_rejected (the attempt counts even if denied).
  BucketState next;
  /// How long `next` must be kept before it is indistinguishable from a fresh bucket;
  /// 0 when `next` already is (nothing needs storing).
  Micros ttl_us = 0;
};

/// Evaluates one limit at `now` for a request of `cost` (0 = check without consuming).
/// Pure and deterministic: the Lua scripts must return the same decision, remaining,
/// reset_after and retry_after for the same inputs.
Evaluation evaluate(const LimitParams& params, const BucketState& state, Micros now,
                    std::int64_t cost);

/// Gives `amount` (> 0) back to a limit: a refund of hits charged earlier (Envoy's
/// `is_negative_hits`, an HTTP `"refund": true`). What it means per algorithm is in
/// src/limiter/algorithms.hpp; in every algorithm the bucket is floored at a fresh one, so a
/// refund never creates credit beyond the limit. The outcome is what a check (cost 0) says
/// on the refunded state at `now`; `next` and `ttl_us` are to be stored as they are.
/// Callers refuse algorithms that refundRefusal() names.
Evaluation refund(const LimitParams& params, const BucketState& state, Micros now,
                  std::int64_t amount);

/// Records `cost` (> 0) whatever the limit says: a report of work already done, or a limit
/// that denied a request whose limits are all counted (envoyproxy/ratelimit's counting).
/// The charge lands even past the limit, so later requests are denied until it ages out;
/// token/leaky buckets carry at most one bucket (B) of debt beyond an empty one
/// (algorithms.hpp). The outcome is what a check (cost 0) says on the charged state.
Evaluation chargeAnyway(const LimitParams& params, const BucketState& state, Micros now,
                        std::int64_t cost);

/// A lease's number within its bucket (concurrency): random, 1 .. 2^53 - 1 (exact in the
/// Redis scripts' Lua doubles); 0 names no lease.
using LeaseNumber = std::int64_t;
inline constexpr LeaseNumber kMaxLeaseNumber = (std::int64_t{1} << 53) - 1;

/// concurrency: evaluate() that takes lease `lease` (> 0) when it admits a cost > 0. Every
/// admitted request holds one lease whatever its cost (a concurrency limit counts requests
/// in progress); a cost of 0 is a check. Other algorithms ignore `lease`.
Evaluation evaluate(const LimitParams& params, const BucketState& state, Micros now,
                    std::int64_t cost, LeaseNumber lease);

/// concurrency: refund() that releases lease `lease` when the bucket holds it; nothing when
/// it does not or `lease` is 0 (a refund's hits are not leases: a token refund that shares
/// a descriptor with a concurrency limit must not end other requests' leases).
Evaluation refund(const LimitParams& params, const BucketState& state, Micros now,
                  std::int64_t amount, LeaseNumber lease);

/// What happened to one lease of one bucket (releaseLease, renewLease).
enum class LeaseFound : std::uint8_t {
  kHeld,     ///< it was held and live: released, or renewed
  kExpired,  ///< it was held but its time had passed: nothing changed
  kNotHeld,  ///< the bucket does not hold it (released, expired and dropped, never granted)
};

/// The result of a lease operation on one bucket: the state to store (when found is kHeld)
/// and the lease's expiry (renewed: the new one; expired: the old one).
struct LeaseChange {
  LeaseFound found = LeaseFound::kNotHeld;
  Evaluation evaluation;  ///< outcome: a check on the new state; next/ttl_us to store
  Micros expires_at = 0;
};

/// concurrency: releases lease `lease` of the bucket at `now`.
LeaseChange releaseLease(const LimitParams& params, const BucketState& state, Micros now,
                         LeaseNumber lease);
/// concurrency: extends lease `lease` to now + params.window_us (never shortens it).
LeaseChange renewLease(const LimitParams& params, const BucketState& state, Micros now,
                       LeaseNumber lease);

/// Why a limit cannot take a refund, or "" when it can. A sketch's conservative update
/// raises counters shared with other clients and cannot be undone.
std::string_view refundRefusal(const LimitParams& params);

/// Evaluates as evaluate() with `held` (>= 0) of outstanding reservation holds counted
/// against the limit as if they were charged (docs/reservations.md): the request is allowed
/// only when it fits with them (for a counter, used + held + cost <= L; for a bucket, the
/// tokens left cover held + cost). `remaining` is net of the holds. The state to store is
/// the request's own (the holds are never charged). When the holds alone stand in the way
/// of a cost the limit could take, `retry_after_us` is `holds_retry_us` (when the first
/// hold expires). held == 0 is exactly evaluate().
Evaluation evaluateWithHolds(const LimitParams& params, const BucketState& state, Micros now,
                             std::int64_t cost, std::int64_t held, Micros holds_retry_us);

/// Why a limit cannot hold a reservation, or "" when it can: a sketch (its counters are
/// shared, approximate and cannot be given back), a concurrency limit (it holds leases, not
/// amounts), a shaped leaky bucket (a hold has no place in its queue) and an eventual limit
/// (decided from a local view) cannot.
std::string_view holdRefusal(const LimitParams& params);

/// The most a limit can ever admit at once: L, or B for token_bucket and leaky_bucket.
std::int64_t limitCapacity(const LimitParams& params);

}  // namespace sluice
