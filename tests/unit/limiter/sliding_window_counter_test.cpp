#include <gtest/gtest.h>

#include "sluice/limiter/limiter.hpp"
#include "support/bucket_driver.hpp"

namespace sluice {
namespace {

using test::BucketDriver;
using test::kT0;
using test::makeParams;

constexpr Micros kSecond = kMicrosPerSecond;

LimitParams counterParams(std::int64_t limit, Micros window = kSecond) {
  return makeParams(Algorithm::kSlidingWindowCounter, limit, window);
}

TEST(SlidingWindowCounterTest, WeighsThePreviousWindowByItsOverlap) {
  BucketDriver b(counterParams(10));
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(b.hit(kT0 + 100).allowed);
  }
  // Half-way through the next window the estimate is 10 * 0.5 = 5.
  const Micros half = kT0 + kSecond + kSecond / 2;
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(b.hit(half).allowed) << i;
  }
  Outcome denied = b.hit(half);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.remaining, 0);
}

TEST(SlidingWindowCounterTest, RemainingIsTheFloorOfWhatIsLeft) {
  BucketDriver b(counterParams(10));
  for (int i = 0; i < 3; ++i) {
    b.hit(kT0);
  }
  // estimate 3 * 0.75 = 2.25 at a quarter; after one more: 3.25 → 6 remaining.
  EXPECT_EQ(b.hit(kT0 + kSecond + kSecond / 4).remaining, 6);
}

TEST(SlidingWindowCounterTest, RetryIsExactWithinTheWindow) {
  BucketDriver b(counterParams(7, 5 * kSecond));
  for (int i = 0; i < 7; ++i) {
    b.hit(kT0 + 1);
  }
  const Micros now = kT0 + 5 * kSecond + 12'345;
  Outcome o = b.hit(now);
  ASSERT_FALSE(o.allowed);
  // 7 * (W - e) / W + 1 <= 7 first holds at e = W / 7 rounded up to the microsecond.
  EXPECT_EQ(o.retry_after_us, 714'286 - 12'345);
  b.expectExactRetry(now, o.retry_after_us);
}

TEST(SlidingWindowCounterTest, RetryCanRollIntoTheNextWindow) {
  BucketDriver b(counterParams(4));
  for (int i = 0; i < 4; ++i) {
    b.hit(kT0 + 900'000);
  }
  Outcome o = b.hit(kT0 + 950'000, 2);
  ASSERT_FALSE(o.allowed);
  // Next window: 4 * (W - e) / W + 2 <= 4 from e = W / 2.
  EXPECT_EQ(o.retry_after_us, 50'000 + 500'000);
  b.expectExactRetry(kT0 + 950'000, o.retry_after_us, 2);
}

TEST(SlidingWindowCounterTest, CountRejectedStretchesTheRetryIntoTheNextWindow) {
  LimitParams p = counterParams(2);
  p.count_rejected = true;
  BucketDriver b(p);
  Outcome o;
  for (int i = 0; i < 100; ++i) {
    o = b.hit(kT0 + 10);
  }
  ASSERT_FALSE(o.allowed);
  // 100 counted: 100 * (W - e) / W + 1 <= 2 from e = 0.99 W of the next window.
  EXPECT_EQ(o.retry_after_us, kSecond - 10 + 990'000);
  b.expectExactRetry(kT0 + 10, o.retry_after_us);
  EXPECT_EQ(b.lastTtl(), 2 * kSecond - 10);
}

TEST(SlidingWindowCounterTest, CostAboveLimitNeverPasses) {
  BucketDriver b(counterParams(3));
  Outcome o = b.hit(kT0, 4);
  EXPECT_TRUE(o.never);
  EXPECT_EQ(o.retry_after_us, kRetryNever);
  EXPECT_EQ(b.peek(kT0, 0).remaining, 3);
}

TEST(SlidingWindowCounterTest, HitsZeroChecksWithoutConsuming) {
  BucketDriver b(counterParams(3));
  b.hit(kT0);
  EXPECT_EQ(b.hit(kT0 + 1, 0).remaining, 2);
  EXPECT_EQ(b.hit(kT0 + 2, 0).remaining, 2);
}

TEST(SlidingWindowCounterTest, ResetAfterCoversTheWindowThatStillWeighs) {
  BucketDriver b(counterParams(3));
  EXPECT_EQ(b.hit(kT0 + 200'000).reset_after_us, 2 * kSecond - 200'000);
  EXPECT_EQ(b.peek(kT0 + kSecond + 100'000, 0).reset_after_us, 900'000);
  EXPECT_EQ(b.peek(kT0 + 2 * kSecond, 0).reset_after_us, 0);
}

}  // namespace
}  // namespace sluice
