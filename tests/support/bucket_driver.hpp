#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

#include "sluice/limiter/limiter.hpp"

namespace sluice::test {

/// 2023-11-14T22:13:20Z: a multiple of 1, 2, 4, 5 and 10 s, so windows of those start here.
inline constexpr Micros kT0 = 1'700'000'000LL * kMicrosPerSecond;

inline LimitParams makeParams(Algorithm algorithm, std::int64_t limit, Micros window_us) {
  LimitParams p;
  p.algorithm = algorithm;
  p.limit = limit;
  p.window_us = window_us;
  return p;
}

/// One bucket driven the way a store drives it: the next state is kept when the request is
/// allowed, or always with count_rejected.
class BucketDriver {
 public:
  explicit BucketDriver(LimitParams params) : params_(params) {}

  /// A request of `cost` at `now`, recorded as a store would.
  Outcome hit(Micros now, std::int64_t cost = 1) {
    Evaluation e = evaluate(params_, state_, now, cost);
    last_ttl_us_ = e.ttl_us;
    if (e.outcome.allowed || params_.count_rejected) {
      state_ = std::move(e.next);
    }
    return e.outcome;
  }

  /// What a request would get, without recording anything.
  Outcome peek(Micros now, std::int64_t cost = 1) const {
    return evaluate(params_, state_, now, cost).outcome;
  }

  /// Asserts that the same request is still denied one microsecond before `now + retry`
  /// and allowed at `now + retry` (both without recording).
  void expectExactRetry(Micros now, Micros retry, std::int64_t cost = 1) const {
    ASSERT_GT(retry, 0);
    EXPECT_FALSE(peek(now + retry - 1, cost).allowed) << "retry " << retry << " is too long";
    EXPECT_TRUE(peek(now + retry, cost).allowed) << "retry " << retry << " is too short";
  }

  const BucketState& state() const { return state_; }
  Micros lastTtl() const { return last_ttl_us_; }
  LimitParams& params() { return params_; }

 private:
  LimitParams params_;
  BucketState state_;
  Micros last_ttl_us_ = 0;
};

}  // namespace sluice::test
