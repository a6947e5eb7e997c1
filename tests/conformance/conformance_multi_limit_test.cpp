// Requests with several limits, against the memory store (C++) and a real redis-server
// (Lua): each limit charged its own cost (envoy's per-descriptor hits_addend), all or
// nothing; a denied request reports the true state of every limit it did not charge; quota
// mode. Fixed cases first, then random traces compared field by field.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "conformance/conformance_harness.hpp"

namespace sluice::conformance {
namespace {

constexpr Micros kSec = kMicrosPerSecond;
constexpr Micros kHour = 3600 * kSec;

StoreLimit limitOf(std::string key, Algorithm algorithm, std::int64_t limit, Micros window,
                   std::optional<std::int64_t> cost = std::nullopt) {
  StoreLimit l;
  l.key = std::move(key);
  l.params.algorithm = algorithm;
  l.params.limit = limit;
  l.params.window_us = window;
  l.cost = cost;
  return l;
}

class MultiLimitTest : public ::testing::Test {
 protected:
  MultiLimitTest() : pair_(testPrefix()) { pair_.clock().set(kT0 + 5 * kSec); }

  /// Runs `request` on both stores; expects identical answers and returns the memory one.
  StoreResponse both(const StoreRequest& request) {
    auto m = pair_.run(pair_.memory(), request);
    auto r = pair_.run(pair_.redis(), request);
    EXPECT_TRUE(m.ok() && r.ok());
    if (!m.ok() || !r.ok()) {
      return {};
    }
    EXPECT_EQ(m->allowed, r->allowed);
    EXPECT_EQ(m->outcomes.size(), r->outcomes.size());
    for (std::size_t i = 0; i < m->outcomes.size() && i < r->outcomes.size(); ++i) {
      EXPECT_TRUE(sameOutcome(m->outcomes[i], r->outcomes[i]))
          << "limit " << i << ": memory " << str(m->outcomes[i]) << " vs redis "
          << str(r->outcomes[i]);
    }
    return *m;
  }

  StorePair pair_;
};

TEST_F(MultiLimitTest, EachLimitIsChargedItsOwnCost) {
  StoreRequest request;
  request.limits = {limitOf("a", Algorithm::kFixedWindow, 10, kHour, 3),
                    limitOf("b", Algorithm::kTokenBucket, 10, kHour, 1),
                    limitOf("c", Algorithm::kSlidingWindowLog, 10, kHour)};
  request.cost = 2;  // c uses the request's cost
  StoreResponse first = both(request);
  ASSERT_TRUE(first.allowed);
  EXPECT_EQ(first.outcomes[0].remaining, 7);
  EXPECT_EQ(first.outcomes[1].remaining, 9);
  EXPECT_EQ(first.outcomes[2].remaining, 8);
  StoreResponse second = both(request);
  EXPECT_EQ(second.outcomes[0].remaining, 4);
  EXPECT_EQ(second.outcomes[1].remaining, 8);
  EXPECT_EQ(second.outcomes[2].remaining, 6);
}

TEST_F(MultiLimitTest, ALimitWhoseCostDoesNotFitDeniesAndNothingIsCharged) {
  StoreRequest request;
  request.limits = {limitOf("a", Algorithm::kFixedWindow, 10, kHour, 1),
                    limitOf("b", Algorithm::kFixedWindow, 5, kHour, 4)};
  ASSERT_TRUE(both(request).allowed);  // a 9, b 1
  StoreResponse denied = both(request);
  ASSERT_FALSE(denied.allowed);
  EXPECT_TRUE(denied.outcomes[0].allowed);
  EXPECT_EQ(denied.outcomes[0].remaining, 9) << "a was not charged";
  EXPECT_FALSE(denied.outcomes[1].allowed);
  EXPECT_EQ(denied.outcomes[1].remaining, 1);
  StoreRequest check = request;
  check.limits[0].cost = 0;
  check.limits[1].cost = 0;
  StoreResponse after = both(check);
  EXPECT_EQ(after.outcomes[0].remaining, 9);
  EXPECT_EQ(after.outcomes[1].remaining, 1);
}

TEST_F(MultiLimitTest, ADeniedAnswerReportsTheTrueStateOfTheLimitsItDidNotCharge) {
  // Issue 13: rules a 10/hour and b 1/hour, a request with both, twice. The second is
  // denied by b and must say 9 for a (what a check says), not 8.
  for (Algorithm algorithm :
       {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
        Algorithm::kTokenBucket, Algorithm::kLeakyBucket}) {
    SCOPED_TRACE(std::string(algorithmName(algorithm)));
    const std::string tag(algorithmName(algorithm));
    StoreRequest request;
    request.limits = {limitOf(tag + ":a", algorithm, 10, kHour),
                      limitOf(tag + ":b", algorithm, 1, kHour)};
    StoreResponse first = both(request);
    ASSERT_TRUE(first.allowed);
    EXPECT_EQ(first.outcomes[0].remaining, 9);
    StoreResponse second = both(request);
    ASSERT_FALSE(second.allowed);
    EXPECT_TRUE(second.outcomes[0].allowed);
    EXPECT_EQ(second.outcomes[0].remaining, 9);
    EXPECT_EQ(second.outcomes[0].retry_after_us, 0);
    EXPECT_GT(second.outcomes[0].reset_after_us, 0);
    StoreRequest check = request;
    check.cost = 0;
    StoreResponse probe = both(check);
    EXPECT_EQ(probe.outcomes[0].remaining, 9);
    EXPECT_EQ(probe.outcomes[0].reset_after_us, second.outcomes[0].reset_after_us);
  }
}

TEST_F(MultiLimitTest, CountRejectedLimitsOfADeniedRequestReportTheirCharge) {
  StoreRequest request;
  request.limits = {limitOf("a", Algorithm::kFixedWindow, 10, kHour),
                    limitOf("b", Algorithm::kFixedWindow, 1, kHour)};
  request.limits[0].params.count_rejected = true;
  ASSERT_TRUE(both(request).allowed);  // a 9, b 0
  StoreResponse denied = both(request);
  ASSERT_FALSE(denied.allowed);
  EXPECT_EQ(denied.outcomes[0].remaining, 8) << "count_rejected records the attempt";
}

TEST_F(MultiLimitTest, QuotaModeDeniesOnlyWhenEveryQuotaGroupIsOver) {
  StoreRequest request;
  request.limits = {limitOf("q1", Algorithm::kFixedWindow, 1, kHour),
                    limitOf("q2", Algorithm::kFixedWindow, 2, kHour),
                    limitOf("plain", Algorithm::kFixedWindow, 100, kHour)};
  request.limits[0].quota_group = 0;
  request.limits[1].quota_group = 1;
  StoreResponse r1 = both(request);  // q1 0, q2 1
  ASSERT_TRUE(r1.allowed);
  StoreResponse r2 = both(request);  // q1 over, q2 still has room: allowed, q1 not charged
  ASSERT_TRUE(r2.allowed);
  EXPECT_FALSE(r2.outcomes[0].allowed);
  EXPECT_TRUE(r2.outcomes[1].allowed);
  EXPECT_EQ(r2.outcomes[1].remaining, 0);
  EXPECT_EQ(r2.outcomes[2].remaining, 98);
  StoreResponse r3 = both(request);  // both quota groups over: denied, nothing charged
  ASSERT_FALSE(r3.allowed);
  EXPECT_EQ(r3.outcomes[2].remaining, 98) << "plain was not charged";
  // An ordinary limit over its limit denies whatever the quotas say.
  StoreRequest strict = request;
  strict.limits[2].params.limit = 2;  // plain has counted 2: a third is over
  strict.limits[0].key = "q1-fresh";
  StoreResponse r4 = both(strict);
  EXPECT_FALSE(r4.allowed);
  EXPECT_TRUE(r4.outcomes[0].allowed);
  EXPECT_EQ(r4.outcomes[0].remaining, 1) << "the fresh quota was not charged";
}

TEST_F(MultiLimitTest, TheSameKeyTwiceWithDifferentCostsSeesTheStateBeforeTheRequest) {
  StoreRequest request;
  request.limits = {limitOf("same", Algorithm::kFixedWindow, 10, kHour, 2),
                    limitOf("same", Algorithm::kFixedWindow, 10, kHour, 5)};
  StoreResponse r = both(request);
  ASSERT_TRUE(r.allowed);
  EXPECT_EQ(r.outcomes[0].remaining, 8);
  EXPECT_EQ(r.outcomes[1].remaining, 5);
}

/// Random multi-limit traces: random algorithms, per-limit costs, shadow, count_rejected
/// and quota groups; every field of every outcome compared.
TEST(RandomMultiLimitTraceTest, PerLimitCostsAndQuotaGroupsDecideIdentically) {
  StorePair pair(testPrefix());
  std::mt19937_64 rng(0xe4701);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  static constexpr Micros kWindows[] = {250 * kMicrosPerMilli, kSec, 3 * kSec + 7, 60 * kSec};
  for (int t = 0; t < 10; ++t) {
    SCOPED_TRACE("trace " + std::to_string(t));
    std::vector<StoreLimit> limits;
    const int n = static_cast<int>(pick(2, 4));
    Micros longest = 1;
    for (int i = 0; i < n; ++i) {
      StoreLimit l = limitOf("t" + std::to_string(t) + ":" + std::to_string(i),
                             static_cast<Algorithm>(pick(0, 4)), pick(1, 12), kWindows[pick(0, 3)]);
      if (l.params.algorithm == Algorithm::kTokenBucket ||
          l.params.algorithm == Algorithm::kLeakyBucket) {
        l.params.burst = pick(0, 1) == 0 ? 0 : pick(1, 15);
      }
      l.params.count_rejected = pick(0, 4) == 0;
      l.shadow = pick(0, 5) == 0;
      l.quota_group = pick(0, 2) == 0 ? static_cast<int>(pick(0, 1)) : -1;
      longest = std::max(longest, l.params.window_us);
      limits.push_back(l);
    }
    Micros now = kT0 + pick(0, 10 * kSec);
    for (int s = 0; s < 200; ++s) {
      now += pick(0, 2) == 0 ? 0 : pick(1, longest / 6 + 1);
      pair.clock().set(now);
      StoreRequest request{limits, pick(0, 3)};
      for (StoreLimit& l : request.limits) {
        const std::int64_t c = pick(0, 9);
        l.cost = c < 4 ? std::optional<std::int64_t>() : c < 8 ? pick(0, 3) : pick(5, 20);
      }
      auto m = pair.run(pair.memory(), request);
      auto r = pair.run(pair.redis(), request);
      ASSERT_TRUE(m.ok() && r.ok());
      ASSERT_EQ(m->allowed, r->allowed) << "step " << s;
      for (int k = 0; k < n; ++k) {
        ASSERT_TRUE(sameOutcome(m->outcomes[k], r->outcomes[k]))
            << "step " << s << " limit " << k << " (" << algorithmName(limits[k].params.algorithm)
            << " L=" << limits[k].params.limit << " W=" << limits[k].params.window_us
            << " cost=" << request.limits[k].costOr(request.cost) << "): memory "
            << str(m->outcomes[k]) << " vs redis " << str(r->outcomes[k]);
      }
      if (!m->allowed) {
        // What the denied answer said of each limit it did not charge is what a check says.
        StoreRequest check = request;
        for (StoreLimit& l : check.limits) {
          l.cost = 0;
        }
        auto probe = pair.run(pair.memory(), check);
        auto probe_redis = pair.run(pair.redis(), check);
        ASSERT_TRUE(probe.ok() && probe_redis.ok());
        for (int k = 0; k < n; ++k) {
          if (m->outcomes[k].allowed && !limits[k].params.count_rejected) {
            ASSERT_TRUE(sameOutcome(m->outcomes[k], probe->outcomes[k]))
                << "step " << s << " limit " << k << ": denied answer " << str(m->outcomes[k])
                << " vs check " << str(probe->outcomes[k]);
          }
          ASSERT_TRUE(sameOutcome(probe->outcomes[k], probe_redis->outcomes[k]));
        }
      }
    }
  }
}

}  // namespace
}  // namespace sluice::conformance
