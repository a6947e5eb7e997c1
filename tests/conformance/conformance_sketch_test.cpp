// The `sketch` algorithm against the memory store (C++ SketchTable) and a real redis-server
// (60_sketch.lua), on one simulated clock and one hash seed: the decisions must be identical
// on random traces (they are by construction: the cells come from the same C++ hash).
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "conformance_harness.hpp"
#include "sluice/limiter/sketch.hpp"
#include "store/redis/redis_sketch.hpp"

namespace sluice::conformance {
namespace {

constexpr const char* kSeed = "00112233445566778899aabbccddeeff";

LimitParams sketchParams(std::int64_t limit, Micros window, std::uint32_t width,
                         std::uint32_t depth, std::string rule) {
  LimitParams p;
  p.algorithm = Algorithm::kSketch;
  p.limit = limit;
  p.window_us = window;
  p.sketch.width = width;
  p.sketch.depth = depth;
  p.sketch.counter_bits = sketchCounterBits(limit);
  auto identity = std::make_shared<SketchIdentity>();
  identity->key = "d:" + rule + ":i0:w" + std::to_string(width) + "d" + std::to_string(depth);
  identity->domain = "d";
  identity->rule = rule;
  p.sketch.identity = identity;
  return p;
}

class SketchConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MemoryStoreOptions memory_options;
    memory_options.sketch_seed = kSeed;
    memory_ = makeMemoryStore(memory_options, clock_, metrics_);
    auto options = parseRedisUrl(sharedRedis().url());
    ASSERT_TRUE(options.ok());
    RedisOptions o = *options;
    o.key_prefix = testPrefix();
    o.local_cache = false;
    o.request_timeout = std::chrono::milliseconds(2000);
    // The seed every sidecar of this Redis shares, fixed here to the memory store's.
    sharedRedis().command({"SET", redis::sketchSeedKey(o.key_prefix), kSeed});
    o.script_time = ScriptTime::kStoreClock;  // the script decides on clock_'s timeline
    redis_ = makeRedisStore(io_, o, metrics_, clock_);
    ASSERT_TRUE(test::runUntil(io_, [&] { return redis_->healthy(); }));
  }

  Result<StoreResponse> run(Store& store, const StoreRequest& request) {
    std::optional<Result<StoreResponse>> result;
    store.evaluate(request, [&](Result<StoreResponse> r) { result.emplace(std::move(r)); });
    if (!test::runUntil(io_, [&] { return result.has_value(); })) {
      return makeError(ErrorKind::kTimeout, "no answer from the store");
    }
    return std::move(*result);
  }

  /// Runs `request` on both stores and asserts identical answers.
  void same(const StoreRequest& request, const std::string& where) {
    const auto m = run(*memory_, request);
    const auto r = run(*redis_, request);
    ASSERT_TRUE(m.ok());
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(m->allowed, r->allowed) << where;
    ASSERT_EQ(m->outcomes.size(), r->outcomes.size());
    for (std::size_t i = 0; i < m->outcomes.size(); ++i) {
      ASSERT_TRUE(sameOutcome(m->outcomes[i], r->outcomes[i]))
          << where << " limit " << i << ": memory " << str(m->outcomes[i]) << " redis "
          << str(r->outcomes[i]);
    }
    ++compared_;
    allowed_ += m->allowed ? 1 : 0;
  }

  ManualClock clock_{kT0};
  Metrics metrics_;
  boost::asio::io_context io_;
  StorePtr memory_;
  StorePtr redis_;
  int compared_ = 0;
  int allowed_ = 0;
};

TEST_F(SketchConformanceTest, RandomTracesDecideIdentically) {
  std::mt19937_64 rng(15);
  struct Shape {
    std::int64_t limit;
    std::uint32_t width;
    std::uint32_t depth;
    bool count_rejected;
    bool bloom;
  };
  // Narrow sketches (collisions, saturation with count_rejected), the three counter widths.
  const std::vector<Shape> shapes{{5, 8, 4, false, false},      {3, 4, 2, true, false},
                                  {300, 16, 3, false, false},   {200, 4, 1, true, false},
                                  {70000, 32, 2, false, false}, {4, 8, 4, false, true}};
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    const Shape& shape = shapes[s];
    LimitParams p = sketchParams(shape.limit, kMicrosPerSecond, shape.width, shape.depth,
                                 "r" + std::to_string(s));
    p.count_rejected = shape.count_rejected;
    if (shape.bloom) {
      p.sketch.bloom_bits = 512;
      p.sketch.bloom_hashes = kSketchBloomHashes;
    }
    LimitParams fixed;
    fixed.algorithm = Algorithm::kFixedWindow;
    fixed.limit = 4;
    fixed.window_us = kMicrosPerSecond;
    for (int i = 0; i < 250; ++i) {
      clock_.advance(std::chrono::microseconds(rng() % 90'000));
      StoreRequest request;
      const std::string client = "c" + std::to_string(rng() % 12);
      request.cost = static_cast<std::int64_t>(rng() % 4);
      if (shape.limit > 1000) {
        request.cost = static_cast<std::int64_t>(rng() % 9000);
      }
      request.limits.push_back(StoreLimit{client + "|d:k", p, false, std::nullopt, -1});
      if (rng() % 4 == 0) {
        // Another client's limit of the same rule in the same request, and an exact one.
        request.limits.push_back(StoreLimit{"other|d:k", p, rng() % 2 == 0, std::nullopt, -1});
        request.limits.push_back(StoreLimit{client + "|d:f", fixed, false, std::nullopt, -1});
      }
      same(request, "shape " + std::to_string(s) + " request " + std::to_string(i));
    }
  }
  EXPECT_GT(allowed_, compared_ / 10);
  EXPECT_LT(allowed_, compared_);
}

TEST_F(SketchConformanceTest, StringsExpirePastTheNextWindow) {
  const LimitParams p = sketchParams(3, kMicrosPerSecond, 64, 4, "ttl");
  StoreRequest request;
  request.limits.push_back(StoreLimit{"a|d:k", p, false, std::nullopt, -1});
  same(request, "first");
  // The even or odd string of the current window exists, with a TTL.
  const auto keys = sharedRedis().command({"KEYS", testPrefix() + ":{}:sk:*"});
  ASSERT_EQ(keys->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(keys->elements, 1U);
  const std::string key = keys->element[0]->str;
  EXPECT_NE(key.find(SketchHasher(0x0011223344556677ULL, 0x8899aabbccddeeffULL).fingerprint()),
            std::string::npos)
      << key;
  const auto ttl = sharedRedis().command({"PTTL", key});
  EXPECT_GT(ttl->integer, 0);
  // Memory of the string: header + 4 x 64 one-byte counters.
  const auto len = sharedRedis().command({"STRLEN", key});
  EXPECT_LE(len->integer, 24 + 4 * 64);
}

}  // namespace
}  // namespace sluice::conformance
