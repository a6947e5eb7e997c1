#include <gtest/gtest.h>

#include "sluice/common/clock.hpp"
#include "sluice/limiter/limiter.hpp"
#include "support/bucket_driver.hpp"

namespace sluice {
namespace {

using test::makeParams;

constexpr Micros kLease = 30 * kMicrosPerSecond;

/// One concurrency bucket driven as a store drives it, on a manual clock: the next state is
/// kept when the request is admitted, and by a release, renew or refund.
class ConcurrencyTest : public ::testing::Test {
 protected:
  LimitParams params_ = makeParams(Algorithm::kConcurrency, 3, kLease);
  BucketState state_;
  ManualClock clock_;

  Outcome take(LeaseNumber lease, std::int64_t cost = 1) {
    Evaluation e = evaluate(params_, state_, clock_.nowMicros(), cost, lease);
    if (e.outcome.allowed) {
      state_ = std::move(e.next);
    }
    return e.outcome;
  }

  LeaseChange release(LeaseNumber lease) {
    LeaseChange change = releaseLease(params_, state_, clock_.nowMicros(), lease);
    if (change.found == LeaseFound::kHeld) {
      state_ = change.evaluation.next;
    }
    return change;
  }

  LeaseChange renew(LeaseNumber lease) {
    LeaseChange change = renewLease(params_, state_, clock_.nowMicros(), lease);
    if (change.found == LeaseFound::kHeld) {
      state_ = change.evaluation.next;
    }
    return change;
  }

  Outcome check() const { return evaluate(params_, state_, clock_.nowMicros(), 0).outcome; }
};

TEST_F(ConcurrencyTest, AdmitsUpToMaxInFlightThenDenies) {
  EXPECT_EQ(take(11).remaining, 2);
  EXPECT_EQ(take(12).remaining, 1);
  EXPECT_EQ(take(13).remaining, 0);
  const Outcome denied = take(14);
  EXPECT_FALSE(denied.allowed);
  EXPECT_FALSE(denied.never);
  EXPECT_EQ(denied.remaining, 0);
  EXPECT_EQ(denied.retry_after_us, kLease);
  EXPECT_EQ(state_.log.size(), 3U);
}

TEST_F(ConcurrencyTest, EveryAdmittedRequestHoldsOneLeaseWhateverItsCost) {
  EXPECT_EQ(take(11, 500).remaining, 2);
  EXPECT_EQ(check().remaining, 2);
}

TEST_F(ConcurrencyTest, ACheckTakesNoLease) {
  EXPECT_TRUE(take(11, 0).allowed);
  EXPECT_TRUE(state_.log.empty());
  EXPECT_EQ(check().remaining, 3);
}

TEST_F(ConcurrencyTest, RetryIsTheSoonestExpiryAndExact) {
  take(11);
  clock_.advance(std::chrono::seconds(10));
  take(12);
  take(13);
  const Outcome denied = take(14);
  EXPECT_EQ(denied.retry_after_us, kLease - 10 * kMicrosPerSecond);
  clock_.advance(std::chrono::microseconds(denied.retry_after_us - 1));
  EXPECT_FALSE(take(14).allowed);
  clock_.advance(std::chrono::microseconds(1));
  EXPECT_TRUE(take(14).allowed);
}

TEST_F(ConcurrencyTest, AnUnreleasedLeaseComesBackAtItsExpiry) {
  take(11);
  take(12);
  take(13);
  clock_.advance(std::chrono::microseconds(kLease - 1));
  EXPECT_EQ(check().remaining, 0);
  clock_.advance(std::chrono::microseconds(1));
  EXPECT_EQ(check().remaining, 3);
}

TEST_F(ConcurrencyTest, ResetAfterAndTtlAreTheLatestExpiry) {
  take(11);
  clock_.advance(std::chrono::seconds(5));
  Evaluation e = evaluate(params_, state_, clock_.nowMicros(), 1, 12);
  EXPECT_EQ(e.ttl_us, kLease);
  EXPECT_EQ(e.outcome.reset_after_us, kLease);
}

TEST_F(ConcurrencyTest, ReleaseFreesTheSlotAtOnce) {
  take(11);
  take(12);
  take(13);
  const LeaseChange released = release(12);
  EXPECT_EQ(released.found, LeaseFound::kHeld);
  EXPECT_EQ(released.evaluation.outcome.remaining, 1);
  EXPECT_TRUE(take(14).allowed);
}

TEST_F(ConcurrencyTest, ReleasingTwiceFindsNothingAndChangesNothing) {
  take(11);
  take(12);
  release(11);
  const BucketState before = state_;
  EXPECT_EQ(release(11).found, LeaseFound::kNotHeld);
  EXPECT_EQ(state_.log.size(), before.log.size());
  EXPECT_EQ(check().remaining, 2);
}

TEST_F(ConcurrencyTest, AnUnknownLeaseIsNotHeld) {
  take(11);
  EXPECT_EQ(release(99).found, LeaseFound::kNotHeld);
  EXPECT_EQ(renew(99).found, LeaseFound::kNotHeld);
  EXPECT_EQ(release(0).found, LeaseFound::kNotHeld);
  EXPECT_EQ(check().remaining, 2);
}

TEST_F(ConcurrencyTest, ReleaseAfterExpiryIsExpired) {
  take(11);
  clock_.advance(std::chrono::microseconds(kLease));
  const LeaseChange late = release(11);
  EXPECT_EQ(late.found, LeaseFound::kExpired);
  EXPECT_EQ(late.expires_at, clock_.nowMicros());
}

TEST_F(ConcurrencyTest, RenewExtendsToNowPlusTheLeaseTime) {
  take(11);
  clock_.advance(std::chrono::seconds(20));
  const LeaseChange renewed = renew(11);
  ASSERT_EQ(renewed.found, LeaseFound::kHeld);
  EXPECT_EQ(renewed.expires_at, clock_.nowMicros() + kLease);
  clock_.advance(std::chrono::seconds(20));  // 40 s after it was taken: still held
  EXPECT_EQ(check().remaining, 2);
  clock_.advance(std::chrono::seconds(10));
  EXPECT_EQ(check().remaining, 3);
}

TEST_F(ConcurrencyTest, RenewAfterExpiryIsExpiredAndChangesNothing) {
  take(11);
  clock_.advance(std::chrono::microseconds(kLease + 1));
  const LeaseChange late = renew(11);
  EXPECT_EQ(late.found, LeaseFound::kExpired);
  EXPECT_EQ(check().remaining, 3);
}

TEST_F(ConcurrencyTest, RenewKeepsTheLeasesInExpiryOrder) {
  take(11);
  clock_.advance(std::chrono::seconds(1));
  take(12);
  renew(11);
  ASSERT_EQ(state_.log.size(), 2U);
  EXPECT_EQ(state_.log[0].cost, 12);
  EXPECT_EQ(state_.log[1].cost, 11);
}

TEST_F(ConcurrencyTest, ARefundNamingALeaseReleasesIt) {
  take(11);
  take(12);
  state_ = refund(params_, state_, clock_.nowMicros(), 1, 12).next;
  ASSERT_EQ(state_.log.size(), 1U);
  EXPECT_EQ(state_.log[0].cost, 11);
}

TEST_F(ConcurrencyTest, ARefundWithoutALeaseReleasesNone) {
  take(11);
  take(12);
  const Evaluation e = refund(params_, state_, clock_.nowMicros(), 2);
  EXPECT_EQ(e.outcome.remaining, 1);
  EXPECT_EQ(e.next.log.size(), 2U);
}

TEST_F(ConcurrencyTest, ARefundOfALeaseNotHeldChangesNothing) {
  take(11);
  EXPECT_EQ(refund(params_, state_, clock_.nowMicros(), 1, 77).next.log.size(), 1U);
}

TEST_F(ConcurrencyTest, AChargeThatLandsAnywayTakesNoLease) {
  take(11);
  const Evaluation e = chargeAnyway(params_, state_, clock_.nowMicros(), 5);
  EXPECT_EQ(e.next.log.size(), 1U);
  EXPECT_EQ(e.outcome.remaining, 2);
}

TEST_F(ConcurrencyTest, ZeroMaxInFlightBlocksEverything) {
  params_.limit = 0;
  const Outcome denied = take(11);
  EXPECT_FALSE(denied.allowed);
  EXPECT_TRUE(denied.never);
}

}  // namespace
}  // namespace sluice
