// Random traces compared decision by decision: the C++ limiter (memory store) against the
// Lua scripts (real redis-server, test-time override), every field of every outcome.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "conformance/conformance_harness.hpp"

namespace sluice::conformance {
namespace {

constexpr int kTraces = 12;
constexpr int kStepsPerTrace = 300;

LimitParams randomParams(std::mt19937_64& rng, Algorithm algorithm) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  static constexpr Micros kWindows[] = {7 * kMicrosPerMilli, 250 * kMicrosPerMilli,
                                        kMicrosPerSecond, 3 * kMicrosPerSecond + 7,
                                        60 * kMicrosPerSecond};
  LimitParams p;
  p.algorithm = algorithm;
  p.limit = pick(0, 20) == 0 ? 0 : pick(1, 25);
  p.window_us = kWindows[pick(0, 4)];
  p.count_rejected = pick(0, 3) == 0;
  if (algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kLeakyBucket) {
    p.burst = pick(0, 1) == 0 ? 0 : pick(1, 30);
  }
  if (algorithm == Algorithm::kSlidingWindowLog && pick(0, 2) == 0) {
    p.min_interval_us = pick(1, p.window_us / 4 + 1);
  }
  if (algorithm == Algorithm::kTokenBucket && pick(0, 2) == 0) {
    p.warmup_us = pick(1, 4 * p.window_us);
  }
  return p;
}

struct Trace {
  std::vector<StoreLimit> limits;
  std::vector<std::pair<Micros, std::int64_t>> steps;  // (time, cost)
};

Trace randomTrace(std::mt19937_64& rng, const std::vector<Algorithm>& algorithms, int id) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  Trace t;
  Micros longest = 1;
  for (std::size_t i = 0; i < algorithms.size(); ++i) {
    StoreLimit l;
    l.key = "trace" + std::to_string(id) + ":limit" + std::to_string(i);
    l.params = randomParams(rng, algorithms[i]);
    l.shadow = algorithms.size() > 1 && pick(0, 4) == 0;
    longest = std::max(longest, l.params.window_us);
    t.limits.push_back(l);
  }
  // Start at a random offset so windows are not all aligned with the trace.
  Micros now = kT0 + pick(0, 10 * kMicrosPerSecond);
  for (int s = 0; s < kStepsPerTrace; ++s) {
    const std::int64_t r = pick(0, 99);
    if (r < 40) {
      now += 0;  // bursts at one instant
    } else if (r < 85) {
      now += pick(1, longest / 8 + 1);
    } else if (r < 97) {
      now += pick(longest / 2, 2 * longest);
    } else {
      now += pick(3 * longest, 5 * longest);  // everything expired
    }
    const std::int64_t c = pick(0, 99);
    const std::int64_t cost = c < 70 ? 1 : c < 80 ? 0 : c < 95 ? pick(2, 6) : pick(20, 40);
    t.steps.emplace_back(now, cost);
  }
  return t;
}

void compare(StorePair& pair, const Trace& trace) {
  for (std::size_t i = 0; i < trace.steps.size(); ++i) {
    const auto [now, cost] = trace.steps[i];
    pair.clock().set(now);
    StoreRequest request = clientRequest(trace.limits, cost, "random-client");
    auto m = pair.run(pair.memory(), request);
    auto r = pair.run(pair.redis(), request);
    ASSERT_TRUE(m.ok()) << m.error().message;
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(m->allowed, r->allowed) << "step " << i;
    for (std::size_t k = 0; k < trace.limits.size(); ++k) {
      const LimitParams& p = trace.limits[k].params;
      ASSERT_TRUE(sameOutcome(m->outcomes[k], r->outcomes[k]))
          << "step " << i << " at +" << (now - kT0) << "us cost " << cost << ", limit " << k << " ("
          << algorithmName(p.algorithm) << " L=" << p.limit << " W=" << p.window_us
          << " B=" << p.burst << " min_interval=" << p.min_interval_us << " warmup=" << p.warmup_us
          << " count_rejected=" << p.count_rejected << "): memory " << str(m->outcomes[k])
          << " vs redis " << str(r->outcomes[k]);
    }
  }
}

class RandomTraceTest : public ::testing::TestWithParam<Algorithm> {};

TEST_P(RandomTraceTest, LuaDecidesExactlyLikeTheCppLimiter) {
  StorePair pair(testPrefix());
  std::mt19937_64 rng(0x5eed + static_cast<int>(GetParam()));
  for (int t = 0; t < kTraces; ++t) {
    SCOPED_TRACE("trace " + std::to_string(t));
    compare(pair, randomTrace(rng, {GetParam()}, t));
    if (HasFatalFailure()) {
      return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, RandomTraceTest,
                         ::testing::Values(Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog,
                                           Algorithm::kSlidingWindowCounter,
                                           Algorithm::kTokenBucket, Algorithm::kLeakyBucket),
                         [](const auto& info) { return std::string(algorithmName(info.param)); });

TEST(RandomMixedTraceTest, MultiLimitRequestsMixingAlgorithmsDecideIdentically) {
  StorePair pair(testPrefix());
  std::mt19937_64 rng(0xc0ffee);
  const std::vector<Algorithm> all = {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog,
                                      Algorithm::kSlidingWindowCounter, Algorithm::kTokenBucket,
                                      Algorithm::kLeakyBucket};
  for (int t = 0; t < kTraces; ++t) {
    SCOPED_TRACE("trace " + std::to_string(t));
    std::vector<Algorithm> algorithms;
    const int n = std::uniform_int_distribution<int>(2, 4)(rng);
    for (int i = 0; i < n; ++i) {
      algorithms.push_back(all[std::uniform_int_distribution<std::size_t>(0, 4)(rng)]);
    }
    compare(pair, randomTrace(rng, algorithms, 100 + t));
    if (HasFatalFailure()) {
      return;
    }
  }
}

TEST(RandomLocalCacheTest, TheLocalOverLimitCacheNeverChangesADecision) {
  // The Redis store's local cache answers some denials without Redis: the decision and the
  // denying limit's retry_after must still be exactly the C++ limiter's.
  StorePair pair(testPrefix(), /*local_cache=*/true);
  Counter& hits = pair.metrics().counter("local_cache_hits_total");
  std::mt19937_64 rng(0xcace);
  const std::vector<Algorithm> all = {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog,
                                      Algorithm::kSlidingWindowCounter, Algorithm::kTokenBucket,
                                      Algorithm::kLeakyBucket};
  for (int t = 0; t < 3 * kTraces; ++t) {
    SCOPED_TRACE("trace " + std::to_string(t));
    std::vector<Algorithm> algorithms;
    const int n = std::uniform_int_distribution<int>(1, 3)(rng);
    for (int i = 0; i < n; ++i) {
      algorithms.push_back(all[std::uniform_int_distribution<std::size_t>(0, 4)(rng)]);
    }
    const Trace trace = randomTrace(rng, algorithms, 200 + t);
    for (std::size_t i = 0; i < trace.steps.size(); ++i) {
      const auto [now, cost] = trace.steps[i];
      pair.clock().set(now);
      StoreRequest request = clientRequest(trace.limits, cost, "cached-client");
      auto m = pair.run(pair.memory(), request);
      auto r = pair.run(pair.redis(), request);
      ASSERT_TRUE(m.ok() && r.ok());
      ASSERT_EQ(m->allowed, r->allowed) << "step " << i;
      for (std::size_t k = 0; k < trace.limits.size(); ++k) {
        if (!r->outcomes[k].allowed && !trace.limits[k].shadow) {
          ASSERT_EQ(m->outcomes[k].retry_after_us, r->outcomes[k].retry_after_us)
              << "step " << i << " limit " << k << ": memory " << str(m->outcomes[k])
              << " vs redis " << str(r->outcomes[k]);
        }
      }
    }
  }
  EXPECT_GT(hits.value(), 0u) << "the traces never exercised the cache";
}

}  // namespace
}  // namespace sluice::conformance
