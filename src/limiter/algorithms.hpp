#pragma once

#include <cstdint>

#include "sluice/limiter.hpp"

/// The five algorithms, one function each; sluice::evaluate() dispatches on
/// LimitParams::algorithm after normalising `cost` (negative counts as 0) and handling L = 0.
/// Every function is pure and deterministic; the exact formulas (which the Redis Lua scripts
/// reproduce) are documented next to each implementation.
namespace sluice::limiter_detail {

Evaluation evaluateFixedWindow(const LimitParams& params, const BucketState& state, Micros now,
                               std::int64_t cost);
Evaluation evaluateSlidingWindowLog(const LimitParams& params, const BucketState& state,
                                    Micros now, std::int64_t cost);
Evaluation evaluateSlidingWindowCounter(const LimitParams& params, const BucketState& state,
                                        Micros now, std::int64_t cost);
/// token_bucket and leaky_bucket share one GCRA state; `leaky` adds delay_us.
Evaluation evaluateGcra(const LimitParams& params, const BucketState& state, Micros now,
                        std::int64_t cost, bool leaky);

/// floor(a / b) for b > 0 (C++ division truncates towards zero).
inline std::int64_t floorDiv(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && (a < 0)) {
    --q;
  }
  return q;
}

/// Start of the epoch-aligned window of length `window` containing `now`.
inline Micros windowStart(Micros now, Micros window) { return floorDiv(now, window) * window; }

}  // namespace sluice::limiter_detail
