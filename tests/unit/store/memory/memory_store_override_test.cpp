#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/store/limit_override.hpp"
#include "sluice/store/memory_store.hpp"

namespace sluice {
namespace {

constexpr Micros kT0 = 1'700'000'040LL * kMicrosPerSecond;
constexpr Micros kMinute = 60 * kMicrosPerSecond;

const std::string kRule = "free";
const std::string kKey = "acme|api:plan=free;nfree;fw";

StoredOverridePtr raisedTo(std::int64_t limit, Micros expires_at = 0) {
  auto value = std::make_shared<StoredOverride>();
  value->params.limit = limit;
  value->params.window_us = kMinute;
  value->requests_per_unit = limit;
  value->unit = TimeUnit::kMinute;
  value->expires_at_us = expires_at;
  value->reason = "launch";
  value->record_json = R"({"domain":"api","rule":"free","clientId":"acme"})";
  return value;
}

class MemoryStoreOverrideTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_.set(kT0);
    store_ = makeMemoryStore({}, clock_, metrics_);
  }

  StoreResponse decide(const std::string& key = kKey) {
    StoreRequest request;
    StoreLimit limit;
    limit.key = key;
    limit.params.limit = 5;
    limit.params.window_us = kMinute;
    limit.override_rule = &kRule;
    request.limits.push_back(limit);
    std::optional<Result<StoreResponse>> got;
    store_->evaluate(request, [&](Result<StoreResponse> r) { got = std::move(r); });
    return std::move(**got);
  }

  bool set(const OverrideSlot& slot, StoredOverridePtr value, std::size_t max = 100) {
    std::optional<Result<bool>> got;
    store_->setOverride(slot, std::move(value), max, [&](Result<bool> r) { got = std::move(r); });
    return got->ok();
  }

  static OverrideSlot ruleSlot() { return {"acme|api", overrideRuleField(kRule)}; }
  static OverrideSlot bucketSlot() {
    return {"acme|api", overrideBucketField(overrideBucketOf(kKey))};
  }

  ManualClock clock_;
  Metrics metrics_;
  StorePtr store_;
};

TEST_F(MemoryStoreOverrideTest, AnOverrideReplacesTheLimitAndKeepsTheCount) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(decide().allowed);
  }
  ASSERT_FALSE(decide().allowed);
  ASSERT_TRUE(set(ruleSlot(), raisedTo(1000)));
  StoreResponse raised = decide();
  EXPECT_TRUE(raised.allowed);
  EXPECT_EQ(raised.outcomes[0].remaining, 1000 - 6);
  ASSERT_EQ(raised.overrides.size(), 1u);
  EXPECT_EQ(raised.overrides[0].limit, 0u);
  EXPECT_EQ(raised.overrides[0].value->reason, "launch");
  // Another client's bucket of the same rule is not affected.
  EXPECT_TRUE(decide("zeta|api:plan=free;nfree;fw").overrides.empty());
}

TEST_F(MemoryStoreOverrideTest, ABucketOverrideWinsOverItsRules) {
  ASSERT_TRUE(set(ruleSlot(), raisedTo(1000)));
  ASSERT_TRUE(set(bucketSlot(), raisedTo(1)));
  EXPECT_TRUE(decide().allowed);
  StoreResponse second = decide();
  EXPECT_FALSE(second.allowed);
  EXPECT_EQ(second.overrides[0].value->requests_per_unit, 1);
}

TEST_F(MemoryStoreOverrideTest, AnExpiredOverrideNoLongerApplies) {
  ASSERT_TRUE(set(ruleSlot(), raisedTo(1000, kT0 + kMicrosPerSecond)));
  EXPECT_EQ(decide().overrides.size(), 1u);
  clock_.advance(std::chrono::seconds(1));
  EXPECT_TRUE(decide().overrides.empty());
}

TEST_F(MemoryStoreOverrideTest, ALimitWithoutItsRuleNameIsNeverOverridden) {
  ASSERT_TRUE(set(ruleSlot(), raisedTo(1000)));
  StoreRequest request;
  StoreLimit limit;
  limit.key = kKey;
  limit.params.limit = 5;
  limit.params.window_us = kMinute;
  request.limits.push_back(limit);
  std::optional<Result<StoreResponse>> got;
  store_->evaluate(request, [&](Result<StoreResponse> r) { got = std::move(r); });
  EXPECT_TRUE((*got)->overrides.empty());
}

TEST_F(MemoryStoreOverrideTest, TheBoundRefusesANewOverrideButNotAReplacement) {
  ASSERT_TRUE(set(ruleSlot(), raisedTo(10), 1));
  EXPECT_FALSE(set(bucketSlot(), raisedTo(10), 1));
  EXPECT_TRUE(set(ruleSlot(), raisedTo(20), 1));
}

TEST(OverrideCodecTest, RoundTrips) {
  StoredOverride value = *raisedTo(7, 123);
  value.params.burst = 9;
  value.params.count_rejected = true;
  value.reason = "line one\nline \"two\"";
  auto decoded = decodeOverride(encodeOverride(value));
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_EQ(decoded->params.limit, 7);
  EXPECT_EQ(decoded->params.burst, 9);
  EXPECT_TRUE(decoded->params.count_rejected);
  EXPECT_EQ(decoded->expires_at_us, 123);
  EXPECT_EQ(decoded->unit, TimeUnit::kMinute);
  EXPECT_EQ(decoded->reason, value.reason);
  EXPECT_EQ(decoded->record_json, value.record_json);
  EXPECT_FALSE(decodeOverride("sluice-override 1 0 7\n\"\"\n{}"));
  EXPECT_FALSE(decodeOverride("garbage"));
}

TEST(MemoryStoreOverrideFileTest, OverridesSurviveAReopenAndACorruptFileIsRefused) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("sluice-override-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ManualClock clock;
  clock.set(kT0);
  Metrics metrics;
  MemoryStoreOptions options;
  options.overrides_file = dir + "/overrides.json";
  {
    auto store = openMemoryStore(options, clock, metrics);
    ASSERT_TRUE(store);
    std::optional<Result<bool>> got;
    (*store)->setOverride({"acme|api", overrideRuleField(kRule)}, raisedTo(1000), 10,
                          [&](Result<bool> r) { got = std::move(r); });
    ASSERT_TRUE(got && *got);
  }
  {
    auto reopened = openMemoryStore(options, clock, metrics);
    ASSERT_TRUE(reopened);
    std::optional<Result<std::vector<OverrideEntry>>> listed;
    (*reopened)->listOverrides([&](auto r) { listed = std::move(r); });
    ASSERT_EQ((*listed)->size(), 1u);
    EXPECT_EQ((*listed)->front().value->requests_per_unit, 1000);
  }
  std::ofstream(options.overrides_file) << "{\"format\": \"other\"}";
  auto corrupt = openMemoryStore(options, clock, metrics);
  ASSERT_FALSE(corrupt);
  EXPECT_NE(corrupt.error().message.find(options.overrides_file), std::string::npos);
  std::ofstream(options.overrides_file) << "{\"format\": \"sluice-overr";  // truncated
  EXPECT_FALSE(openMemoryStore(options, clock, metrics));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice
