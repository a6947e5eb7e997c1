// The Lua scripts against the C++ limiter with production-sized numbers (limits up to
// millions, bursts up to 2 L, windows up to a day, costs up to the burst and beyond), where
// the GCRA's remaining-count search and the sliding log's trimming work on large values; and
// the stored state format, which sidecars of different versions sharing one Redis must agree
// on.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "conformance/conformance_harness.hpp"

namespace sluice::conformance {
namespace {

constexpr int kTraces = 8;
constexpr int kSteps = 200;

LimitParams largeParams(std::mt19937_64& rng, Algorithm algorithm) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  static constexpr std::int64_t kLimits[] = {1000, 99'991, 1'000'000, 7'654'321};
  static constexpr Micros kWindows[] = {kMicrosPerSecond, 3 * kMicrosPerSecond + 7,
                                        3600 * kMicrosPerSecond, 86'400 * kMicrosPerSecond};
  LimitParams p;
  p.algorithm = algorithm;
  p.limit = kLimits[pick(0, 3)];
  p.window_us = kWindows[pick(0, 3)];
  p.count_rejected = pick(0, 3) == 0;
  if (algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kLeakyBucket) {
    p.burst = pick(0, 1) == 0 ? 0 : pick(1, 2 * p.limit);
  }
  if (algorithm == Algorithm::kSlidingWindowLog && pick(0, 2) == 0) {
    p.min_interval_us = pick(1, p.window_us / 1000);
  }
  if (algorithm == Algorithm::kTokenBucket && pick(0, 2) == 0) {
    p.warmup_us = pick(1, 4 * p.window_us);
  }
  return p;
}

// Costs on the scale of the limit, so that buckets fill, deny and drain within a trace.
void compareLargeTrace(StorePair& pair, std::mt19937_64& rng, Algorithm algorithm, int id) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  StoreLimit limit;
  limit.key = "large" + std::to_string(id);
  limit.params = largeParams(rng, algorithm);
  const LimitParams& p = limit.params;
  const std::int64_t capacity = p.burst > 0 ? p.burst : p.limit;
  const Micros per_request = std::max<Micros>(1, p.window_us / p.limit);
  Micros now = kT0 + pick(0, p.window_us);
  for (int s = 0; s < kSteps; ++s) {
    const std::int64_t r = pick(0, 99);
    if (r < 30) {
      now += 0;
    } else if (r < 80) {
      now += pick(1, 50) * per_request;
    } else if (r < 95) {
      now += pick(1, p.window_us / 4);
    } else {
      now += pick(p.window_us, 3 * p.window_us);
    }
    const std::int64_t c = pick(0, 99);
    const std::int64_t cost = c < 40   ? 1
                              : c < 45 ? 0
                              : c < 85 ? pick(2, capacity / 4 + 2)
                              : c < 97 ? pick(capacity / 2, capacity)
                                       : pick(capacity + 1, 2 * capacity + 1);
    pair.clock().set(now);
    StoreRequest request = clientRequest({limit}, cost, "large-client");
    auto m = pair.run(pair.memory(), request);
    auto rd = pair.run(pair.redis(), request);
    ASSERT_TRUE(m.ok()) << m.error().message;
    ASSERT_TRUE(rd.ok()) << rd.error().message;
    ASSERT_TRUE(sameOutcome(m->outcomes[0], rd->outcomes[0]))
        << "step " << s << " at +" << (now - kT0) << "us cost " << cost << " ("
        << algorithmName(p.algorithm) << " L=" << p.limit << " W=" << p.window_us
        << " B=" << p.burst << " min_interval=" << p.min_interval_us << " warmup=" << p.warmup_us
        << " count_rejected=" << p.count_rejected << "): memory " << str(m->outcomes[0])
        << " vs redis " << str(rd->outcomes[0]);
  }
}

class LargeLimitsTraceTest : public ::testing::TestWithParam<Algorithm> {};

TEST_P(LargeLimitsTraceTest, LuaDecidesExactlyLikeTheCppLimiter) {
  StorePair pair(testPrefix());
  std::mt19937_64 rng(0x1a7e + static_cast<int>(GetParam()));
  for (int t = 0; t < kTraces; ++t) {
    SCOPED_TRACE("trace " + std::to_string(t));
    compareLargeTrace(pair, rng, GetParam(), t);
    if (HasFatalFailure()) {
      return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, LargeLimitsTraceTest,
                         ::testing::Values(Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog,
                                           Algorithm::kSlidingWindowCounter,
                                           Algorithm::kTokenBucket, Algorithm::kLeakyBucket),
                         [](const auto& info) { return std::string(algorithmName(info.param)); });

// The script reads the states in batches of MGETs (Lua's unpack() has a stack limit): a
// request with more limits than one batch still decides every limit like the limiter.
TEST(ManyLimitsTest, ARequestWithMoreLimitsThanOneReadBatchDecidesEveryLimit) {
  StorePair pair(testPrefix());
  std::vector<StoreLimit> limits;
  for (int i = 0; i < 2500; ++i) {
    StoreLimit l;
    l.key = "many:" + std::to_string(i);
    l.params.algorithm = i % 2 == 0 ? Algorithm::kFixedWindow : Algorithm::kTokenBucket;
    l.params.limit = 1 + i % 3;
    l.params.window_us = kMicrosPerSecond;
    limits.push_back(l);
  }
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    pair.clock().set(kT0 + step * 1000);
    StoreRequest request = clientRequest(limits, 1, "many-client");
    auto m = pair.run(pair.memory(), request);
    auto r = pair.run(pair.redis(), request);
    ASSERT_TRUE(m.ok()) << m.error().message;
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(m->allowed, r->allowed);
    ASSERT_EQ(r->outcomes.size(), limits.size());
    for (std::size_t k = 0; k < limits.size(); ++k) {
      ASSERT_TRUE(sameOutcome(m->outcomes[k], r->outcomes[k]))
          << "limit " << k << ": memory " << str(m->outcomes[k]) << " vs redis "
          << str(r->outcomes[k]);
    }
  }
}

// MessagePack as cmsgpack writes a non-negative integer.
std::string packUnsigned(std::uint64_t n) {
  std::string out;
  auto bigEndian = [&](int bytes) {
    for (int i = bytes - 1; i >= 0; --i) {
      out += static_cast<char>((n >> (8 * i)) & 0xff);
    }
  };
  if (n <= 0x7f) {
    out += static_cast<char>(n);
  } else if (n <= 0xff) {
    out += '\xcc';
    bigEndian(1);
  } else if (n <= 0xffff) {
    out += '\xcd';
    bigEndian(2);
  } else if (n <= 0xffffffffULL) {
    out += '\xce';
    bigEndian(4);
  } else {
    out += '\xcf';
    bigEndian(8);
  }
  return out;
}

// The stored state: a MessagePack array (fixarray, at most 15 values here) of integers.
std::string packState(const std::vector<std::uint64_t>& values) {
  std::string out(1, static_cast<char>(0x90 | values.size()));
  for (std::uint64_t v : values) {
    out += packUnsigned(v);
  }
  return out;
}

class StateFormatTest : public ::testing::Test {
 protected:
  StateFormatTest() : prefix_(testPrefix()), pair_(prefix_) {}

  std::string key(const StoreLimit& limit) {
    return BucketKey::redisKey(prefix_, BucketKey::storeKey("format-client", limit.key));
  }
  Result<StoreResponse> run(const StoreLimit& limit, std::int64_t cost = 1) {
    return pair_.run(pair_.redis(), clientRequest({limit}, cost, "format-client"));
  }
  std::string stored(const StoreLimit& limit) {
    auto reply = sharedRedis().command({"GET", key(limit)});
    return reply->type == REDIS_REPLY_STRING ? std::string(reply->str, reply->len) : "<none>";
  }

  std::string prefix_;
  StorePair pair_;
};

// Sidecars of different versions share one Redis during a rolling upgrade: each must read
// the states the other writes, so the format is pinned byte for byte.
TEST_F(StateFormatTest, FixedWindowReadsAndWritesTheSharedFormat) {
  StoreLimit limit;
  limit.key = "format:fixed_window";
  limit.params.algorithm = Algorithm::kFixedWindow;
  limit.params.limit = 5;
  limit.params.window_us = kMicrosPerSecond;
  pair_.clock().set(kT0 + 250'000);
  sharedRedis().command({"SET", key(limit), packState({kT0, 4, 0}), "PX", "60000"});
  auto r = run(limit);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->allowed);
  EXPECT_EQ(r->outcomes[0].remaining, 0);
  EXPECT_EQ(stored(limit), packState({kT0, 5, 0}));
  auto denied = run(limit);
  ASSERT_TRUE(denied.ok());
  EXPECT_FALSE(denied->allowed);
  EXPECT_EQ(denied->outcomes[0].retry_after_us, 750'000);
}

TEST_F(StateFormatTest, SlidingWindowLogReadsAndWritesTheSharedFormat) {
  StoreLimit limit;
  limit.key = "format:sliding_window_log";
  limit.params.algorithm = Algorithm::kSlidingWindowLog;
  limit.params.limit = 3;
  limit.params.window_us = kMicrosPerSecond;
  // a = last admitted, b = 1, c = 0, then (at, cost) pairs, oldest first.
  sharedRedis().command({"SET", key(limit),
                         packState({kT0 + 100, 1, 0, kT0 - 900'000, 1, kT0 + 100, 1}), "PX",
                         "60000"});
  pair_.clock().set(kT0 + 200);
  auto r = run(limit);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->allowed);
  EXPECT_EQ(r->outcomes[0].remaining, 0);
  EXPECT_EQ(stored(limit),
            packState({kT0 + 200, 1, 0, kT0 - 900'000, 1, kT0 + 100, 1, kT0 + 200, 1}));
  // The oldest entry ages out 100 ms after the window started at it.
  auto denied = run(limit);
  ASSERT_TRUE(denied.ok());
  EXPECT_FALSE(denied->allowed);
  EXPECT_EQ(denied->outcomes[0].retry_after_us, 100'000 - 200);
}

TEST_F(StateFormatTest, TokenBucketReadsAndWritesTheSharedFormat) {
  StoreLimit limit;
  limit.key = "format:token_bucket";
  limit.params.algorithm = Algorithm::kTokenBucket;
  limit.params.limit = 3;  // one token per 333 333 + 1/3 us
  limit.params.window_us = kMicrosPerSecond;
  // TAT = kT0 + 2 tokens' worth (666 666 + 2/3 us): a = whole us, b = remainder in 1/L us.
  sharedRedis().command({"SET", key(limit), packState({kT0 + 666'666, 2, 0}), "PX", "60000"});
  pair_.clock().set(kT0);
  auto r = run(limit);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->allowed);
  EXPECT_EQ(r->outcomes[0].remaining, 0);
  EXPECT_EQ(stored(limit), packState({kT0 + 1'000'000, 0, 0}));
  auto denied = run(limit);
  ASSERT_TRUE(denied.ok());
  EXPECT_FALSE(denied->allowed);
  EXPECT_EQ(denied->outcomes[0].retry_after_us, 333'334);
}

}  // namespace
}  // namespace sluice::conformance
