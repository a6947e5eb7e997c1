#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/store/memory_store.hpp"

namespace sluice {
namespace {

constexpr Micros kT0 = 1'700'000'000LL * kMicrosPerSecond;
constexpr Micros kMinute = 60 * kMicrosPerSecond;

/// Two memory stores on one manual clock: one asked through evaluate() (with its locks and
/// callback), the other through its exclusive entry. Every answer must be the same.
class MemoryStoreExclusiveTest : public ::testing::Test {
 protected:
  void makeStores(std::size_t max_keys) {
    MemoryStoreOptions options;
    options.max_keys = max_keys;
    options.shards = 4;
    options.sketch_seed = "000102030405060708090a0b0c0d0e0f";
    shared_ = makeMemoryStore(options, clock_, shared_metrics_);
    alone_ = makeMemoryStore(options, clock_, alone_metrics_);
    exclusive_ = memoryExclusiveOf(*alone_);
    ASSERT_NE(exclusive_, nullptr);
  }

  StoreResponse shared(const StoreRequest& request) {
    std::optional<Result<StoreResponse>> got;
    shared_->evaluate(request, [&](Result<StoreResponse> r) { got.emplace(std::move(r)); });
    EXPECT_TRUE(got.has_value() && got->ok());
    return got->value();
  }

  static void expectSame(const StoreResponse& a, const StoreResponse& b, int step) {
    ASSERT_EQ(a.outcomes.size(), b.outcomes.size()) << "step " << step;
    for (std::size_t i = 0; i < a.outcomes.size(); ++i) {
      const Outcome& x = a.outcomes[i];
      const Outcome& y = b.outcomes[i];
      EXPECT_EQ(x.allowed, y.allowed) << "step " << step << " limit " << i;
      EXPECT_EQ(x.remaining, y.remaining) << "step " << step << " limit " << i;
      EXPECT_EQ(x.reset_after_us, y.reset_after_us) << "step " << step << " limit " << i;
      EXPECT_EQ(x.retry_after_us, y.retry_after_us) << "step " << step << " limit " << i;
      EXPECT_EQ(x.delay_us, y.delay_us) << "step " << step << " limit " << i;
      EXPECT_EQ(x.never, y.never) << "step " << step << " limit " << i;
      EXPECT_EQ(x.banned, y.banned) << "step " << step << " limit " << i;
      EXPECT_EQ(x.ban_step, y.ban_step) << "step " << step << " limit " << i;
    }
    EXPECT_EQ(a.allowed, b.allowed) << "step " << step;
    EXPECT_EQ(a.degraded, b.degraded) << "step " << step;
    EXPECT_EQ(a.at_us, b.at_us) << "step " << step;
    EXPECT_EQ(a.holds_expired, b.holds_expired) << "step " << step;
  }

  ManualClock clock_{kT0};
  Metrics shared_metrics_;
  Metrics alone_metrics_;
  StorePtr shared_;
  StorePtr alone_;
  MemoryExclusive* exclusive_ = nullptr;
};

LimitParams randomParams(std::mt19937_64& random, std::size_t rule) {
  static constexpr Algorithm kAlgorithms[] = {
      Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
      Algorithm::kTokenBucket, Algorithm::kLeakyBucket,      Algorithm::kSketch};
  LimitParams p;
  p.algorithm = kAlgorithms[rule % std::size(kAlgorithms)];
  p.limit = 2 + static_cast<std::int64_t>(rule % 4);
  p.window_us = (rule % 2 == 0) ? kMicrosPerSecond : kMinute;
  p.count_rejected = rule % 7 == 3;
  if (rule % 5 == 1) {  // a penalty box on some rules
    p.ban.after = 2;
    p.ban.duration_us = 30 * kMicrosPerSecond;
    p.ban.backoff_milli = 2000;
    p.ban.max_us = 5 * kMinute;
    p.ban.forgive_us = 10 * kMinute;
    p.ban.within_us = p.window_us;
  }
  (void)random;
  return p;
}

TEST_F(MemoryStoreExclusiveTest, AnswersAsEvaluateDoesOnTheSameRequests) {
  makeStores(1'000'000);
  std::mt19937_64 random(7);
  constexpr std::size_t kRules = 12;
  StoreResponse answer;
  for (int step = 0; step < 20'000; ++step) {
    StoreRequest request;
    request.cost = static_cast<std::int64_t>(random() % 4);
    request.charge = random() % 6 == 0 ? Charge::kEvery : Charge::kAllOrNothing;
    const std::size_t n = 1 + random() % 3;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t rule = random() % kRules;
      StoreLimit limit;
      limit.params = randomParams(random, rule);
      // A few clients per rule, so that buckets are shared, denied, banned and expire.
      limit.key = "r" + std::to_string(rule) + ":c" + std::to_string(random() % 5);
      limit.shadow = random() % 11 == 0;
      request.limits.push_back(limit);
    }
    clock_.advance(std::chrono::microseconds(random() % 400'000));
    if (step % 2 == 0) {
      exclusive_->evaluateExclusive(request, answer);
    } else {
      // The replay's way: the keys prefetched (hashed) ahead, their hashes handed in.
      std::vector<std::uint64_t> hashes;
      for (const StoreLimit& limit : request.limits) {
        hashes.push_back(exclusive_->prefetchKey(limit.key));
      }
      for (int prefetch_step = 1; prefetch_step <= 2; ++prefetch_step) {
        for (const std::uint64_t hash : hashes) {
          exclusive_->prefetchStep(hash, prefetch_step);
        }
      }
      exclusive_->evaluateExclusiveHashed(request, answer, hashes.data());
    }
    expectSame(shared(request), answer, step);
    if (HasFailure()) {
      return;
    }
  }
}

TEST_F(MemoryStoreExclusiveTest, EvictsAsEvaluateDoesAtTheKeyBound) {
  makeStores(50);
  std::mt19937_64 random(11);
  StoreResponse answer;
  for (int step = 0; step < 5'000; ++step) {
    StoreRequest request;
    StoreLimit limit;
    limit.params.algorithm = Algorithm::kFixedWindow;
    limit.params.limit = 3;
    limit.params.window_us = kMinute;
    limit.key = "k" + std::to_string(random() % 200);
    request.limits.push_back(limit);
    clock_.advance(std::chrono::microseconds(random() % 50'000));
    exclusive_->evaluateExclusive(request, answer);
    expectSame(shared(request), answer, step);
    if (HasFailure()) {
      return;
    }
  }
  EXPECT_EQ(
      shared_metrics_.counter("memory_store_evictions_total", {{"reason", "capacity"}}).value(),
      alone_metrics_.counter("memory_store_evictions_total", {{"reason", "capacity"}}).value());
  EXPECT_GT(
      alone_metrics_.counter("memory_store_evictions_total", {{"reason", "capacity"}}).value(), 0U);
}

}  // namespace
}  // namespace sluice
