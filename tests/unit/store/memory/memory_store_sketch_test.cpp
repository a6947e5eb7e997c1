#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/limiter/sketch.hpp"
#include "sluice/store/memory_store.hpp"

namespace sluice {
namespace {

constexpr Micros kT0 = 1'700'000'000LL * kMicrosPerSecond;

LimitParams sketchParams(std::int64_t limit, std::uint32_t width, std::string rule = "per_ip") {
  LimitParams p;
  p.algorithm = Algorithm::kSketch;
  p.limit = limit;
  p.window_us = kMicrosPerSecond;
  p.sketch.width = width;
  p.sketch.depth = 4;
  p.sketch.counter_bits = sketchCounterBits(limit);
  auto identity = std::make_shared<SketchIdentity>();
  identity->key = "d:" + rule + ":i0:w" + std::to_string(width);
  identity->domain = "d";
  identity->rule = rule;
  p.sketch.identity = identity;
  return p;
}

class MemoryStoreSketchTest : public ::testing::Test {
 protected:
  StoreResponse call(std::vector<StoreLimit> limits, std::int64_t cost = 1) {
    StoreRequest request;
    request.limits = std::move(limits);
    request.cost = cost;
    std::optional<Result<StoreResponse>> got;
    store_->evaluate(request, [&](Result<StoreResponse> r) { got.emplace(std::move(r)); });
    EXPECT_TRUE(got.has_value() && got->ok());
    return got->value();
  }

  ManualClock clock_{kT0};
  Metrics metrics_;
  StorePtr store_ = makeMemoryStore(MemoryStoreOptions{}, clock_, metrics_);
};

TEST_F(MemoryStoreSketchTest, LimitsEachClientWithoutStoringBuckets) {
  const LimitParams p = sketchParams(3, 1 << 16);
  for (int c = 0; c < 1000; ++c) {
    const std::string key = "client" + std::to_string(c) + "|d:ip";
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(call({StoreLimit{key, p, false, std::nullopt, -1}}).allowed) << c;
    }
    ASSERT_FALSE(call({StoreLimit{key, p, false, std::nullopt, -1}}).allowed) << c;
  }
  // One sketch per rule, no bucket per client.
  EXPECT_EQ(metrics_.gauge("memory_store_keys").value(), 0.0);
  const Labels labels{{"domain", "d"}, {"rule", "per_ip"}};
  EXPECT_EQ(metrics_.gauge("sketch_memory_bytes", labels).value(), 2.0 * 4 * (1 << 16));
  EXPECT_DOUBLE_EQ(metrics_.gauge("sketch_load", labels).value(), 3000.0 / (3.0 * (1 << 16)));
}

TEST_F(MemoryStoreSketchTest, ChargesAllOrNothingWithOtherLimits) {
  const LimitParams sketch = sketchParams(5, 1 << 12);
  LimitParams fixed;
  fixed.algorithm = Algorithm::kFixedWindow;
  fixed.limit = 1;
  fixed.window_us = kMicrosPerSecond;
  ASSERT_TRUE(call({StoreLimit{"a|s", sketch, false, std::nullopt, -1},
                    StoreLimit{"a|f", fixed, false, std::nullopt, -1}})
                  .allowed);
  // The fixed window denies: the sketch limit allowed but must not be charged.
  for (int i = 0; i < 10; ++i) {
    const StoreResponse r = call({StoreLimit{"a|s", sketch, false, std::nullopt, -1},
                                  StoreLimit{"a|f", fixed, false, std::nullopt, -1}});
    ASSERT_FALSE(r.allowed);
    ASSERT_TRUE(r.outcomes[0].allowed);
  }
  // Only one request was charged: four are left.
  const StoreResponse check = call({StoreLimit{"a|s", sketch, false, std::nullopt, -1}}, 0);
  EXPECT_EQ(check.outcomes[0].remaining, 4);
}

TEST_F(MemoryStoreSketchTest, SlidesAcrossWindowsOnTheStoreClock) {
  const LimitParams p = sketchParams(4, 1 << 12);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(call({StoreLimit{"x|k", p, false, std::nullopt, -1}}).allowed);
  }
  const StoreResponse denied = call({StoreLimit{"x|k", p, false, std::nullopt, -1}});
  ASSERT_FALSE(denied.allowed);
  EXPECT_GT(denied.outcomes[0].retry_after_us, 0);
  clock_.advance(std::chrono::microseconds(kMicrosPerSecond + kMicrosPerSecond / 2));
  // Half-way through the next window: 4 x 0.5 = 2 left.
  EXPECT_TRUE(call({StoreLimit{"x|k", p, false, std::nullopt, -1}}).allowed);
  EXPECT_TRUE(call({StoreLimit{"x|k", p, false, std::nullopt, -1}}).allowed);
  EXPECT_FALSE(call({StoreLimit{"x|k", p, false, std::nullopt, -1}}).allowed);
}

TEST_F(MemoryStoreSketchTest, AFixedSeedGivesTheSameCellsInEveryProcess) {
  MemoryStoreOptions options;
  options.sketch_seed = "000102030405060708090a0b0c0d0e0f";
  Metrics m1;
  Metrics m2;
  StorePtr s1 = makeMemoryStore(options, clock_, m1);
  StorePtr s2 = makeMemoryStore(options, clock_, m2);
  // One counter per row (width 1): everybody collides; both stores see the same thing.
  const LimitParams p = sketchParams(2, 1);
  for (StorePtr* s : {&s1, &s2}) {
    store_ = *s;
    EXPECT_TRUE(call({StoreLimit{"a|k", p, false, std::nullopt, -1}}).allowed);
    EXPECT_TRUE(call({StoreLimit{"b|k", p, false, std::nullopt, -1}}).allowed);
    EXPECT_FALSE(call({StoreLimit{"c|k", p, false, std::nullopt, -1}})
                     .allowed);  // a false denial, by design
  }
}

}  // namespace
}  // namespace sluice
