#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "sluice/limiter/limiter.hpp"
#include "support/bucket_driver.hpp"

// Random traces against the algorithms: invariants that must hold for every request, and
// the bounds each algorithm promises over any span of time.
namespace sluice {
namespace {

using test::kT0;

constexpr Micros kSecond = kMicrosPerSecond;
constexpr int kSeeds = 12;
constexpr int kRequestsPerTrace = 1500;

struct Admitted {
  Micros at = 0;
  std::int64_t cost = 0;
  Micros delay = 0;
};

std::string describe(const LimitParams& p, std::uint64_t seed) {
  return std::string(algorithmName(p.algorithm)) + " L=" + std::to_string(p.limit) +
         " W=" + std::to_string(p.window_us) + " B=" + std::to_string(p.burst) +
         " min_interval=" + std::to_string(p.min_interval_us) +
         " warmup=" + std::to_string(p.warmup_us) +
         " count_rejected=" + std::to_string(p.count_rejected) + " seed=" + std::to_string(seed);
}

bool sameOutcome(const Outcome& x, const Outcome& y) {
  return x.allowed == y.allowed && x.remaining == y.remaining &&
         x.reset_after_us == y.reset_after_us && x.retry_after_us == y.retry_after_us &&
         x.delay_us == y.delay_us && x.never == y.never;
}

LimitParams randomParams(Algorithm algorithm, std::mt19937_64& rng) {
  const Micros windows[] = {kSecond, 3 * kSecond, 700'001, 60 * kSecond};
  LimitParams p;
  p.algorithm = algorithm;
  p.limit = std::uniform_int_distribution<std::int64_t>(1, 12)(rng);
  p.window_us = windows[rng() % 4];
  if (algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kLeakyBucket) {
    p.burst = (rng() % 2 == 0) ? 0 : std::uniform_int_distribution<std::int64_t>(1, 20)(rng);
  }
  if (algorithm == Algorithm::kSlidingWindowLog && rng() % 2 == 0) {
    p.min_interval_us = std::uniform_int_distribution<Micros>(1, p.window_us / 4)(rng);
  }
  if (algorithm == Algorithm::kTokenBucket && rng() % 2 == 0) {
    p.warmup_us = std::uniform_int_distribution<Micros>(1, 3 * p.window_us)(rng);
  }
  p.count_rejected = rng() % 3 == 0;
  return p;
}

/// Runs a random trace; checks the per-request invariants and returns what was admitted.
std::vector<Admitted> runTrace(const LimitParams& p, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::int64_t most =
      p.algorithm == Algorithm::kTokenBucket || p.algorithm == Algorithm::kLeakyBucket
          ? effectiveBurst(p)
          : p.limit;
  const Micros mean_gap = p.window_us / (p.limit * 2);
  std::vector<Admitted> admitted;
  BucketState state;
  Micros now = kT0 + static_cast<Micros>(rng() % static_cast<std::uint64_t>(p.window_us));
  for (int i = 0; i < kRequestsPerTrace; ++i) {
    // Mostly bursts and short gaps, sometimes a long pause.
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 3) {
      now += 0;
    } else if (kind < 9) {
      now += std::uniform_int_distribution<Micros>(1, 2 * mean_gap + 1)(rng);
    } else {
      now += std::uniform_int_distribution<Micros>(1, 3 * p.window_us)(rng);
    }
    const std::int64_t cost =
        (rng() % 20 == 0) ? 0 : std::uniform_int_distribution<std::int64_t>(1, most + 1)(rng);
    const Evaluation e = evaluate(p, state, now, cost);
    const Outcome& o = e.outcome;
    EXPECT_GE(o.remaining, 0);
    EXPECT_GE(o.reset_after_us, 0);
    EXPECT_GE(e.ttl_us, 0);
    EXPECT_EQ(o.never, cost > most);
    if (o.never) {
      EXPECT_FALSE(o.allowed);
      EXPECT_EQ(o.retry_after_us, kRetryNever);
    } else if (o.allowed) {
      EXPECT_EQ(o.retry_after_us, 0);
    }
    const bool record = o.allowed || p.count_rejected;
    const BucketState after = record ? e.next : state;
    if (!o.allowed && !o.never) {
      // Exact retry, on the state this attempt left behind.
      const Micros r = o.retry_after_us;
      EXPECT_GT(r, 0);
      EXPECT_FALSE(evaluate(p, after, now + r - 1, cost).outcome.allowed) << "at " << i;
      EXPECT_TRUE(evaluate(p, after, now + r, cost).outcome.allowed) << "at " << i;
    }
    if (record) {
      // After ttl the state is indistinguishable from a fresh bucket.
      for (Micros d : {Micros{0}, Micros{1}, p.window_us / 3}) {
        const Micros later = now + e.ttl_us + d;
        EXPECT_TRUE(sameOutcome(evaluate(p, e.next, later, 1).outcome,
                                evaluate(p, BucketState{}, later, 1).outcome))
            << "ttl " << e.ttl_us << " at " << i;
      }
    }
    if (o.allowed && cost > 0) {
      admitted.push_back(Admitted{now, cost, o.delay_us});
    }
    state = after;
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << describe(p, seed) << " request " << i << " cost " << cost;
      break;
    }
  }
  return admitted;
}

class PropertyTest : public ::testing::TestWithParam<Algorithm> {};

TEST_P(PropertyTest, InvariantsHoldOnRandomTraces) {
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    std::mt19937_64 rng(seed * 7919);
    const LimitParams p = randomParams(GetParam(), rng);
    const std::size_t admitted = runTrace(p, seed).size();
    // The traces exercise both sides of the decision.
    EXPECT_GT(admitted, 10U) << describe(p, seed);
    EXPECT_LT(admitted, static_cast<std::size_t>(kRequestsPerTrace) * 9 / 10) << describe(p, seed);
    if (HasFailure()) {
      return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, PropertyTest,
                         ::testing::Values(Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog,
                                           Algorithm::kSlidingWindowCounter,
                                           Algorithm::kTokenBucket, Algorithm::kLeakyBucket),
                         [](const auto& info) { return std::string(algorithmName(info.param)); });

TEST(SlidingWindowLogPropertyTest, NeverAdmitsMoreThanLInAnyWindow) {
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    std::mt19937_64 rng(seed);
    const LimitParams p = randomParams(Algorithm::kSlidingWindowLog, rng);
    const std::vector<Admitted> admitted = runTrace(p, seed);
    // Every window (t - W, t] with t an admission time holds at most L cost.
    std::size_t first = 0;
    std::int64_t sum = 0;
    for (std::size_t j = 0; j < admitted.size(); ++j) {
      sum += admitted[j].cost;
      while (admitted[first].at <= admitted[j].at - p.window_us) {
        sum -= admitted[first].cost;
        ++first;
      }
      ASSERT_LE(sum, p.limit) << describe(p, seed) << " at " << j;
    }
  }
}

TEST(FixedWindowPropertyTest, NeverAdmitsMoreThanLPerWindow) {
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    std::mt19937_64 rng(seed);
    const LimitParams p = randomParams(Algorithm::kFixedWindow, rng);
    std::map<Micros, std::int64_t> per_window;
    for (const Admitted& a : runTrace(p, seed)) {
      per_window[a.at / p.window_us] += a.cost;
    }
    for (const auto& [window, sum] : per_window) {
      ASSERT_LE(sum, p.limit) << describe(p, seed) << " window " << window;
    }
  }
}

TEST(TokenBucketPropertyTest, NeverAdmitsMoreThanBurstPlusRateOverAnySpan) {
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    for (Algorithm algorithm : {Algorithm::kTokenBucket, Algorithm::kLeakyBucket}) {
      std::mt19937_64 rng(seed * 31);
      const LimitParams p = randomParams(algorithm, rng);
      const std::vector<Admitted> admitted = runTrace(p, seed);
      // Over [t_i, t_j]: sum * W <= B * W + L * (t_j - t_i), in exact integers (these traces
      // stay far below 2^63).
      const std::int64_t burst_w = effectiveBurst(p) * p.window_us;
      for (std::size_t i = 0; i < admitted.size(); ++i) {
        std::int64_t sum = 0;
        for (std::size_t j = i; j < admitted.size(); ++j) {
          sum += admitted[j].cost;
          const std::int64_t span = admitted[j].at - admitted[i].at;
          ASSERT_LE(sum * p.window_us, burst_w + p.limit * span)
              << describe(p, seed) << " span " << i << ".." << j;
        }
      }
    }
  }
}

TEST(LeakyBucketPropertyTest, RequestsLeaveInOrderAtTheDrainRate) {
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    std::mt19937_64 rng(seed * 101);
    const LimitParams p = randomParams(Algorithm::kLeakyBucket, rng);
    const std::vector<Admitted> admitted = runTrace(p, seed);
    for (std::size_t j = 1; j < admitted.size(); ++j) {
      const Micros leaves = admitted[j].at + admitted[j].delay;
      const Micros before = admitted[j - 1].at + admitted[j - 1].delay;
      const Micros drain = admitted[j - 1].cost * p.window_us / p.limit;
      ASSERT_GE(leaves - before, drain) << describe(p, seed) << " at " << j;
      ASSERT_LE(admitted[j].delay, effectiveBurst(p) * p.window_us / p.limit + 1);
    }
  }
}

TEST(RemainingPropertyTest, ExactlyRemainingMoreUnitRequestsPassAtOnce) {
  for (Algorithm algorithm :
       {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
        Algorithm::kTokenBucket, Algorithm::kLeakyBucket}) {
    for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
      std::mt19937_64 rng(seed * 17);
      LimitParams p = randomParams(algorithm, rng);
      p.min_interval_us = 0;  // remaining counts capacity, not spacing
      p.warmup_us = 0;        // remaining counts at the stable interval
      BucketState state;
      Micros now = kT0;
      for (int i = 0; i < 200; ++i) {
        now += static_cast<Micros>(rng() % static_cast<std::uint64_t>(p.window_us / 2));
        Evaluation e = evaluate(p, state, now, 1);
        if (!e.outcome.allowed) {
          continue;
        }
        BucketState probe = e.next;
        for (std::int64_t k = 0; k < e.outcome.remaining; ++k) {
          Evaluation more = evaluate(p, probe, now, 1);
          ASSERT_TRUE(more.outcome.allowed) << describe(p, seed) << " k=" << k;
          probe = more.next;
        }
        ASSERT_FALSE(evaluate(p, probe, now, 1).outcome.allowed) << describe(p, seed);
        state = e.next;
      }
    }
  }
}

}  // namespace
}  // namespace sluice
