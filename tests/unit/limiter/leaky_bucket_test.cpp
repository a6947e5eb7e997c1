#include <gtest/gtest.h>

#include "sluice/limiter/limiter.hpp"
#include "support/bucket_driver.hpp"

namespace sluice {
namespace {

using test::BucketDriver;
using test::kT0;
using test::makeParams;

constexpr Micros kSecond = kMicrosPerSecond;

LimitParams leakyParams(std::int64_t limit, Micros window, std::int64_t burst) {
  LimitParams p = makeParams(Algorithm::kLeakyBucket, limit, window);
  p.burst = burst;
  return p;
}

TEST(LeakyBucketTest, QueuedRequestsLeaveOneIntervalApart) {
  BucketDriver b(leakyParams(10, kSecond, 3));
  EXPECT_EQ(b.hit(kT0).delay_us, 0);
  EXPECT_EQ(b.hit(kT0).delay_us, 100'000);
  Outcome third = b.hit(kT0);
  EXPECT_EQ(third.delay_us, 200'000);
  EXPECT_EQ(third.remaining, 0);
}

TEST(LeakyBucketTest, AFullQueueDenies) {
  BucketDriver b(leakyParams(10, kSecond, 3));
  for (int i = 0; i < 3; ++i) {
    b.hit(kT0);
  }
  Outcome overflow = b.hit(kT0 + 1);
  EXPECT_FALSE(overflow.allowed);
  EXPECT_EQ(overflow.delay_us, 0);
  EXPECT_EQ(overflow.retry_after_us, 99'999);
  b.expectExactRetry(kT0 + 1, overflow.retry_after_us);
  // One slot drained: the new request queues behind the two still waiting.
  Outcome next = b.hit(kT0 + 100'000);
  EXPECT_TRUE(next.allowed);
  EXPECT_EQ(next.delay_us, 200'000);
}

TEST(LeakyBucketTest, DelaysRoundUpForAFractionalInterval) {
  BucketDriver b(leakyParams(3, kSecond, 3));
  EXPECT_EQ(b.hit(kT0).delay_us, 0);
  EXPECT_EQ(b.hit(kT0).delay_us, 333'334);
  EXPECT_EQ(b.hit(kT0).delay_us, 666'667);
  EXPECT_FALSE(b.hit(kT0).allowed);
}

TEST(LeakyBucketTest, AnIdleQueueServesAtOnce) {
  BucketDriver b(leakyParams(10, kSecond, 3));
  b.hit(kT0);
  b.hit(kT0);
  EXPECT_EQ(b.hit(kT0 + 250'000).delay_us, 0);
  EXPECT_EQ(b.lastTtl(), 100'000);
}

TEST(LeakyBucketTest, CostAboveCapacityNeverPasses) {
  BucketDriver b(leakyParams(10, kSecond, 3));
  Outcome o = b.hit(kT0, 4);
  EXPECT_TRUE(o.never);
  EXPECT_EQ(o.retry_after_us, kRetryNever);
}

TEST(LeakyBucketTest, IgnoresWarmup) {
  LimitParams p = leakyParams(10, kSecond, 2);
  p.warmup_us = 5 * kSecond;
  BucketDriver b(p);
  EXPECT_EQ(b.hit(kT0).delay_us, 0);
  EXPECT_EQ(b.hit(kT0).delay_us, 100'000);
}

}  // namespace
}  // namespace sluice
