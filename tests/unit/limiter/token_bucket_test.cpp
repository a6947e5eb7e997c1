#include <gtest/gtest.h>

#include <vector>

#include "sluice/limiter/limiter.hpp"
#include "support/bucket_driver.hpp"

namespace sluice {
namespace {

using test::BucketDriver;
using test::kT0;
using test::makeParams;

constexpr Micros kSecond = kMicrosPerSecond;

LimitParams tokenParams(std::int64_t limit, Micros window = kSecond, std::int64_t burst = 0) {
  LimitParams p = makeParams(Algorithm::kTokenBucket, limit, window);
  p.burst = burst;
  return p;
}

TEST(TokenBucketTest, AdmitsTheBurstAtOnce) {
  BucketDriver b(tokenParams(10));
  for (int i = 0; i < 10; ++i) {
    Outcome o = b.hit(kT0);
    ASSERT_TRUE(o.allowed) << i;
    EXPECT_EQ(o.remaining, 9 - i);
  }
  Outcome denied = b.hit(kT0);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.retry_after_us, 100'000);
  EXPECT_EQ(denied.reset_after_us, kSecond);
}

TEST(TokenBucketTest, RefillsOneTokenPerInterval) {
  BucketDriver b(tokenParams(10));
  for (int i = 0; i < 10; ++i) {
    b.hit(kT0);
  }
  EXPECT_FALSE(b.hit(kT0 + 99'999).allowed);
  EXPECT_TRUE(b.hit(kT0 + 100'000).allowed);
  EXPECT_FALSE(b.hit(kT0 + 100'000).allowed);
  Outcome later = b.hit(kT0 + 450'000);
  EXPECT_TRUE(later.allowed);
  EXPECT_EQ(later.remaining, 2);  // 3.5 tokens back, one taken
}

TEST(TokenBucketTest, FractionalIntervalIsExact) {
  // T = 1 s / 3 = 333333.33 us: three refills take exactly one second, not 999999 or 1000002.
  BucketDriver b(tokenParams(3));
  for (int i = 0; i < 3; ++i) {
    b.hit(kT0);
  }
  Outcome o = b.hit(kT0);
  EXPECT_EQ(o.retry_after_us, 333'334);
  b.expectExactRetry(kT0, o.retry_after_us);
  EXPECT_TRUE(b.hit(kT0 + 333'334).allowed);
  Outcome second = b.hit(kT0 + 333'334);
  EXPECT_EQ(second.retry_after_us, 666'667 - 333'334);
  b.expectExactRetry(kT0 + 333'334, second.retry_after_us);
  EXPECT_TRUE(b.hit(kT0 + 666'667).allowed);
  EXPECT_EQ(b.hit(kT0 + kSecond).retry_after_us, 0);
  EXPECT_FALSE(b.hit(kT0 + kSecond).allowed);
  EXPECT_EQ(b.peek(kT0 + kSecond, 0).reset_after_us, kSecond);
}

TEST(TokenBucketTest, BurstCanExceedTheRate) {
  BucketDriver b(tokenParams(10, kSecond, 25));
  int admitted = 0;
  for (int i = 0; i < 30; ++i) {
    admitted += b.hit(kT0).allowed ? 1 : 0;
  }
  EXPECT_EQ(admitted, 25);
  EXPECT_EQ(b.peek(kT0, 0).reset_after_us, 2'500'000);
}

TEST(TokenBucketTest, RetryForALargeCostWaitsForEnoughTokens) {
  BucketDriver b(tokenParams(10));
  b.hit(kT0, 8);
  Outcome o = b.hit(kT0 + 50'000, 5);
  ASSERT_FALSE(o.allowed);
  EXPECT_EQ(o.remaining, 2);
  EXPECT_EQ(o.retry_after_us, 250'000);  // 2.5 tokens held, 5 needed: 2.5 more at 100 ms
  b.expectExactRetry(kT0 + 50'000, o.retry_after_us, 5);
}

TEST(TokenBucketTest, CostAboveBurstNeverPasses) {
  BucketDriver b(tokenParams(10, kSecond, 4));
  Outcome o = b.hit(kT0, 5);
  EXPECT_TRUE(o.never);
  EXPECT_EQ(o.retry_after_us, kRetryNever);
  EXPECT_EQ(o.remaining, 4);
  EXPECT_TRUE(b.hit(kT0, 4).allowed);
}

TEST(TokenBucketTest, HugeCostAgainstASlowRateIsNeverWithoutOverflow) {
  // 10^9 hits (the request maximum) x one day per token overflowed int64 (found by
  // tests/fuzz/fuzz_limiter under UBSan).
  BucketDriver b(tokenParams(1, 86'400 * kSecond));
  Outcome o = b.hit(kT0, 1'000'000'000);
  EXPECT_TRUE(o.never);
  EXPECT_EQ(o.remaining, 1);
  EXPECT_TRUE(b.hit(kT0).allowed);
}

TEST(TokenBucketTest, HitsZeroChecksWithoutConsuming) {
  BucketDriver b(tokenParams(5));
  b.hit(kT0);
  EXPECT_EQ(b.hit(kT0, 0).remaining, 4);
  EXPECT_EQ(b.hit(kT0, 0).remaining, 4);
}

TEST(TokenBucketTest, CountRejectedEmptiesTheBucket) {
  LimitParams p = tokenParams(10);
  p.count_rejected = true;
  BucketDriver b(p);
  for (int i = 0; i < 10; ++i) {
    b.hit(kT0);
  }
  // Hammering every 50 ms (faster than one token per 100 ms) keeps the client out...
  Micros t = kT0;
  Outcome o;
  for (int i = 0; i < 40; ++i) {
    t += 50'000;
    o = b.hit(t);
    ASSERT_FALSE(o.allowed) << i;
  }
  // ...and each rejected attempt leaves the bucket empty: one token after T.
  EXPECT_EQ(o.retry_after_us, 100'000);
  EXPECT_EQ(o.reset_after_us, kSecond);
  b.expectExactRetry(t, o.retry_after_us);
}

TEST(TokenBucketTest, WithoutCountRejectedAHammeringClientGetsTheRate) {
  BucketDriver b(tokenParams(10));
  int admitted = 0;
  for (Micros t = kT0; t < kT0 + 2 * kSecond; t += 50'000) {
    admitted += b.hit(t).allowed ? 1 : 0;
  }
  EXPECT_EQ(admitted, 10 + 19);  // the burst, then one per 100 ms after the first
}

TEST(TokenBucketTest, WarmupStartsColdAndRampsToTheRate) {
  LimitParams p = tokenParams(10, kSecond, 1);
  p.warmup_us = 2 * kSecond;
  BucketDriver b(p);
  std::vector<Micros> admitted;
  for (Micros t = kT0; t < kT0 + 6 * kSecond; t += 1'000) {
    if (b.hit(t).allowed) {
      admitted.push_back(t);
    }
  }
  ASSERT_GT(admitted.size(), 10U);
  std::vector<Micros> gaps;
  for (std::size_t i = 1; i < admitted.size(); ++i) {
    gaps.push_back(admitted[i] - admitted[i - 1]);
  }
  // Guava's ramp: each permit costs its interval integrated over the stored time it takes,
  // from 3T when cold down to T at half the warm-up period: 2.9T, 2.7T, ..., 1.1T, then T.
  // The cold part lasts exactly the warm-up period (2 s).
  std::vector<Micros> expected;
  for (Micros gap = 290'000; gap > 100'000; gap -= 20'000) {
    expected.push_back(gap);
  }
  ASSERT_GT(gaps.size(), expected.size() + 10);
  for (std::size_t i = 0; i < gaps.size(); ++i) {
    EXPECT_EQ(gaps[i], i < expected.size() ? expected[i] : 100'000) << i;
  }
  EXPECT_EQ(admitted[expected.size()] - kT0, 2 * kSecond);
}

TEST(TokenBucketTest, WarmupCoolsDownAfterIdleness) {
  LimitParams p = tokenParams(10, kSecond, 1);
  p.warmup_us = kSecond;
  BucketDriver b(p);
  Micros t = kT0;
  for (; t < kT0 + 5 * kSecond; t += 1'000) {
    b.hit(t);
  }
  // Warm now: after an admission the next one follows after exactly T.
  t += 100'000;
  ASSERT_TRUE(b.hit(t).allowed);
  Outcome warm = b.hit(t);
  ASSERT_FALSE(warm.allowed);
  EXPECT_EQ(warm.retry_after_us, 100'000);
  // After idling for the warm-up period it is cold again: the next gap is about 3T.
  const Micros later = t + 10 * kSecond;
  ASSERT_TRUE(b.hit(later).allowed);
  Outcome cold = b.hit(later + 1);
  ASSERT_FALSE(cold.allowed);
  EXPECT_GT(cold.retry_after_us, 250'000);
  b.expectExactRetry(later + 1, cold.retry_after_us);
}

TEST(TokenBucketTest, WarmupKeepsTheAdmissionTestAndRetryExact) {
  LimitParams p = tokenParams(10, kSecond, 5);
  p.warmup_us = 3 * kSecond;
  BucketDriver b(p);
  int burst = 0;
  while (b.hit(kT0).allowed) {
    ++burst;
  }
  // Cold: each admission pushes the arrival time by up to 3T, so fewer than B pass at once.
  EXPECT_GE(burst, 2);
  EXPECT_LT(burst, 5);
  Outcome o = b.peek(kT0);
  b.expectExactRetry(kT0, o.retry_after_us);
}

}  // namespace
}  // namespace sluice
