// Refunds, reports and envoy's counting (store.hpp: StoreLimit::refund, Charge), on the
// memory store (C++ limiter) and a real redis-server (Lua), with the expected answers of
// each algorithm, then random traces mixing them compared field by field.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "conformance/conformance_harness.hpp"

namespace sluice::conformance {
namespace {

constexpr Micros kMs = kMicrosPerMilli;
constexpr Micros kSec = kMicrosPerSecond;

enum class Op { kCharge, kRefund, kReport, kEvery };

const char* opName(Op op) {
  switch (op) {
    case Op::kCharge:
      return "charge";
    case Op::kRefund:
      return "refund";
    case Op::kReport:
      return "report";
    case Op::kEvery:
      return "every";
  }
  return "?";
}

LimitParams params(Algorithm algorithm, std::int64_t limit, Micros window) {
  LimitParams p;
  p.algorithm = algorithm;
  p.limit = limit;
  p.window_us = window;
  return p;
}

StoreRequest requestOf(std::vector<StoreLimit> limits, Op op, std::int64_t cost) {
  for (StoreLimit& limit : limits) {
    limit.refund = op == Op::kRefund;
  }
  StoreRequest request = clientRequest(std::move(limits), cost, "refund-client");
  request.charge = op == Op::kReport  ? Charge::kReport
                   : op == Op::kEvery ? Charge::kEvery
                                      : Charge::kAllOrNothing;
  return request;
}

StoreLimit limitOf(const std::string& key, const LimitParams& p) {
  StoreLimit limit;
  limit.key = key;
  limit.params = p;
  return limit;
}

struct Step {
  Micros at = 0;  ///< offset from kT0
  Op op = Op::kCharge;
  std::int64_t cost = 1;
  bool allowed = true;  ///< the request's verdict
  std::int64_t remaining = 0;
};

/// Runs `steps` on one limit against both stores, checking verdict and remaining.
void runSteps(const LimitParams& p, const std::vector<Step>& steps) {
  StorePair pair(testPrefix());
  static int run = 0;  // a test may run several sequences: each on a bucket of its own
  const StoreLimit limit = limitOf("steps" + std::to_string(++run), p);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    pair.clock().set(kT0 + s.at);
    const StoreRequest request = requestOf({limit}, s.op, s.cost);
    for (Store* store : {&pair.memory(), &pair.redis()}) {
      SCOPED_TRACE(std::string(store->kind()) + " step " + std::to_string(i) + " (" + opName(s.op) +
                   " " + std::to_string(s.cost) + ")");
      auto r = pair.run(*store, request);
      ASSERT_TRUE(r.ok()) << r.error().message;
      EXPECT_EQ(r->allowed, s.allowed) << str(r->outcomes.at(0));
      EXPECT_EQ(r->outcomes.at(0).remaining, s.remaining) << str(r->outcomes.at(0));
    }
  }
}

TEST(ConformanceRefundTest, FixedWindowRefundLowersTheWindowsCountFlooredAtZero) {
  runSteps(params(Algorithm::kFixedWindow, 3, kSec),
           {{0, Op::kCharge, 3, true, 0},
            {10 * kMs, Op::kCharge, 1, false, 0},
            {20 * kMs, Op::kRefund, 2, true, 2},
            {30 * kMs, Op::kCharge, 2, true, 0},
            {40 * kMs, Op::kRefund, 10, true, 3},  // floored: never more than the limit
            {50 * kMs, Op::kCharge, 3, true, 0},
            {60 * kMs, Op::kCharge, 1, false, 0},
            // A refund of the previous window's hits gives nothing in this one.
            {kSec, Op::kCharge, 1, true, 2},
            {kSec + 1, Op::kRefund, 5, true, 3}});
}

TEST(ConformanceRefundTest, SlidingWindowCounterRefundTakesFromTheCurrentWindowFirst) {
  runSteps(params(Algorithm::kSlidingWindowCounter, 10, kSec),
           {{0, Op::kCharge, 6, true, 4},
            {1250 * kMs, Op::kCharge, 4, true, 1},  // 6 * 0.75 + 4 = 8.5
            // curr 4 -> 0, prev 6 -> 5: 5 * 0.75 = 3.75 -> 6 remaining
            {1250 * kMs, Op::kRefund, 5, true, 6},
            {1250 * kMs, Op::kRefund, 100, true, 10}});
}

TEST(ConformanceRefundTest, SlidingWindowLogRefundRemovesTheNewestEntries) {
  runSteps(params(Algorithm::kSlidingWindowLog, 3, kSec),
           {{0, Op::kCharge, 1, true, 2},
            {100 * kMs, Op::kCharge, 2, true, 0},
            {200 * kMs, Op::kCharge, 1, false, 0},
            {300 * kMs, Op::kRefund, 1, true, 1},   // the entry of 100 ms keeps 1
            {1050 * kMs, Op::kCharge, 2, true, 0},  // the entry of 0 aged out
            {1050 * kMs, Op::kRefund, 9, true, 3}});
}

TEST(ConformanceRefundTest, TokenBucketRefundMovesTheArrivalTimeBackNeverBeforeNow) {
  runSteps(params(Algorithm::kTokenBucket, 10, kSec),
           {{0, Op::kCharge, 10, true, 0},
            {0, Op::kCharge, 1, false, 0},
            {0, Op::kRefund, 4, true, 4},
            {0, Op::kRefund, 100, true, 10},  // a full bucket, no more
            {0, Op::kCharge, 10, true, 0},
            {0, Op::kCharge, 1, false, 0}});
}

TEST(ConformanceRefundTest, LeakyBucketAndWarmupTakeRefundsToo) {
  LimitParams leaky = params(Algorithm::kLeakyBucket, 10, kSec);
  leaky.burst = 4;
  runSteps(leaky, {{0, Op::kCharge, 4, true, 0},
                   {0, Op::kRefund, 2, true, 2},
                   {0, Op::kCharge, 2, true, 0},
                   {0, Op::kCharge, 1, false, 0}});
  LimitParams warm = params(Algorithm::kTokenBucket, 10, kSec);
  warm.warmup_us = 2 * kSec;
  // A cold bucket's 10 hits cost 2 s (the warm-up surcharge doubles them); a refund gives
  // back hits at the stable interval (3 x 100 ms), so the bucket is still empty after it.
  runSteps(warm, {{0, Op::kCharge, 10, true, 0},
                  {0, Op::kRefund, 3, true, 0},
                  {0, Op::kRefund, 7, true, 0},
                  {0, Op::kRefund, 30, true, 10}});
}

TEST(ConformanceReportTest, AReportLandsPastTheLimitAndLaterRequestsWaitForTheDebt) {
  runSteps(params(Algorithm::kFixedWindow, 5, kSec),
           {{0, Op::kCharge, 2, true, 3},
            {10 * kMs, Op::kReport, 8, true, 0},   // 10 of 5: never denied, remaining 0
            {20 * kMs, Op::kCharge, 0, false, 0},  // a check now denies
            {30 * kMs, Op::kRefund, 4, true, 0},   // 6 of 5: still over
            {40 * kMs, Op::kRefund, 2, true, 1},
            {kSec, Op::kCharge, 5, true, 0}});
  // Token bucket: the debt is capped at one bucket beyond empty (25 hits count as 20: the
  // bucket is empty for 1 s more), then one token comes back per 100 ms.
  runSteps(params(Algorithm::kTokenBucket, 10, kSec), {{0, Op::kReport, 25, true, 0},
                                                       {1099 * kMs, Op::kCharge, 1, false, 0},
                                                       {1100 * kMs, Op::kCharge, 1, true, 0}});
}

TEST(ConformanceEveryTest, EveryLimitIsCountedDeniedOrNotAsEnvoyDoes) {
  StorePair pair(testPrefix());
  const StoreLimit loose = limitOf("every:loose", params(Algorithm::kFixedWindow, 10, kSec));
  const StoreLimit tight = limitOf("every:tight", params(Algorithm::kFixedWindow, 1, kSec));
  for (Store* store : {&pair.memory(), &pair.redis()}) {
    SCOPED_TRACE(std::string(store->kind()));
    const std::string k = std::string(store->kind());
    StoreLimit a = loose;
    StoreLimit b = tight;
    a.key += k;
    b.key += k;
    ASSERT_TRUE(pair.run(*store, requestOf({a, b}, Op::kEvery, 1))->allowed);
    auto second = pair.run(*store, requestOf({a, b}, Op::kEvery, 1));
    ASSERT_TRUE(second.ok());
    EXPECT_FALSE(second->allowed);
    EXPECT_TRUE(second->outcomes[0].allowed);
    EXPECT_EQ(second->outcomes[0].remaining, 8) << "the allowed limit is charged";
    EXPECT_FALSE(second->outcomes[1].allowed);
    EXPECT_EQ(second->outcomes[1].retry_after_us, kSec) << str(second->outcomes[1]);
    // The denied limit counted too: 2 of 1, so a refund of 1 leaves it still full.
    auto refund = pair.run(*store, requestOf({b}, Op::kRefund, 1));
    ASSERT_TRUE(refund.ok());
    EXPECT_EQ(refund->outcomes[0].remaining, 0);
    // All or nothing, for contrast: the loose limit is not charged by a denied request.
    auto third = pair.run(*store, requestOf({a, b}, Op::kCharge, 1));
    ASSERT_TRUE(third.ok());
    EXPECT_FALSE(third->allowed);
    EXPECT_EQ(third->outcomes[0].remaining, 8);
  }
}

TEST(ConformanceEveryTest, ARefundedDescriptorNeverDeniesTheRequest) {
  StorePair pair(testPrefix());
  for (Store* store : {&pair.memory(), &pair.redis()}) {
    SCOPED_TRACE(std::string(store->kind()));
    StoreLimit charged = limitOf(std::string("mixed:charged") + std::string(store->kind()),
                                 params(Algorithm::kFixedWindow, 5, kSec));
    StoreLimit full = limitOf(std::string("mixed:full") + std::string(store->kind()),
                              params(Algorithm::kFixedWindow, 1, kSec));
    ASSERT_TRUE(pair.run(*store, requestOf({full}, Op::kReport, 3))->allowed);
    full.refund = true;
    StoreRequest mixed = clientRequest({charged, full}, 1, "refund-client");
    auto r = pair.run(*store, mixed);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->allowed) << "a refund never denies";
    EXPECT_EQ(r->outcomes[0].remaining, 4);
    EXPECT_EQ(r->outcomes[1].remaining, 0) << "3 - 1 = 2 of 1: still over";
  }
}

// Random traces mixing charges, refunds, reports and counted requests: the Lua scripts
// answer exactly like the C++ limiter, and a refund never leaves more than a fresh bucket.
class RandomRefundTraceTest : public ::testing::TestWithParam<Algorithm> {};

TEST_P(RandomRefundTraceTest, LuaAgreesWithTheCppLimiter) {
  StorePair pair(testPrefix());
  std::mt19937_64 rng(0xbeef + static_cast<int>(GetParam()));
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  for (int t = 0; t < 8; ++t) {
    SCOPED_TRACE("trace " + std::to_string(t));
    LimitParams p = params(GetParam(), pick(1, 12), pick(0, 1) == 0 ? kSec : 250 * kMs + 3);
    if (GetParam() == Algorithm::kTokenBucket || GetParam() == Algorithm::kLeakyBucket) {
      p.burst = pick(0, 1) == 0 ? 0 : pick(1, 15);
    }
    if (GetParam() == Algorithm::kTokenBucket && pick(0, 1) == 0) {
      p.warmup_us = pick(1, 3 * p.window_us);
    }
    p.count_rejected = pick(0, 3) == 0;
    const StoreLimit limit = limitOf("random" + std::to_string(t), p);
    StoreLimit other = limitOf("random-other" + std::to_string(t),
                               params(Algorithm::kFixedWindow, pick(1, 8), kSec));
    LimitParams fresh_params = p;
    Micros now = kT0 + pick(0, 3 * kSec);
    for (int s = 0; s < 200; ++s) {
      now += pick(0, 2) == 0 ? 0 : pick(1, p.window_us / 5 + 1);
      const Op op = static_cast<Op>(pick(0, 3));
      const std::int64_t cost = pick(0, 9) == 0 ? pick(10, 40) : pick(0, 4);
      pair.clock().set(now);
      const StoreRequest request =
          pick(0, 3) == 0 ? requestOf({limit, other}, op, cost) : requestOf({limit}, op, cost);
      auto m = pair.run(pair.memory(), request);
      auto r = pair.run(pair.redis(), request);
      ASSERT_TRUE(m.ok()) << m.error().message;
      ASSERT_TRUE(r.ok()) << r.error().message;
      ASSERT_EQ(m->allowed, r->allowed) << "step " << s << " " << opName(op) << " " << cost;
      for (std::size_t k = 0; k < request.limits.size(); ++k) {
        ASSERT_TRUE(sameOutcome(m->outcomes[k], r->outcomes[k]))
            << "step " << s << " " << opName(op) << " cost " << cost << " limit " << k << " ("
            << algorithmName(p.algorithm) << " L=" << p.limit << " W=" << p.window_us
            << " B=" << p.burst << " warmup=" << p.warmup_us
            << " count_rejected=" << p.count_rejected << "): memory " << str(m->outcomes[k])
            << " vs redis " << str(r->outcomes[k]);
      }
      if (op == Op::kRefund) {
        // Never more than a fresh bucket: what a check on no state at all says.
        const Evaluation fresh = sluice::evaluate(fresh_params, BucketState{}, now, 0);
        EXPECT_LE(m->outcomes[0].remaining, fresh.outcome.remaining);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, RandomRefundTraceTest,
                         ::testing::Values(Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog,
                                           Algorithm::kSlidingWindowCounter,
                                           Algorithm::kTokenBucket, Algorithm::kLeakyBucket),
                         [](const auto& info) { return std::string(algorithmName(info.param)); });

}  // namespace
}  // namespace sluice::conformance
