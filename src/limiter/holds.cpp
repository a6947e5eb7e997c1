#include <algorithm>

#include "sluice/limiter/limiter.hpp"

namespace sluice {

Evaluation evaluateWithHolds(const LimitParams& params, const BucketState& state, Micros now,
                             std::int64_t cost, std::int64_t held, Micros holds_retry_us) {
  Evaluation alone = evaluate(params, state, now, cost);
  if (held <= 0 || !alone.outcome.allowed) {
    return alone;
  }
  const std::int64_t c = std::max<std::int64_t>(cost, 0);
  // The gate: the same request as if the holds were charged with it.
  const Evaluation gate = evaluate(params, state, now, c + held);
  if (gate.outcome.allowed) {
    alone.outcome.remaining = std::max<std::int64_t>(alone.outcome.remaining - held, 0);
    return alone;
  }
  Outcome& out = alone.outcome;
  out.allowed = false;
  out.never = false;
  out.delay_us = 0;
  out.remaining = std::max<std::int64_t>(out.remaining + c - held, 0);
  // The holds cannot all pass at once ever: the request waits for them to go.
  out.retry_after_us =
      gate.outcome.never ? std::max<Micros>(holds_retry_us, 1) : gate.outcome.retry_after_us;
  return alone;
}

std::string_view holdRefusal(const LimitParams& params) {
  if (params.consistency == Consistency::kEventual) {
    return "an eventual limit cannot hold a reservation: it decides from a local view that "
           "other sidecars' holds do not reach (docs/eventual.md)";
  }
  switch (params.algorithm) {
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingWindowLog:
    case Algorithm::kSlidingWindowCounter:
    case Algorithm::kTokenBucket:
      return {};
    case Algorithm::kLeakyBucket:
      if (params.shape) {
        return "a shaped leaky bucket cannot hold a reservation: a hold has no place in its "
               "queue (use shape: false or a token_bucket)";
      }
      return {};
    case Algorithm::kSketch:
      return "a sketch limit cannot hold a reservation: its counters are shared by many "
             "clients and approximate, so a hold could not be told apart or given back";
    case Algorithm::kConcurrency:
      return "a concurrency limit cannot hold a reservation: it counts requests in progress, "
             "each holding a lease (take one with a decision; docs/algorithms.md)";
  }
  return "this algorithm cannot hold a reservation";
}

std::int64_t limitCapacity(const LimitParams& params) {
  if (params.algorithm == Algorithm::kTokenBucket || params.algorithm == Algorithm::kLeakyBucket) {
    return effectiveBurst(params);
  }
  return params.limit;
}

}  // namespace sluice
