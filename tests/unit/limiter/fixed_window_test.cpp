#include <gtest/gtest.h>

#include <set>
#include <string_view>

#include "sluice/limiter/limiter.hpp"
#include "support/bucket_driver.hpp"

namespace sluice {
namespace {

using test::BucketDriver;
using test::kT0;
using test::makeParams;

constexpr Micros kSecond = kMicrosPerSecond;

TEST(AlgorithmNameTest, RoundTripsEverySpelling) {
  for (Algorithm a :
       {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
        Algorithm::kTokenBucket, Algorithm::kLeakyBucket}) {
    EXPECT_EQ(parseAlgorithm(algorithmName(a)), a);
  }
  EXPECT_EQ(algorithmName(Algorithm::kSlidingWindowCounter), "sliding_window_counter");
  EXPECT_EQ(parseAlgorithm("token_bucket"), Algorithm::kTokenBucket);
  EXPECT_EQ(parseAlgorithm("Token_Bucket"), std::nullopt);
  EXPECT_EQ(parseAlgorithm(""), std::nullopt);
}

TEST(AlgorithmNameTest, KeyCodesAreShortAndDistinct) {
  std::set<std::string_view> codes;
  for (Algorithm a :
       {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
        Algorithm::kTokenBucket, Algorithm::kLeakyBucket}) {
    std::string_view code = algorithmCode(a);
    EXPECT_LE(code.size(), 3u);
    EXPECT_EQ(code.find_first_not_of("abcdefghijklmnopqrstuvwxyz"), std::string_view::npos);
    codes.insert(code);
  }
  EXPECT_EQ(codes.size(), 5u);
  EXPECT_EQ(algorithmCode(Algorithm::kFixedWindow), "fw");
}

TEST(FixedWindowTest, AdmitsUpToTheLimitThenDenies) {
  BucketDriver b(makeParams(Algorithm::kFixedWindow, 3, kSecond));
  EXPECT_EQ(b.hit(kT0 + 10).remaining, 2);
  EXPECT_EQ(b.hit(kT0 + 20).remaining, 1);
  Outcome third = b.hit(kT0 + 30);
  EXPECT_TRUE(third.allowed);
  EXPECT_EQ(third.remaining, 0);
  EXPECT_EQ(third.reset_after_us, kSecond - 30);
  Outcome fourth = b.hit(kT0 + 40);
  EXPECT_FALSE(fourth.allowed);
  EXPECT_FALSE(fourth.never);
  EXPECT_EQ(fourth.remaining, 0);
  EXPECT_EQ(fourth.retry_after_us, kSecond - 40);
}

TEST(FixedWindowTest, RetryAfterIsExact) {
  BucketDriver b(makeParams(Algorithm::kFixedWindow, 2, kSecond));
  b.hit(kT0 + 5);
  b.hit(kT0 + 6);
  Outcome denied = b.hit(kT0 + 123'456);
  ASSERT_FALSE(denied.allowed);
  b.expectExactRetry(kT0 + 123'456, denied.retry_after_us);
}

TEST(FixedWindowTest, WindowsAreEpochAligned) {
  BucketDriver b(makeParams(Algorithm::kFixedWindow, 1, 10 * kSecond));
  EXPECT_TRUE(b.hit(kT0 + 9 * kSecond + 999'999).allowed);
  EXPECT_FALSE(b.hit(kT0 + 9 * kSecond + 999'999).allowed);
  // The next window starts at the next multiple of 10 s, not 10 s after the first request.
  EXPECT_TRUE(b.hit(kT0 + 10 * kSecond).allowed);
}

TEST(FixedWindowTest, AdmitsTwiceTheLimitAcrossABoundary) {
  BucketDriver b(makeParams(Algorithm::kFixedWindow, 5, kSecond));
  int admitted = 0;
  for (int i = 0; i < 5; ++i) {
    admitted += b.hit(kT0 + kSecond - 1).allowed ? 1 : 0;
  }
  for (int i = 0; i < 5; ++i) {
    admitted += b.hit(kT0 + kSecond).allowed ? 1 : 0;
  }
  EXPECT_EQ(admitted, 10);  // the weakness the sliding log removes
}

TEST(FixedWindowTest, CostAboveLimitNeverPasses) {
  BucketDriver b(makeParams(Algorithm::kFixedWindow, 5, kSecond));
  Outcome o = b.hit(kT0, 6);
  EXPECT_FALSE(o.allowed);
  EXPECT_TRUE(o.never);
  EXPECT_EQ(o.retry_after_us, kRetryNever);
  EXPECT_EQ(o.remaining, 5);
  EXPECT_EQ(b.peek(kT0).remaining, 4);  // nothing was charged
}

TEST(FixedWindowTest, CostEqualToLimitPassesOnAFreshWindow) {
  BucketDriver b(makeParams(Algorithm::kFixedWindow, 5, kSecond));
  EXPECT_TRUE(b.hit(kT0, 5).allowed);
  EXPECT_FALSE(b.hit(kT0, 1).allowed);
}

TEST(FixedWindowTest, HitsZeroChecksWithoutConsuming) {
  BucketDriver b(makeParams(Algorithm::kFixedWindow, 2, kSecond));
  b.hit(kT0);
  Outcome check = b.hit(kT0 + 1, 0);
  EXPECT_TRUE(check.allowed);
  EXPECT_EQ(check.remaining, 1);
  EXPECT_EQ(b.hit(kT0 + 2, 0).remaining, 1);
  EXPECT_TRUE(b.hit(kT0 + 3).allowed);
  EXPECT_EQ(b.hit(kT0 + 4, 0).remaining, 0);
}

TEST(FixedWindowTest, HitsZeroOnAFreshBucketNeedsNoState) {
  Evaluation e = evaluate(makeParams(Algorithm::kFixedWindow, 2, kSecond), {}, kT0 + 7, 0);
  EXPECT_TRUE(e.outcome.allowed);
  EXPECT_EQ(e.outcome.remaining, 2);
  EXPECT_EQ(e.outcome.reset_after_us, 0);
  EXPECT_EQ(e.ttl_us, 0);
}

TEST(FixedWindowTest, CountRejectedChargesDeniedAttempts) {
  LimitParams p = makeParams(Algorithm::kFixedWindow, 2, kSecond);
  p.count_rejected = true;
  BucketDriver b(p);
  b.hit(kT0);
  b.hit(kT0);
  EXPECT_FALSE(b.hit(kT0 + 1).allowed);
  EXPECT_EQ(b.state().b, 3);
  EXPECT_TRUE(b.hit(kT0 + kSecond).allowed);
}

TEST(FixedWindowTest, TtlLastsUntilTheWindowEnds) {
  BucketDriver b(makeParams(Algorithm::kFixedWindow, 2, kSecond));
  b.hit(kT0 + 250'000);
  EXPECT_EQ(b.lastTtl(), 750'000);
}

TEST(LimiterTest, ZeroLimitBlocksEveryPositiveCost) {
  for (Algorithm a :
       {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
        Algorithm::kTokenBucket, Algorithm::kLeakyBucket}) {
    Evaluation e = evaluate(makeParams(a, 0, kSecond), {}, kT0, 1);
    EXPECT_FALSE(e.outcome.allowed) << algorithmName(a);
    EXPECT_TRUE(e.outcome.never) << algorithmName(a);
    EXPECT_TRUE(evaluate(makeParams(a, 0, kSecond), {}, kT0, 0).outcome.allowed);
  }
}

TEST(LimiterTest, NegativeCostCountsAsACheck) {
  Evaluation e = evaluate(makeParams(Algorithm::kFixedWindow, 1, kSecond), {}, kT0, -3);
  EXPECT_TRUE(e.outcome.allowed);
  EXPECT_EQ(e.outcome.remaining, 1);
}

}  // namespace
}  // namespace sluice
