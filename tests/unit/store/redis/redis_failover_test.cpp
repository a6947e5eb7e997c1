// The failure modes of makeFailoverStore, over a fake primary (the Redis store itself is
// exercised against a real redis-server in redis_store_test.cpp and the conformance suite).
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "sluice/common/metrics.hpp"
#include "sluice/rules/bucket_key.hpp"
#include "sluice/store/failover_store.hpp"
#include "sluice/store/memory_store.hpp"
#include "sluice/store/redis_store.hpp"

namespace sluice {
namespace {

/// A primary whose health and answers the test sets.
class FakePrimary final : public Store {
 public:
  void evaluate(const StoreRequest& request, Callback done) override {
    ++calls;
    if (error) {
      done(*error);
      return;
    }
    StoreResponse r;
    r.outcomes.resize(request.limits.size());
    done(r);
  }
  void reset(const std::vector<std::string>&, ResetCallback done) override { done(0); }
  bool healthy() const override { return up; }
  std::string_view kind() const override { return "redis"; }

  bool up = true;
  std::optional<Error> error;
  int calls = 0;
};

class FailoverStoreTest : public ::testing::Test {
 protected:
  StorePtr make(FailureMode mode) { return makeFailoverStore(primary_, fallback_, mode, metrics_); }

  static Result<StoreResponse> call(Store& store, std::int64_t limit = 1) {
    StoreLimit l;
    l.key = BucketKey::storeKey("c", "k");
    l.params.limit = limit;
    std::optional<Result<StoreResponse>> out;
    store.evaluate(StoreRequest{{l}, 1}, [&](Result<StoreResponse> r) { out.emplace(r); });
    EXPECT_TRUE(out.has_value());  // both stores answer inline
    return *out;
  }

  std::uint64_t activations(FailureMode mode) {
    return metrics_
        .counter("store_failure_mode_activations_total",
                 {{"mode", std::string(failureModeName(mode))}})
        .value();
  }

  Metrics metrics_;
  ManualClock clock_;
  std::shared_ptr<FakePrimary> primary_ = std::make_shared<FakePrimary>();
  StorePtr fallback_ = makeMemoryStore(MemoryStoreOptions{}, clock_, metrics_);
};

TEST_F(FailoverStoreTest, HealthyPrimaryAnswersAndNothingIsDegraded) {
  auto store = make(FailureMode::kLocal);
  auto r = call(*store);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->degraded);
  EXPECT_EQ(primary_->calls, 1);
  EXPECT_EQ(activations(FailureMode::kLocal), 0u);
}

TEST_F(FailoverStoreTest, OpenAllowsAndFlagsDegraded) {
  auto store = make(FailureMode::kOpen);
  primary_->error = makeError(ErrorKind::kTimeout, "late");
  auto r = call(*store, 7);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->allowed);
  EXPECT_TRUE(r->degraded);
  EXPECT_EQ(r->outcomes.size(), 1u);
  EXPECT_EQ(metrics_.counter("store_errors_total", {{"kind", "timeout"}}).value(), 1u);
  EXPECT_TRUE(store->healthy());
}

TEST_F(FailoverStoreTest, ClosedReturnsTheErrorAndIsUnhealthyWithThePrimary) {
  auto store = make(FailureMode::kClosed);
  primary_->error = makeError(ErrorKind::kConnection, "refused");
  primary_->up = false;
  auto r = call(*store);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kConnection);
  EXPECT_FALSE(store->healthy());
  EXPECT_EQ(metrics_.counter("store_errors_total", {{"kind", "connection"}}).value(), 1u);
}

TEST_F(FailoverStoreTest, LocalDecidesFromTheFallbackWithoutAskingADisconnectedPrimary) {
  auto store = make(FailureMode::kLocal);
  primary_->up = false;
  auto first = call(*store);
  auto second = call(*store);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(first->allowed);
  EXPECT_TRUE(first->degraded);
  EXPECT_FALSE(second->allowed);  // the memory store counted the first one (limit 1)
  EXPECT_EQ(primary_->calls, 0);
}

TEST_F(FailoverStoreTest, LocalFallsBackForACallThatFails) {
  auto store = make(FailureMode::kLocal);
  primary_->error = makeError(ErrorKind::kTimeout, "late");
  auto r = call(*store);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->degraded);
  EXPECT_EQ(primary_->calls, 1);
}

TEST_F(FailoverStoreTest, OneOutageIsOneActivationAcrossCallsAndThreadsStores) {
  auto a = make(FailureMode::kLocal);  // two I/O threads' stores sharing one fallback
  auto b = make(FailureMode::kLocal);
  primary_->up = false;
  for (int i = 0; i < 5; ++i) {
    (void)call(*a, 100);
    (void)call(*b, 100);
  }
  EXPECT_EQ(activations(FailureMode::kLocal), 1u);
  primary_->up = true;
  EXPECT_FALSE(call(*a, 100)->degraded);
  EXPECT_FALSE(call(*b, 100)->degraded);
  primary_->up = false;
  (void)call(*b, 100);
  EXPECT_EQ(activations(FailureMode::kLocal), 2u);  // a second outage
}

}  // namespace
}  // namespace sluice
