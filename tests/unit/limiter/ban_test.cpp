#include "sluice/limiter/ban.hpp"

#include <gtest/gtest.h>

namespace sluice {
namespace {

constexpr Micros kT0 = 1'700'000'000LL * kMicrosPerSecond;
constexpr Micros kSecond = kMicrosPerSecond;
constexpr Micros kMinute = 60 * kSecond;

BanParams ladder() {
  BanParams p;
  p.after = 3;
  p.duration_us = 10 * kMinute;
  p.backoff_milli = 2000;
  p.max_us = 30 * kMinute;
  p.forgive_us = 60 * kMinute;
  p.within_us = kMinute;
  return p;
}

/// Denies `count` times, one second apart from `at`; returns the last strike.
BanStrike denials(const BanParams& p, BanState& state, Micros at, int count) {
  BanStrike strike;
  for (int i = 0; i < count; ++i) {
    strike = recordDenial(p, state, at + i * kSecond);
    state = strike.next;
  }
  return strike;
}

TEST(BanLadderTest, TheNthDenialWithinTheWindowStartsTheFirstBan) {
  BanState state;
  BanStrike strike = denials(ladder(), state, kT0, 2);
  EXPECT_FALSE(strike.started);
  EXPECT_FALSE(banActive(state, kT0 + 2 * kSecond));
  strike = denials(ladder(), state, kT0 + 2 * kSecond, 1);
  ASSERT_TRUE(strike.started);
  EXPECT_EQ(state.step, 1);
  EXPECT_EQ(state.until, kT0 + 2 * kSecond + 10 * kMinute);
  EXPECT_TRUE(banActive(state, state.until - 1));
  EXPECT_FALSE(banActive(state, state.until));
}

TEST(BanLadderTest, DenialsSpreadOverMoreThanTheWindowDoNotBan) {
  BanState state;
  for (int i = 0; i < 10; ++i) {
    // Two denials per window, the window starting over at each third.
    const BanStrike strike = recordDenial(ladder(), state, kT0 + i * 40 * kSecond);
    state = strike.next;
    EXPECT_FALSE(strike.started) << i;
  }
}

TEST(BanLadderTest, RepeatBansGrowByTheBackoffUpToTheMax) {
  BanState state;
  const Micros lengths[] = {10 * kMinute, 20 * kMinute, 30 * kMinute, 30 * kMinute};
  Micros at = kT0;
  for (int step = 1; step <= 4; ++step) {
    const BanStrike strike = denials(ladder(), state, at, 3);
    ASSERT_TRUE(strike.started) << step;
    EXPECT_EQ(state.step, step);
    EXPECT_EQ(state.last_length, lengths[step - 1]) << step;
    at = state.until + kSecond;  // back right after the ban ends, and denied again
  }
}

TEST(BanLadderTest, AQuietPeriodForgivesTheLadder) {
  BanState state;
  denials(ladder(), state, kT0, 3);
  ASSERT_EQ(state.step, 1);
  // Quiet for less than forgive_after since the ban ended: the next ban is step 2.
  BanState kept = state;
  denials(ladder(), kept, state.until + 59 * kMinute, 3);
  EXPECT_EQ(kept.step, 2);
  EXPECT_EQ(kept.last_length, 20 * kMinute);
  // Quiet for forgive_after: back to the first step.
  BanState forgiven = state;
  denials(ladder(), forgiven, state.until + 60 * kMinute, 3);
  EXPECT_EQ(forgiven.step, 1);
  EXPECT_EQ(forgiven.last_length, 10 * kMinute);
}

TEST(BanLadderTest, TheStateLivesUntilItIsFreshAgain) {
  const BanParams p = ladder();
  BanState state;
  BanStrike strike = recordDenial(p, state, kT0);
  EXPECT_EQ(strike.ttl_us, kMinute);  // one strike: kept for the window
  state = strike.next;
  strike = denials(p, state, kT0 + kSecond, 2);
  ASSERT_TRUE(strike.started);
  // A ban: kept until it ends and the ladder is forgiven.
  EXPECT_EQ(strike.ttl_us, 10 * kMinute + 60 * kMinute);
  EXPECT_EQ(banTtl(p, state, state.until + 60 * kMinute), 0);
  EXPECT_EQ(banTtl(p, BanState{}, kT0), 0);
}

TEST(BanLadderTest, BackoffIsExactInThousandthsAndNeverShrinks) {
  BanParams p = ladder();
  p.backoff_milli = 1500;
  p.duration_us = 1'001;
  p.max_us = 10LL * 365 * 86'400 * kSecond;
  EXPECT_EQ(banLength(p, 1, 0), 1'001);
  EXPECT_EQ(banLength(p, 2, 1'001), 1'501);  // 1001 x 1.5 = 1501.5, rounded down
  p.backoff_milli = 1001;
  EXPECT_EQ(banLength(p, 2, 1), 1);  // below a microsecond of growth: kept, never shorter
  EXPECT_EQ(banLength(p, 2, p.max_us), p.max_us);
}

}  // namespace
}  // namespace sluice
