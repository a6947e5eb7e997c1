// Concurrency limits (leases) on the memory store (C++ limiter) and a real redis-server
// (65_concurrency.lua), on one simulated clock: the expected answers of a scripted trace, and
// random traces of takes, releases, renews, refunds, reports and counted denials compared
// field by field.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "conformance/conformance_harness.hpp"

namespace sluice::conformance {
namespace {

constexpr Micros kMs = kMicrosPerMilli;
constexpr Micros kLease = 1000 * kMs;

LimitParams leaseParams(std::int64_t max_in_flight) {
  LimitParams p;
  p.algorithm = Algorithm::kConcurrency;
  p.limit = max_in_flight;
  p.window_us = kLease;
  return p;
}

StoreLimit limitOf(const std::string& key, const LimitParams& p) {
  StoreLimit limit;
  limit.key = key;
  limit.params = p;
  return limit;
}

/// Both stores, and the lease calls the harness does not have.
class LeasePair {
 public:
  LeasePair() : pair_(testPrefix()) {}

  StorePair& pair() { return pair_; }

  Result<StoreResponse> take(Store& store, const StoreLimit& limit, LeaseNumber lease,
                             std::int64_t cost = 1, Charge charge = Charge::kAllOrNothing,
                             bool refund = false) {
    StoreLimit l = limit;
    l.refund = refund;
    StoreRequest request = clientRequest({l}, cost, "lease-client");
    request.lease = lease;
    request.charge = charge;
    return pair_.run(store, request);
  }

  Result<LeaseResponse> change(Store& store, const StoreLimit& limit, LeaseOp op,
                               LeaseNumber lease) {
    LeaseRequest request;
    request.op = op;
    request.lease = lease;
    request.holds.push_back(
        LeaseHold{BucketKey::storeKey("lease-client", limit.key), limit.params});
    std::optional<Result<LeaseResponse>> result;
    store.changeLease(request, [&](Result<LeaseResponse> r) { result.emplace(std::move(r)); });
    if (!test::runUntil(pair_.io(), [&] { return result.has_value(); })) {
      return makeError(ErrorKind::kTimeout, "no answer from the store");
    }
    return std::move(*result);
  }

 private:
  StorePair pair_;
};

TEST(ConformanceConcurrencyTest, LeasesAreTakenReleasedRenewedAndExpireAlike) {
  LeasePair leases;
  for (Store* store : {&leases.pair().memory(), &leases.pair().redis()}) {
    SCOPED_TRACE(std::string(store->kind()));
    const StoreLimit limit = limitOf("cc:" + std::string(store->kind()), leaseParams(2));
    leases.pair().clock().set(kT0);
    ASSERT_EQ(leases.take(*store, limit, 11)->outcomes.at(0).remaining, 1);
    leases.pair().clock().set(kT0 + 100 * kMs);
    ASSERT_EQ(leases.take(*store, limit, 12)->outcomes.at(0).remaining, 0);
    auto denied = leases.take(*store, limit, 13);
    ASSERT_TRUE(denied.ok());
    EXPECT_FALSE(denied->allowed);
    EXPECT_EQ(denied->outcomes.at(0).retry_after_us, kLease - 100 * kMs)
        << str(denied->outcomes[0]);
    EXPECT_EQ(denied->outcomes.at(0).reset_after_us, kLease) << str(denied->outcomes[0]);

    auto released = leases.change(*store, limit, LeaseOp::kRelease, 11);
    ASSERT_TRUE(released.ok()) << released.error().message;
    EXPECT_EQ(released->holds.at(0).found, LeaseFound::kHeld);
    EXPECT_EQ(released->holds.at(0).expires_at, kT0 + kLease);
    EXPECT_EQ(released->holds.at(0).outcome.remaining, 1);
    EXPECT_EQ(leases.change(*store, limit, LeaseOp::kRelease, 11)->holds.at(0).found,
              LeaseFound::kNotHeld);

    leases.pair().clock().set(kT0 + 900 * kMs);
    auto renewed = leases.change(*store, limit, LeaseOp::kRenew, 12);
    ASSERT_TRUE(renewed.ok());
    EXPECT_EQ(renewed->holds.at(0).found, LeaseFound::kHeld);
    EXPECT_EQ(renewed->holds.at(0).expires_at, kT0 + 900 * kMs + kLease);
    leases.pair().clock().set(kT0 + 1800 * kMs);
    EXPECT_EQ(leases.take(*store, limit, 0, 0)->outcomes.at(0).remaining, 1);
    leases.pair().clock().set(kT0 + 1900 * kMs);
    EXPECT_EQ(leases.take(*store, limit, 0, 0)->outcomes.at(0).remaining, 2);
    auto late = leases.change(*store, limit, LeaseOp::kRenew, 12);
    ASSERT_TRUE(late.ok());
    EXPECT_NE(late->holds.at(0).found, LeaseFound::kHeld);
  }
}

TEST(ConformanceConcurrencyTest, ReportsAndCountedDenialsTakeNoLeaseAndRefundsRelease) {
  LeasePair leases;
  for (Store* store : {&leases.pair().memory(), &leases.pair().redis()}) {
    SCOPED_TRACE(std::string(store->kind()));
    leases.pair().clock().set(kT0);
    const StoreLimit limit = limitOf("cc2:" + std::string(store->kind()), leaseParams(3));
    EXPECT_EQ(leases.take(*store, limit, 1, 5, Charge::kReport)->outcomes.at(0).remaining, 3);
    StoreLimit full;
    full.key = "full:" + std::string(store->kind());
    full.params.algorithm = Algorithm::kFixedWindow;
    full.params.limit = 0;
    full.params.window_us = kLease;
    StoreRequest counted = clientRequest({limit, full}, 1, "lease-client");
    counted.lease = 2;
    counted.charge = Charge::kEvery;
    auto denied = leases.pair().run(*store, counted);
    ASSERT_TRUE(denied.ok());
    EXPECT_FALSE(denied->allowed);
    EXPECT_EQ(denied->outcomes.at(0).remaining, 3) << str(denied->outcomes[0]);
    EXPECT_EQ(leases.take(*store, limit, 0, 0)->outcomes.at(0).remaining, 3);

    ASSERT_TRUE(leases.take(*store, limit, 21)->allowed);
    leases.pair().clock().set(kT0 + kMs);
    ASSERT_TRUE(leases.take(*store, limit, 22)->allowed);
    ASSERT_TRUE(leases.take(*store, limit, 23)->allowed);
    // Naming a lease releases it; naming none releases none.
    EXPECT_EQ(
        leases.take(*store, limit, 23, 1, Charge::kAllOrNothing, true)->outcomes.at(0).remaining,
        1);
    EXPECT_EQ(
        leases.take(*store, limit, 0, 5, Charge::kAllOrNothing, true)->outcomes.at(0).remaining, 1);
    EXPECT_EQ(leases.change(*store, limit, LeaseOp::kRelease, 23)->holds.at(0).found,
              LeaseFound::kNotHeld);
    EXPECT_EQ(leases.change(*store, limit, LeaseOp::kRelease, 21)->holds.at(0).found,
              LeaseFound::kHeld);
  }
}

TEST(ConformanceConcurrencyTest, RandomTracesAgreeFieldByField) {
  LeasePair leases;
  std::mt19937_64 random(20261126);
  for (int trace = 0; trace < 6; ++trace) {
    const LimitParams params = leaseParams(1 + static_cast<std::int64_t>(random() % 4));
    const StoreLimit memory_limit = limitOf("rt:m" + std::to_string(trace), params);
    const StoreLimit redis_limit = limitOf("rt:r" + std::to_string(trace), params);
    Micros at = kT0 + static_cast<Micros>(trace) * 100 * kLease;
    std::vector<LeaseNumber> taken;
    for (int step = 0; step < 60; ++step) {
      at += static_cast<Micros>(random() % (kLease / 3));
      leases.pair().clock().set(at);
      const int op = static_cast<int>(random() % 6);
      const LeaseNumber known = taken.empty() ? 7 : taken[random() % taken.size()];
      SCOPED_TRACE("trace " + std::to_string(trace) + " step " + std::to_string(step) + " op " +
                   std::to_string(op));
      if (op <= 1 || op == 5) {
        const LeaseNumber lease = 1000 + step;
        const bool refund = op == 5;
        const LeaseNumber named = refund ? (random() % 2 == 0 ? known : 0) : lease;
        auto m = leases.take(leases.pair().memory(), memory_limit, named, 1, Charge::kAllOrNothing,
                             refund);
        auto r = leases.take(leases.pair().redis(), redis_limit, named, 1, Charge::kAllOrNothing,
                             refund);
        ASSERT_TRUE(m.ok() && r.ok());
        EXPECT_EQ(m->allowed, r->allowed);
        EXPECT_TRUE(sameOutcome(m->outcomes.at(0), r->outcomes.at(0)))
            << str(m->outcomes[0]) << " vs " << str(r->outcomes[0]);
        if (!refund && m->allowed) {
          taken.push_back(lease);
        }
        continue;
      }
      const LeaseOp lease_op = op % 2 == 0 ? LeaseOp::kRelease : LeaseOp::kRenew;
      auto m = leases.change(leases.pair().memory(), memory_limit, lease_op, known);
      auto r = leases.change(leases.pair().redis(), redis_limit, lease_op, known);
      ASSERT_TRUE(m.ok() && r.ok());
      // Held or not, the stores agree; whether a lease no longer held is reported as
      // expired or as unknown depends on when its bucket was dropped (a message's wording).
      const bool held = m->holds.at(0).found == LeaseFound::kHeld;
      EXPECT_EQ(held, r->holds.at(0).found == LeaseFound::kHeld);
      if (held) {
        EXPECT_EQ(m->holds.at(0).expires_at, r->holds.at(0).expires_at);
      }
      EXPECT_EQ(m->holds.at(0).outcome.remaining, r->holds.at(0).outcome.remaining);
      EXPECT_EQ(m->holds.at(0).outcome.reset_after_us, r->holds.at(0).outcome.reset_after_us);
    }
  }
}

}  // namespace
}  // namespace sluice::conformance
