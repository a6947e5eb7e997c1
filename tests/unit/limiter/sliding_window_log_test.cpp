#include <gtest/gtest.h>

#include "sluice/limiter/limiter.hpp"
#include "support/bucket_driver.hpp"

namespace sluice {
namespace {

using test::BucketDriver;
using test::kT0;
using test::makeParams;

constexpr Micros kSecond = kMicrosPerSecond;

LimitParams logParams(std::int64_t limit, Micros window = kSecond) {
  return makeParams(Algorithm::kSlidingWindowLog, limit, window);
}

TEST(SlidingWindowLogTest, PreventsTheBurstAcrossAWindowBoundary) {
  BucketDriver b(logParams(5));
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(b.hit(kT0 + kSecond - 1).allowed);
  }
  Outcome after_boundary = b.hit(kT0 + kSecond);
  EXPECT_FALSE(after_boundary.allowed);
  EXPECT_EQ(after_boundary.retry_after_us, kSecond - 1);
}

TEST(SlidingWindowLogTest, AnEntryCountsForExactlyOneWindow) {
  BucketDriver b(logParams(1));
  EXPECT_TRUE(b.hit(kT0 + 500).allowed);
  EXPECT_FALSE(b.hit(kT0 + 500 + kSecond - 1).allowed);
  EXPECT_TRUE(b.hit(kT0 + 500 + kSecond).allowed);
}

TEST(SlidingWindowLogTest, RetryWaitsUntilEnoughCostAgesOut) {
  BucketDriver b(logParams(10));
  EXPECT_TRUE(b.hit(kT0, 3).allowed);
  EXPECT_TRUE(b.hit(kT0 + 100'000, 4).allowed);
  EXPECT_TRUE(b.hit(kT0 + 200'000, 2).allowed);
  // 9 used; a cost of 5 needs 4 to age out: the first two entries (3 + 4).
  Outcome o = b.hit(kT0 + 300'000, 5);
  ASSERT_FALSE(o.allowed);
  EXPECT_EQ(o.remaining, 1);
  EXPECT_EQ(o.retry_after_us, 100'000 + kSecond - 300'000);
  b.expectExactRetry(kT0 + 300'000, o.retry_after_us, 5);
}

TEST(SlidingWindowLogTest, MinIntervalSpacesAdmittedRequests) {
  LimitParams p = logParams(100);
  p.min_interval_us = 100'000;
  BucketDriver b(p);
  EXPECT_TRUE(b.hit(kT0).allowed);
  Outcome early = b.hit(kT0 + 40'000);
  EXPECT_FALSE(early.allowed);
  EXPECT_EQ(early.retry_after_us, 60'000);
  b.expectExactRetry(kT0 + 40'000, early.retry_after_us);
  EXPECT_TRUE(b.hit(kT0 + 100'000).allowed);
  EXPECT_EQ(b.lastTtl(), kSecond);
}

TEST(SlidingWindowLogTest, MinIntervalCountsFromAdmittedRequestsOnly) {
  LimitParams p = logParams(100);
  p.min_interval_us = 100'000;
  p.count_rejected = true;
  BucketDriver b(p);
  EXPECT_TRUE(b.hit(kT0).allowed);
  EXPECT_FALSE(b.hit(kT0 + 90'000).allowed);
  EXPECT_TRUE(b.hit(kT0 + 100'000).allowed);
}

TEST(SlidingWindowLogTest, CountRejectedKeepsAHammeringClientBlockedUntilItPauses) {
  LimitParams p = logParams(2);
  p.count_rejected = true;
  BucketDriver b(p);
  EXPECT_TRUE(b.hit(kT0).allowed);
  EXPECT_TRUE(b.hit(kT0 + 100'000).allowed);
  Outcome last;
  Micros t = kT0 + 200'000;
  for (; t < kT0 + 5 * kSecond; t += 100'000) {
    last = b.hit(t);
    ASSERT_FALSE(last.allowed) << (t - kT0);
  }
  t -= 100'000;
  // After the pause the attempts have aged out and the client is let in again.
  b.expectExactRetry(t, last.retry_after_us);
  EXPECT_EQ(last.retry_after_us, kSecond - 100'000);
}

TEST(SlidingWindowLogTest, WithoutCountRejectedAHammeringClientGetsTheRate) {
  BucketDriver b(logParams(2));
  int admitted = 0;
  for (Micros t = kT0; t < kT0 + 5 * kSecond; t += 100'000) {
    admitted += b.hit(t).allowed ? 1 : 0;
  }
  EXPECT_EQ(admitted, 10);
}

TEST(SlidingWindowLogTest, LogStaysBoundedUnderCountRejected) {
  LimitParams p = logParams(3);
  p.count_rejected = true;
  BucketDriver b(p);
  for (int i = 0; i < 10'000; ++i) {
    b.hit(kT0 + i * 10);
  }
  EXPECT_LE(b.state().log.size(), 5U);
}

TEST(SlidingWindowLogTest, CostAboveLimitNeverPasses) {
  BucketDriver b(logParams(3));
  Outcome o = b.hit(kT0, 4);
  EXPECT_FALSE(o.allowed);
  EXPECT_TRUE(o.never);
  EXPECT_EQ(o.retry_after_us, kRetryNever);
  EXPECT_TRUE(b.state().log.empty());
}

TEST(SlidingWindowLogTest, HitsZeroChecksWithoutConsuming) {
  LimitParams p = logParams(3);
  p.min_interval_us = kSecond;
  BucketDriver b(p);
  b.hit(kT0);
  Outcome check = b.hit(kT0 + 1, 0);
  EXPECT_TRUE(check.allowed);
  EXPECT_EQ(check.remaining, 2);
  EXPECT_EQ(b.state().log.size(), 1U);
}

TEST(SlidingWindowLogTest, ResetAfterIsWhenTheNewestEntryAgesOut) {
  BucketDriver b(logParams(3));
  b.hit(kT0);
  Outcome o = b.hit(kT0 + 300'000);
  EXPECT_EQ(o.remaining, 1);
  EXPECT_EQ(o.reset_after_us, kSecond);
  EXPECT_EQ(b.peek(kT0 + 400'000, 0).reset_after_us, 900'000);
}

TEST(SlidingWindowLogTest, AWallClockStepBackKeepsCountingLaterEntries) {
  BucketDriver b(logParams(2));
  EXPECT_TRUE(b.hit(kT0 + 500'000).allowed);
  // The clock steps back 300 ms: the entry "from the future" still counts...
  EXPECT_TRUE(b.hit(kT0 + 200'000).allowed);
  Outcome denied = b.hit(kT0 + 200'001);
  ASSERT_FALSE(denied.allowed);
  // ...and the oldest entry, now the one at 200 ms, ages out first.
  EXPECT_EQ(denied.retry_after_us, kSecond - 1);
  b.expectExactRetry(kT0 + 200'001, denied.retry_after_us);
}

}  // namespace
}  // namespace sluice
