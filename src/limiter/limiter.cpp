#include "sluice/limiter/limiter.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "limiter/algorithms.hpp"

namespace sluice {
namespace {

constexpr std::array<std::pair<Algorithm, std::string_view>, 7> kNames{{
    {Algorithm::kFixedWindow, "fixed_window"},
    {Algorithm::kSlidingWindowLog, "sliding_window_log"},
    {Algorithm::kSlidingWindowCounter, "sliding_window_counter"},
    {Algorithm::kTokenBucket, "token_bucket"},
    {Algorithm::kLeakyBucket, "leaky_bucket"},
    {Algorithm::kSketch, "sketch"},
    {Algorithm::kConcurrency, "concurrency"},
}};

/// L = 0 blocks everything: any positive cost can never pass; a check (cost 0) is allowed
/// with nothing remaining. The state is left as it is.
Evaluation evaluateBlocked(const BucketState& state, std::int64_t cost) {
  Evaluation e;
  e.next = state;
  e.outcome.remaining = 0;
  if (cost > 0) {
    e.outcome.allowed = false;
    e.outcome.never = true;
    e.outcome.retry_after_us = kRetryNever;
  }
  return e;
}

}  // namespace

std::string_view algorithmName(Algorithm algorithm) {
  for (const auto& [value, name] : kNames) {
    if (value == algorithm) {
      return name;
    }
  }
  return "unknown";
}

std::string_view algorithmCode(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kFixedWindow:
      return "fw";
    case Algorithm::kSlidingWindowLog:
      return "swl";
    case Algorithm::kSlidingWindowCounter:
      return "swc";
    case Algorithm::kTokenBucket:
      return "tb";
    case Algorithm::kLeakyBucket:
      return "lb";
    case Algorithm::kSketch:
      return "sk";
    case Algorithm::kConcurrency:
      return "cc";
  }
  return "unknown";
}

std::optional<Algorithm> parseAlgorithm(std::string_view name) {
  for (const auto& [value, spelling] : kNames) {
    if (spelling == name) {
      return value;
    }
  }
  return std::nullopt;
}

std::optional<Algorithm> algorithmFromCode(std::string_view code) {
  for (const auto& [value, spelling] : kNames) {
    if (algorithmCode(value) == code) {
      return value;
    }
  }
  return std::nullopt;
}

namespace {

constexpr std::int64_t kPlausible = std::int64_t{1} << 53;

bool within(std::int64_t value) { return value >= -kPlausible && value <= kPlausible; }

bool plausibleLog(const std::vector<LogEntry>& log) {
  Micros previous = -kPlausible;
  std::int64_t total = 0;
  for (const LogEntry& entry : log) {
    if (!within(entry.at) || entry.at < previous || entry.cost <= 0 || entry.cost > kPlausible) {
      return false;
    }
    previous = entry.at;
    total += entry.cost;  // at most 2^53 per entry: no overflow before the check below
    if (total > kPlausible) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool plausibleState(Algorithm algorithm, const BucketState& state) {
  if (!within(state.a) || !within(state.b) || !within(state.c)) {
    return false;
  }
  switch (algorithm) {
    case Algorithm::kFixedWindow:
      return state.b >= 0 && state.log.empty();
    case Algorithm::kSlidingWindowLog:
      return (state.b == 0 || state.b == 1) && plausibleLog(state.log);
    case Algorithm::kSlidingWindowCounter:
      return state.b >= 0 && state.c >= 0 && state.log.empty();
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket:
      return state.c >= 0 && state.log.empty();
    case Algorithm::kSketch:
      return false;  // sketches keep no per-key state
    case Algorithm::kConcurrency:
      // The leases (expiry, lease number): at most max_in_flight's bound of them.
      return state.log.size() <= 10'000 &&
             std::all_of(state.log.begin(), state.log.end(), [](const LogEntry& lease) {
               return lease.at > 0 && lease.cost > 0 && lease.cost <= kMaxLeaseNumber;
             });
  }
  return false;
}

Evaluation evaluate(const LimitParams& params, const BucketState& state, Micros now,
                    std::int64_t cost) {
  return evaluate(params, state, now, cost, 0);
}

Evaluation evaluate(const LimitParams& params, const BucketState& state, Micros now,
                    std::int64_t cost, LeaseNumber lease) {
  cost = std::max<std::int64_t>(cost, 0);
  if (params.limit <= 0 || params.window_us <= 0) {
    return evaluateBlocked(state, cost);
  }
  switch (params.algorithm) {
    case Algorithm::kFixedWindow:
      return limiter_detail::evaluateFixedWindow(params, state, now, cost);
    case Algorithm::kSlidingWindowLog:
      return limiter_detail::evaluateSlidingWindowLog(params, state, now, cost);
    case Algorithm::kSlidingWindowCounter:
      return limiter_detail::evaluateSlidingWindowCounter(params, state, now, cost);
    case Algorithm::kTokenBucket:
      return limiter_detail::evaluateGcra(params, state, now, cost, /*leaky=*/false);
    case Algorithm::kLeakyBucket:
      return limiter_detail::evaluateGcra(params, state, now, cost, /*leaky=*/true);
    case Algorithm::kSketch:
      // The stores evaluate sketch limits on the rule's shared sketch (evaluateSketch); on a
      // bucket of its own a sketch is a sketch without collisions: sliding_window_counter.
      return limiter_detail::evaluateSlidingWindowCounter(params, state, now, cost);
    case Algorithm::kConcurrency:
      return limiter_detail::evaluateConcurrency(params, state, now, cost, lease);
  }
  return evaluateBlocked(state, cost);
}

std::string_view refundRefusal(const LimitParams& params) {
  if (params.algorithm == Algorithm::kSketch) {
    return "a sketch limit cannot take a refund: its conservative update raises counters "
           "that other clients share, which cannot be undone";
  }
  return {};
}

namespace {

/// The state after a refund (refund = true) or a charge that lands whatever the limit says.
BucketState changed(const LimitParams& params, const BucketState& state, Micros now,
                    std::int64_t amount, bool refund) {
  switch (params.algorithm) {
    case Algorithm::kFixedWindow:
      return refund ? limiter_detail::refundFixedWindow(params, state, now, amount)
                    : limiter_detail::chargeFixedWindow(params, state, now, amount);
    case Algorithm::kSlidingWindowLog:
      return refund ? limiter_detail::refundSlidingWindowLog(params, state, now, amount)
                    : limiter_detail::chargeSlidingWindowLog(params, state, now, amount);
    case Algorithm::kSlidingWindowCounter:
    case Algorithm::kSketch:  // on a bucket of its own: a sliding_window_counter
      return refund ? limiter_detail::refundSlidingWindowCounter(params, state, now, amount)
                    : limiter_detail::chargeSlidingWindowCounter(params, state, now, amount);
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket: {
      const bool leaky = params.algorithm == Algorithm::kLeakyBucket;
      return refund ? limiter_detail::refundGcra(params, state, now, amount, leaky)
                    : limiter_detail::chargeGcra(params, state, now, amount, leaky);
    }
    case Algorithm::kConcurrency:
      // Only a refund that names a lease releases one (refund() below); a charge never
      // takes one.
      return limiter_detail::checkConcurrency(params, state, now).next;
  }
  return state;
}

/// A change applied, answered with what a check says on the new state.
Evaluation applied(const LimitParams& params, const BucketState& state, Micros now,
                   std::int64_t amount, bool refund) {
  BucketState next;
  const BucketState* target = &state;
  if (params.limit > 0 && params.window_us > 0 && amount > 0) {
    next = changed(params, state, now, amount, refund);
    target = &next;
  }
  if (params.count_rejected) {
    // The answer is a check: it records nothing, not even as a rejected attempt.
    LimitParams check = params;
    check.count_rejected = false;
    return evaluate(check, *target, now, 0);
  }
  return evaluate(params, *target, now, 0);
}

}  // namespace

Evaluation refund(const LimitParams& params, const BucketState& state, Micros now,
                  std::int64_t amount) {
  return applied(params, state, now, amount, /*refund=*/true);
}

Evaluation refund(const LimitParams& params, const BucketState& state, Micros now,
                  std::int64_t amount, LeaseNumber lease) {
  if (params.algorithm == Algorithm::kConcurrency && params.limit > 0 && params.window_us > 0) {
    return limiter_detail::refundConcurrency(params, state, now, amount, lease);
  }
  return applied(params, state, now, amount, /*refund=*/true);
}

Evaluation chargeAnyway(const LimitParams& params, const BucketState& state, Micros now,
                        std::int64_t cost) {
  return applied(params, state, now, cost, /*refund=*/false);
}

}  // namespace sluice
