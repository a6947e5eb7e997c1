// One table of cases, each a sequence of (time, cost) with the expected decision, remaining
// and retry_after, run against the memory store (C++ limiter) and a real redis-server (Lua).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "conformance/conformance_harness.hpp"

namespace sluice::conformance {
namespace {

constexpr Micros kMs = kMicrosPerMilli;
constexpr Micros kSec = kMicrosPerSecond;

struct Step {
  Micros at = 0;  ///< offset from kT0
  std::int64_t cost = 1;
  bool allowed = true;
  std::int64_t remaining = 0;
  Micros retry_after = 0;
  Micros delay = 0;  ///< leaky_bucket only
};

struct Case {
  std::string name;
  LimitParams params;
  std::vector<Step> steps;
};

LimitParams params(Algorithm algorithm, std::int64_t limit, Micros window) {
  LimitParams p;
  p.algorithm = algorithm;
  p.limit = limit;
  p.window_us = window;
  return p;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  {
    Case c{"fixed_window_admits_L_then_waits_for_the_window",
           params(Algorithm::kFixedWindow, 3, kSec),
           {}};
    c.steps = {{0, 1, true, 2, 0},         {100 * kMs, 1, true, 1, 0},
               {200 * kMs, 1, true, 0, 0}, {300 * kMs, 1, false, 0, 700 * kMs},
               {999'999, 1, false, 0, 1},  {kSec, 1, true, 2, 0},
               {kSec, 5, false, 2, -1},  // cost > L: never
               {kSec, 0, true, 2, 0},    // a check consumes nothing
               {kSec, 2, true, 0, 0}};
    out.push_back(c);
  }
  {
    LimitParams p = params(Algorithm::kFixedWindow, 1, kSec);
    p.count_rejected = true;
    Case c{"fixed_window_count_rejected", p, {}};
    c.steps = {{0, 1, true, 0, 0},
               {10 * kMs, 1, false, 0, 990 * kMs},
               {20 * kMs, 1, false, 0, 980 * kMs},
               {kSec, 1, true, 0, 0}};
    out.push_back(c);
  }
  {
    Case c{"sliding_window_log_retry_when_entries_age_out",
           params(Algorithm::kSlidingWindowLog, 2, kSec),
           {}};
    c.steps = {{0, 1, true, 1, 0},
               {400 * kMs, 1, true, 0, 0},
               {500 * kMs, 1, false, 0, 500 * kMs},
               {kSec, 1, true, 0, 0},
               {1100 * kMs, 1, false, 0, 300 * kMs},
               {1100 * kMs, 3, false, 0, -1}};
    out.push_back(c);
  }
  {
    LimitParams p = params(Algorithm::kSlidingWindowLog, 10, kSec);
    p.min_interval_us = 100 * kMs;
    Case c{"sliding_window_log_min_interval", p, {}};
    c.steps = {{0, 1, true, 9, 0}, {50 * kMs, 1, false, 9, 50 * kMs}, {100 * kMs, 1, true, 8, 0}};
    out.push_back(c);
  }
  {
    LimitParams p = params(Algorithm::kSlidingWindowLog, 2, kSec);
    p.count_rejected = true;
    Case c{"sliding_window_log_count_rejected", p, {}};
    c.steps = {{0, 1, true, 1, 0},
               {100 * kMs, 1, true, 0, 0},
               {200 * kMs, 1, false, 0, 900 * kMs},
               {kSec, 1, false, 0, 200 * kMs}};
    out.push_back(c);
  }
  {
    Case c{"sliding_window_counter_weighs_the_previous_window",
           params(Algorithm::kSlidingWindowCounter, 10, kSec),
           {}};
    c.steps = {{0, 6, true, 4, 0},
               {1250 * kMs, 5, true, 0, 0},         // 6 * 0.75 + 5 = 9.5
               {1300 * kMs, 1, false, 0, 33'334}};  // 6 * 0.7 + 5 + 1 = 10.2
    out.push_back(c);
  }
  {
    Case c{"token_bucket_refills_one_token_per_interval",
           params(Algorithm::kTokenBucket, 10, kSec),
           {}};
    c.steps = {{0, 10, true, 0, 0},
               {0, 1, false, 0, 100 * kMs},
               {100 * kMs, 1, true, 0, 0},
               {2100 * kMs, 1, true, 9, 0},
               {2100 * kMs, 11, false, 9, -1}};
    out.push_back(c);
  }
  {
    LimitParams p = params(Algorithm::kTokenBucket, 3, kSec);  // T = 333333.33 us
    Case c{"token_bucket_fractional_interval", p, {}};
    c.steps = {{0, 3, true, 0, 0}, {0, 1, false, 0, 333'334}, {333'334, 1, true, 0, 0}};
    out.push_back(c);
  }
  {
    LimitParams p = params(Algorithm::kLeakyBucket, 10, kSec);
    p.burst = 3;
    Case c{"leaky_bucket_queues_with_delay", p, {}};
    c.steps = {{0, 1, true, 2, 0, 0},
               {0, 1, true, 1, 0, 100 * kMs},
               {0, 1, true, 0, 0, 200 * kMs},
               {0, 1, false, 0, 100 * kMs, 0},
               {100 * kMs, 1, true, 0, 0, 200 * kMs}};
    out.push_back(c);
  }
  {
    Case c{"zero_limit_blocks_everything", params(Algorithm::kFixedWindow, 0, kSec), {}};
    c.steps = {{0, 1, false, 0, -1}, {0, 0, true, 0, 0}};
    out.push_back(c);
  }
  return out;
}

class ConformanceTableTest : public ::testing::TestWithParam<Case> {};

TEST_P(ConformanceTableTest, MemoryAndRedisGiveTheExpectedDecisions) {
  const Case& c = GetParam();
  StorePair pair(testPrefix());
  StoreLimit limit;
  limit.key = "table:" + c.name;
  limit.params = c.params;
  for (std::size_t i = 0; i < c.steps.size(); ++i) {
    const Step& s = c.steps[i];
    pair.clock().set(kT0 + s.at);
    StoreRequest request = clientRequest({limit}, s.cost, "client");
    for (Store* store : {&pair.memory(), &pair.redis()}) {
      auto r = pair.run(*store, request);
      ASSERT_TRUE(r.ok()) << store->kind() << ": " << r.error().message;
      const Outcome& o = r->outcomes.at(0);
      SCOPED_TRACE(std::string(store->kind()) + " step " + std::to_string(i));
      EXPECT_EQ(r->allowed, s.allowed) << str(o);
      EXPECT_EQ(o.allowed, s.allowed) << str(o);
      EXPECT_EQ(o.remaining, s.remaining) << str(o);
      EXPECT_EQ(o.retry_after_us, s.retry_after) << str(o);
      EXPECT_EQ(o.delay_us, s.delay) << str(o);
      EXPECT_EQ(o.never, s.retry_after < 0) << str(o);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ConformanceTableTest, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

TEST(ConformanceMultiLimitTest, ADeniedRequestLeavesTheOtherLimitsUntouched) {
  StorePair pair(testPrefix());
  StoreLimit loose{"multi:loose", params(Algorithm::kTokenBucket, 5, kSec), false, std::nullopt,
                   -1};
  StoreLimit tight{"multi:tight", params(Algorithm::kSlidingWindowLog, 1, kSec), false,
                   std::nullopt, -1};
  for (Store* store : {&pair.memory(), &pair.redis()}) {
    SCOPED_TRACE(std::string(store->kind()));
    StoreRequest both = clientRequest({loose, tight}, 1, "c");
    auto first = pair.run(*store, both);
    ASSERT_TRUE(first.ok());
    EXPECT_TRUE(first->allowed);
    auto second = pair.run(*store, both);
    ASSERT_TRUE(second.ok());
    EXPECT_FALSE(second->allowed);
    EXPECT_TRUE(second->outcomes[0].allowed);
    EXPECT_FALSE(second->outcomes[1].allowed);
    auto check = pair.run(*store, clientRequest({loose}, 0, "c"));
    ASSERT_TRUE(check.ok());
    EXPECT_EQ(check->outcomes[0].remaining, 4) << "the denied request charged the loose limit";
  }
}

TEST(ConformanceMultiLimitTest, ShadowLimitsAreChargedButNeverDeny) {
  StorePair pair(testPrefix());
  StoreLimit shadow{"multi:shadow", params(Algorithm::kFixedWindow, 1, kSec), true, std::nullopt,
                    -1};
  StoreLimit real{"multi:real", params(Algorithm::kFixedWindow, 5, kSec), false, std::nullopt, -1};
  for (Store* store : {&pair.memory(), &pair.redis()}) {
    SCOPED_TRACE(std::string(store->kind()));
    StoreRequest both = clientRequest({shadow, real}, 1, "c");
    ASSERT_TRUE(pair.run(*store, both)->allowed);
    auto second = pair.run(*store, both);
    ASSERT_TRUE(second.ok());
    EXPECT_TRUE(second->allowed);
    EXPECT_FALSE(second->outcomes[0].allowed);
    EXPECT_EQ(second->outcomes[1].remaining, 3);
  }
}

}  // namespace
}  // namespace sluice::conformance
