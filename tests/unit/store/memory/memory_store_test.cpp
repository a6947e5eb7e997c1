#include "sluice/store/memory_store.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;

constexpr Micros kT0 = 1'700'000'000LL * kMicrosPerSecond;

LimitParams params(Algorithm algorithm, std::int64_t limit, Micros window = kMicrosPerSecond) {
  LimitParams p;
  p.algorithm = algorithm;
  p.limit = limit;
  p.window_us = window;
  return p;
}

StoreLimit limit(std::string key, LimitParams p, bool shadow = false) {
  StoreLimit limit;
  limit.key = std::move(key);
  limit.params = p;
  limit.shadow = shadow;
  return limit;
}

class MemoryStoreTest : public ::testing::Test {
 protected:
  void makeStore(std::size_t max_keys, std::size_t shards = 64) {
    MemoryStoreOptions options;
    options.max_keys = max_keys;
    options.shards = shards;
    store_ = makeMemoryStore(options, clock_, metrics_);
  }

  StoreResponse call(std::vector<StoreLimit> limits, std::int64_t cost = 1) {
    StoreRequest request;
    request.limits = std::move(limits);
    request.cost = cost;
    std::optional<Result<StoreResponse>> got;
    store_->evaluate(request, [&](Result<StoreResponse> r) { got.emplace(std::move(r)); });
    EXPECT_TRUE(got.has_value()) << "the memory store calls back inline";
    EXPECT_TRUE(got->ok());
    return got->value();
  }

  std::int64_t remaining(const StoreLimit& l) { return call({l}, 0).outcomes.at(0).remaining; }

  double keys() { return metrics_.gauge("memory_store_keys").value(); }
  std::uint64_t evictions(const std::string& reason) {
    return metrics_.counter("memory_store_evictions_total", {{"reason", reason}}).value();
  }

  ManualClock clock_{kT0};
  Metrics metrics_;
  StorePtr store_ = makeMemoryStore(MemoryStoreOptions{}, clock_, metrics_);
};

TEST_F(MemoryStoreTest, IsHealthyAndNamed) {
  EXPECT_TRUE(store_->healthy());
  EXPECT_EQ(store_->kind(), "memory");
}

TEST_F(MemoryStoreTest, AdmitsUpToTheLimitPerKey) {
  StoreLimit a = limit("a", params(Algorithm::kFixedWindow, 2));
  StoreLimit b = limit("b", params(Algorithm::kFixedWindow, 2));
  EXPECT_TRUE(call({a}).allowed);
  EXPECT_TRUE(call({a}).allowed);
  StoreResponse third = call({a});
  EXPECT_FALSE(third.allowed);
  EXPECT_EQ(third.outcomes.at(0).retry_after_us, kMicrosPerSecond);
  EXPECT_TRUE(call({b}).allowed);
  clock_.advance(1s);
  EXPECT_TRUE(call({a}).allowed);
}

TEST_F(MemoryStoreTest, ChargesNothingWhenAnyLimitDenies) {
  StoreLimit wide = limit("wide", params(Algorithm::kTokenBucket, 10));
  StoreLimit narrow = limit("narrow", params(Algorithm::kFixedWindow, 1));
  EXPECT_TRUE(call({wide, narrow}).allowed);
  EXPECT_EQ(remaining(wide), 9);
  StoreResponse denied = call({wide, narrow});
  EXPECT_FALSE(denied.allowed);
  EXPECT_TRUE(denied.outcomes.at(0).allowed);
  EXPECT_FALSE(denied.outcomes.at(1).allowed);
  EXPECT_EQ(remaining(wide), 9);  // all or nothing
}

TEST_F(MemoryStoreTest, ShadowLimitReportsButNeverDenies) {
  StoreLimit shadow = limit("shadow", params(Algorithm::kFixedWindow, 1), /*shadow=*/true);
  StoreLimit real = limit("real", params(Algorithm::kFixedWindow, 5));
  EXPECT_TRUE(call({shadow, real}).allowed);
  StoreResponse second = call({shadow, real});
  EXPECT_TRUE(second.allowed);
  EXPECT_FALSE(second.outcomes.at(0).allowed);
  EXPECT_EQ(remaining(real), 3);
}

TEST_F(MemoryStoreTest, CountRejectedLimitRecordsTheAttemptOfADeniedRequest) {
  LimitParams counted = params(Algorithm::kFixedWindow, 5);
  counted.count_rejected = true;
  StoreLimit a = limit("counted", counted);
  StoreLimit gate = limit("gate", params(Algorithm::kFixedWindow, 0));
  EXPECT_FALSE(call({a, gate}).allowed);
  EXPECT_EQ(remaining(a), 4);
}

TEST_F(MemoryStoreTest, AKeyNamedTwiceIsDecidedOnItsStateBeforeTheRequest) {
  // As the Redis script does: every limit reads the state before the request, the last
  // charged one is written.
  for (Algorithm algorithm : {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog}) {
    const std::string key = "twice-" + std::string(algorithmName(algorithm));
    StoreLimit twice = limit(key, params(algorithm, 2, 60 * kMicrosPerSecond));
    call({twice});
    StoreResponse both = call({twice, twice});
    EXPECT_TRUE(both.allowed) << algorithmName(algorithm);
    EXPECT_EQ(both.outcomes.at(1).remaining, 0);
    EXPECT_EQ(remaining(twice), 0) << algorithmName(algorithm);
    EXPECT_FALSE(call({twice, twice}).allowed);
  }
}

TEST_F(MemoryStoreTest, CheckWithHitsZeroStoresNothing) {
  StoreLimit a = limit("a", params(Algorithm::kSlidingWindowLog, 3));
  EXPECT_EQ(call({a}, 0).outcomes.at(0).remaining, 3);
  EXPECT_EQ(keys(), 0);
}

TEST_F(MemoryStoreTest, ManyThreadsOnOneKeyAdmitExactlyTheLimit) {
  for (Algorithm algorithm :
       {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
        Algorithm::kTokenBucket, Algorithm::kLeakyBucket}) {
    const std::string key = std::string("hot-") + std::string(algorithmName(algorithm));
    StoreLimit hot = limit(key, params(algorithm, 500, 3600 * kMicrosPerSecond));
    std::atomic<int> admitted{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 200; ++i) {
          if (call({hot}).allowed) {
            admitted.fetch_add(1);
          }
        }
      });
    }
    for (std::thread& t : threads) {
      t.join();
    }
    EXPECT_EQ(admitted.load(), 500) << algorithmName(algorithm);
  }
}

TEST_F(MemoryStoreTest, MultiLimitRequestsStayAllOrNothingUnderConcurrency) {
  // Two keys, 8 threads each alternating which key it names first: the store locks shards
  // in a fixed order, so this neither deadlocks nor lets one limit be charged alone.
  makeStore(1000, 4);
  StoreLimit a = limit("pair-a", params(Algorithm::kFixedWindow, 300, 3600 * kMicrosPerSecond));
  StoreLimit b = limit("pair-b", params(Algorithm::kFixedWindow, 1000, 3600 * kMicrosPerSecond));
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        const bool ok = (t % 2 == 0) ? call({a, b}).allowed : call({b, a}).allowed;
        admitted.fetch_add(ok ? 1 : 0);
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  EXPECT_EQ(admitted.load(), 300);
  EXPECT_EQ(remaining(a), 0);
  EXPECT_EQ(remaining(b), 700);
}

TEST_F(MemoryStoreTest, EvictsTheLeastRecentlyUsedKeyWhenFull) {
  makeStore(2, 1);
  StoreLimit a = limit("a", params(Algorithm::kFixedWindow, 5, 60 * kMicrosPerSecond));
  StoreLimit b = limit("b", params(Algorithm::kFixedWindow, 5, 60 * kMicrosPerSecond));
  StoreLimit c = limit("c", params(Algorithm::kFixedWindow, 5, 60 * kMicrosPerSecond));
  call({a});
  call({b});
  call({a});  // a is now the most recently used
  call({c});  // evicts b
  EXPECT_EQ(keys(), 2);
  EXPECT_EQ(evictions("capacity"), 1U);
  EXPECT_EQ(remaining(a), 3);
  EXPECT_EQ(remaining(b), 5);  // forgotten
  EXPECT_EQ(remaining(c), 4);
}

TEST_F(MemoryStoreTest, EvictsExpiredKeysBeforeLiveOnes) {
  makeStore(2, 1);
  StoreLimit shortlived = limit("short", params(Algorithm::kFixedWindow, 5, kMicrosPerSecond));
  StoreLimit longlived = limit("long", params(Algorithm::kFixedWindow, 5, 60 * kMicrosPerSecond));
  StoreLimit fresh = limit("fresh", params(Algorithm::kFixedWindow, 5, 60 * kMicrosPerSecond));
  call({longlived});
  call({shortlived});  // most recently used, but its window ends first
  clock_.advance(1s);
  call({fresh});
  EXPECT_EQ(evictions("expired"), 1U);
  EXPECT_EQ(evictions("capacity"), 0U);
  EXPECT_EQ(remaining(longlived), 4);
  EXPECT_EQ(keys(), 2);
}

TEST_F(MemoryStoreTest, IdleKeysExpireAfterTheirTtl) {
  makeStore(100, 1);
  call({limit("x", params(Algorithm::kFixedWindow, 5, kMicrosPerSecond))});
  call({limit("y", params(Algorithm::kTokenBucket, 5, kMicrosPerSecond))});
  EXPECT_EQ(keys(), 2);
  clock_.advance(2s);
  call({limit("z", params(Algorithm::kFixedWindow, 5, kMicrosPerSecond))});
  EXPECT_EQ(keys(), 1);
  EXPECT_EQ(evictions("expired"), 2U);
}

TEST_F(MemoryStoreTest, RequestsSweepIdleKeysAFewAtATime) {
  makeStore(10'000, 1);
  for (int i = 0; i < 1000; ++i) {
    call({limit("idle-" + std::to_string(i), params(Algorithm::kFixedWindow, 5))});
  }
  EXPECT_EQ(keys(), 1000);
  clock_.advance(1s);
  StoreLimit busy = limit("busy", params(Algorithm::kFixedWindow, 1000, 3600 * kMicrosPerSecond));
  call({busy});
  EXPECT_GT(keys(), 900);  // one request does a bounded amount of sweeping
  for (int i = 0; i < 40; ++i) {
    call({busy});
  }
  EXPECT_EQ(keys(), 1);
  EXPECT_EQ(evictions("expired"), 1000U);
}

TEST_F(MemoryStoreTest, AnExpiredEntryReadsAsAFreshBucket) {
  makeStore(100, 1);
  LimitParams p = params(Algorithm::kSlidingWindowLog, 1, kMicrosPerSecond);
  call({limit("k", p)});
  EXPECT_FALSE(call({limit("k", p)}).allowed);
  clock_.advance(1s);
  EXPECT_TRUE(call({limit("k", p)}).allowed);
}

TEST_F(MemoryStoreTest, ResetRemovesKeysByPrefix) {
  LimitParams p = params(Algorithm::kFixedWindow, 1, 60 * kMicrosPerSecond);
  call({limit("client-1|auth|login", p)});
  call({limit("client-1|auth|signup", p)});
  call({limit("client-2|auth|login", p)});
  std::optional<Result<std::size_t>> removed;
  store_->reset({"client-1|"}, [&](Result<std::size_t> r) { removed.emplace(std::move(r)); });
  ASSERT_TRUE(removed.has_value());
  ASSERT_TRUE(removed->ok());
  EXPECT_EQ(removed->value(), 2U);
  EXPECT_EQ(keys(), 1);
  EXPECT_TRUE(call({limit("client-1|auth|login", p)}).allowed);
  EXPECT_FALSE(call({limit("client-2|auth|login", p)}).allowed);
}

TEST_F(MemoryStoreTest, ManyKeysSurviveTableGrowthAndDeletion) {
  makeStore(5000, 2);
  LimitParams p = params(Algorithm::kFixedWindow, 3, 60 * kMicrosPerSecond);
  for (int i = 0; i < 4000; ++i) {
    call({limit("key-" + std::to_string(i), p)});
  }
  std::optional<Result<std::size_t>> removed;
  store_->reset({"key-1"}, [&](Result<std::size_t> r) { removed.emplace(std::move(r)); });
  EXPECT_EQ(removed->value(), 1111U);  // key-1, key-10..19, key-100..199, key-1000..1999
  for (int i = 0; i < 4000; ++i) {
    const bool erased = std::to_string(i).front() == '1';
    ASSERT_EQ(remaining(limit("key-" + std::to_string(i), p)), erased ? 3 : 2) << i;
  }
  EXPECT_EQ(keys(), 4000 - 1111);
}

}  // namespace
}  // namespace sluice
