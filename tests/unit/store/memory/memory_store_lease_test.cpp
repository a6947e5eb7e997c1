#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/store/memory_store.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;

constexpr Micros kLease = 10 * kMicrosPerSecond;

/// The memory store's leases of concurrency limits, on a manual clock.
class MemoryStoreLeaseTest : public ::testing::Test {
 protected:
  MemoryStoreLeaseTest() : store_(makeMemoryStore(MemoryStoreOptions{}, clock_, metrics_)) {
    params_.algorithm = Algorithm::kConcurrency;
    params_.limit = 2;
    params_.window_us = kLease;
  }

  StoreLimit limit(const std::string& key) const {
    StoreLimit l;
    l.key = key;
    l.params = params_;
    return l;
  }

  StoreResponse decide(std::vector<StoreLimit> limits, LeaseNumber lease,
                       Charge charge = Charge::kAllOrNothing) {
    StoreRequest request;
    request.limits = std::move(limits);
    request.lease = lease;
    request.charge = charge;
    std::optional<Result<StoreResponse>> got;
    store_->evaluate(request, [&](Result<StoreResponse> r) { got.emplace(std::move(r)); });
    EXPECT_TRUE(got && got->ok());
    return got->value();
  }

  LeaseResponse change(LeaseOp op, LeaseNumber lease, const std::vector<std::string>& keys) {
    LeaseRequest request;
    request.op = op;
    request.lease = lease;
    for (const std::string& key : keys) {
      request.holds.push_back(LeaseHold{key, params_});
    }
    std::optional<Result<LeaseResponse>> got;
    store_->changeLease(request, [&](Result<LeaseResponse> r) { got.emplace(std::move(r)); });
    EXPECT_TRUE(got && got->ok());
    return got->value();
  }

  std::int64_t available(const std::string& key) {
    StoreRequest request;
    request.limits.push_back(limit(key));
    request.cost = 0;
    std::int64_t remaining = -1;
    store_->evaluate(request,
                     [&](Result<StoreResponse> r) { remaining = r->outcomes.at(0).remaining; });
    return remaining;
  }

  ManualClock clock_;
  Metrics metrics_;
  LimitParams params_;
  StorePtr store_;
};

TEST_F(MemoryStoreLeaseTest, HoldsAtMostMaxInFlight) {
  EXPECT_TRUE(decide({limit("a")}, 1).allowed);
  EXPECT_TRUE(decide({limit("a")}, 2).allowed);
  const StoreResponse denied = decide({limit("a")}, 3);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.outcomes.at(0).retry_after_us, kLease);
  EXPECT_EQ(available("a"), 0);
}

TEST_F(MemoryStoreLeaseTest, ReleaseGivesTheSlotBack) {
  decide({limit("a")}, 1);
  decide({limit("a")}, 2);
  const LeaseResponse released = change(LeaseOp::kRelease, 1, {"a"});
  EXPECT_EQ(released.holds.at(0).found, LeaseFound::kHeld);
  EXPECT_EQ(released.holds.at(0).outcome.remaining, 1);
  EXPECT_TRUE(decide({limit("a")}, 3).allowed);
}

TEST_F(MemoryStoreLeaseTest, ReleasingTwiceTouchesNothing) {
  decide({limit("a")}, 1);
  decide({limit("a")}, 2);
  change(LeaseOp::kRelease, 1, {"a"});
  EXPECT_EQ(change(LeaseOp::kRelease, 1, {"a"}).holds.at(0).found, LeaseFound::kNotHeld);
  EXPECT_EQ(available("a"), 1);
}

TEST_F(MemoryStoreLeaseTest, AnUnknownBucketOrLeaseIsNotHeld) {
  decide({limit("a")}, 1);
  EXPECT_EQ(change(LeaseOp::kRelease, 1, {"b"}).holds.at(0).found, LeaseFound::kNotHeld);
  EXPECT_EQ(change(LeaseOp::kRelease, 9, {"a"}).holds.at(0).found, LeaseFound::kNotHeld);
  EXPECT_EQ(available("a"), 1);
}

TEST_F(MemoryStoreLeaseTest, LeasesExpireOnTheClock) {
  decide({limit("a")}, 1);
  decide({limit("a")}, 2);
  clock_.advance(std::chrono::microseconds(kLease - 1));
  EXPECT_EQ(available("a"), 0);
  clock_.advance(1us);
  EXPECT_EQ(available("a"), 2);
  EXPECT_TRUE(decide({limit("a")}, 3).allowed);
}

TEST_F(MemoryStoreLeaseTest, RenewKeepsALeaseBeyondItsFirstExpiry) {
  decide({limit("a")}, 1);
  clock_.advance(8s);
  const LeaseResponse renewed = change(LeaseOp::kRenew, 1, {"a"});
  EXPECT_EQ(renewed.holds.at(0).found, LeaseFound::kHeld);
  EXPECT_EQ(renewed.holds.at(0).expires_at, clock_.nowMicros() + kLease);
  clock_.advance(8s);
  EXPECT_EQ(available("a"), 1);
  clock_.advance(2s);
  EXPECT_EQ(available("a"), 2);
}

TEST_F(MemoryStoreLeaseTest, RenewAfterExpiryFailsAndChangesNothing) {
  decide({limit("a")}, 1);
  decide({limit("a")}, 2);
  clock_.advance(std::chrono::microseconds(kLease));
  const LeaseResponse late = change(LeaseOp::kRenew, 1, {"a"});
  EXPECT_EQ(late.holds.at(0).found, LeaseFound::kExpired);
  EXPECT_EQ(available("a"), 2);
}

TEST_F(MemoryStoreLeaseTest, ADeniedRequestTakesNoLeaseInAnyChargeMode) {
  StoreLimit full;
  full.key = "full";
  full.params.algorithm = Algorithm::kFixedWindow;
  full.params.limit = 0;
  full.params.window_us = kMicrosPerSecond;
  for (const Charge charge : {Charge::kAllOrNothing, Charge::kEvery}) {
    const StoreResponse denied = decide({limit("a"), full}, 1, charge);
    EXPECT_FALSE(denied.allowed);
    EXPECT_EQ(denied.outcomes.at(0).remaining, 2);
    EXPECT_EQ(available("a"), 2);
  }
}

TEST_F(MemoryStoreLeaseTest, AReportTakesNoLease) {
  decide({limit("a")}, 1, Charge::kReport);
  EXPECT_EQ(available("a"), 2);
}

TEST_F(MemoryStoreLeaseTest, OneLeaseSpansEveryConcurrencyLimitOfTheRequest) {
  decide({limit("a"), limit("b")}, 7);
  EXPECT_EQ(available("a"), 1);
  EXPECT_EQ(available("b"), 1);
  const LeaseResponse released = change(LeaseOp::kRelease, 7, {"a", "b"});
  EXPECT_EQ(released.holds.at(0).found, LeaseFound::kHeld);
  EXPECT_EQ(released.holds.at(1).found, LeaseFound::kHeld);
  EXPECT_EQ(available("a"), 2);
  EXPECT_EQ(available("b"), 2);
}

TEST_F(MemoryStoreLeaseTest, AResetClearsLeases) {
  decide({limit("a")}, 1);
  decide({limit("a")}, 2);
  store_->reset({"a"}, [](Result<std::size_t>) {});
  EXPECT_EQ(available("a"), 2);
  EXPECT_EQ(change(LeaseOp::kRelease, 1, {"a"}).holds.at(0).found, LeaseFound::kNotHeld);
}

TEST_F(MemoryStoreLeaseTest, ARefundReleasesTheNamedLease) {
  decide({limit("a")}, 1);
  decide({limit("a")}, 2);
  StoreLimit refund = limit("a");
  refund.refund = true;
  decide({refund}, 2);
  EXPECT_EQ(available("a"), 1);
  EXPECT_EQ(change(LeaseOp::kRelease, 2, {"a"}).holds.at(0).found, LeaseFound::kNotHeld);
  EXPECT_EQ(change(LeaseOp::kRelease, 1, {"a"}).holds.at(0).found, LeaseFound::kHeld);
}

}  // namespace
}  // namespace sluice
