// envoyproxy/ratelimit's behaviour in the decision service (shared by /json and gRPC):
// request-side limits, quota mode, merged metadata, explicit names, empty descriptors.
#include "decision/envoy_semantics.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "sluice/common/clock.hpp"
#include "sluice/decision/decision_service.hpp"
#include "sluice/store/memory_store.hpp"

namespace sluice {
namespace {

using nlohmann::json;

constexpr const char* kRules = R"(domain: rl
descriptors:
  - key: k
    rate_limit:
      unit: minute
      requests_per_unit: 2
  - key: named
    rate_limit:
      name: the_name
      unit: minute
      requests_per_unit: 5
    metadata:
      first: {a: 1, nested: {x: 1}}
  - key: meta2
    rate_limit:
      unit: minute
      requests_per_unit: 1
    metadata:
      first: {a: 2, nested: {y: 2}}
      second: b
  - key: banned
    rate_limit:
      name: banned_limit
      unit: minute
      requests_per_unit: 0
  - key: service
    value: service_1
    quota_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 1
    metadata:
      service_with_quota: {name: service_1}
  - key: service
    value: service_2
    quota_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 2
    metadata:
      service_with_quota: {name: service_2}
  - key: free
    rate_limit:
      unlimited: true
    metadata:
      unlimited_meta: true
)";

class EnvoySemanticsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadResult loaded = loadRulesFromStrings({{"rl.yaml", kRules}});
    ASSERT_TRUE(loaded.errors.empty()) << loaded.errors.front().toString();
    rules_ = loaded.rules;
    DecisionServiceParts parts;
    parts.rules = [this] { return rules_; };
    parts.store = makeMemoryStore({}, clock_, metrics_);
    service_ = makeDecisionService(std::move(parts));
  }

  static Descriptor one(std::string key, std::string value) {
    return {Entry{std::move(key), std::move(value)}};
  }

  Decision decide(std::vector<Descriptor> descriptors,
                  std::vector<std::optional<LimitOverride>> limits = {},
                  std::vector<std::optional<std::int64_t>> hits = {}) {
    DecisionRequest r;
    r.domain = "rl";
    r.descriptors = std::move(descriptors);
    r.descriptor_limits = std::move(limits);
    r.descriptor_hits = std::move(hits);
    std::optional<Result<Decision>> out;
    service_->decide(std::move(r), [&](Result<Decision> d) { out.emplace(std::move(d)); });
    EXPECT_TRUE(out.has_value() && out->ok());
    return out.has_value() && out->ok() ? std::move(**out) : Decision{};
  }

  RuleSetPtr rules_;
  Metrics metrics_;
  ManualClock clock_{1'700'000'000LL * kMicrosPerSecond};
  std::unique_ptr<DecisionService> service_;
};

TEST_F(EnvoySemanticsTest, AnEmptyDescriptorMatchesNothingAndIsAllowed) {
  Decision d = decide({Descriptor{}, one("k", "v")});
  EXPECT_TRUE(d.allowed);
  EXPECT_FALSE(d.descriptors[0].matched);
  EXPECT_TRUE(d.descriptors[0].limits.empty());
  EXPECT_TRUE(d.descriptors[1].matched);
}

TEST_F(EnvoySemanticsTest, ARequestSideLimitReplacesTheRulesForItsDescriptor) {
  const LimitOverride ten_a_day{10, TimeUnit::kDay};
  Decision d = decide({one("k", "v")}, {ten_a_day});
  ASSERT_EQ(d.descriptors[0].limits.size(), 1u);
  const LimitStatus& l = d.descriptors[0].limits[0];
  EXPECT_TRUE(l.from_request);
  EXPECT_FALSE(l.explicit_name);
  EXPECT_EQ(l.limit, 10);
  EXPECT_EQ(l.unit, TimeUnit::kDay);
  EXPECT_EQ(l.outcome.remaining, 9);
  // The rule for k (2 per minute) was not charged.
  EXPECT_EQ(decide({one("k", "v")}).descriptors[0].limits[0].outcome.remaining, 1);
}

TEST_F(EnvoySemanticsTest, ARequestSideLimitKeepsItsCountWhenRequestsPerUnitChanges) {
  // As envoyproxy/ratelimit's TestConfigLimitOverride: the counter is keyed by domain,
  // entries and unit; a new number keeps the count, another value has its own counter.
  const Descriptor d1 = {Entry{"key1", "value1"}, Entry{"subkey1", "something"}};
  EXPECT_EQ(
      decide({d1}, {LimitOverride{10, TimeUnit::kDay}}).descriptors[0].limits[0].outcome.remaining,
      9);
  EXPECT_EQ(
      decide({d1}, {LimitOverride{42, TimeUnit::kDay}}).descriptors[0].limits[0].outcome.remaining,
      40);
  const Descriptor d2 = {Entry{"key1", "value1"}, Entry{"subkey1", "something_else"}};
  EXPECT_EQ(
      decide({d2}, {LimitOverride{42, TimeUnit::kDay}}).descriptors[0].limits[0].outcome.remaining,
      41);
  EXPECT_NE(requestLimitBucketKey(rules_->domains.at("rl"), d1, TimeUnit::kDay),
            requestLimitBucketKey(rules_->domains.at("rl"), d1, TimeUnit::kHour));
}

TEST_F(EnvoySemanticsTest, ARequestSideLimitOfZeroBlocksAndAnUnknownDomainIgnoresIt) {
  Decision blocked = decide({one("x", "y")}, {LimitOverride{0, TimeUnit::kSecond}});
  EXPECT_FALSE(blocked.allowed);
  DecisionRequest r;
  r.domain = "nope";
  r.descriptors = {one("x", "y")};
  r.descriptor_limits = {LimitOverride{0, TimeUnit::kSecond}};
  std::optional<Result<Decision>> out;
  service_->decide(std::move(r), [&](Result<Decision> d) { out.emplace(std::move(d)); });
  ASSERT_TRUE(out && out->ok());
  EXPECT_TRUE((*out)->allowed);
  EXPECT_FALSE((*out)->domain_known);
}

TEST_F(EnvoySemanticsTest, OnlyNamedLimitsCarryAnExplicitName) {
  Decision d = decide({one("k", "v"), one("named", "v")});
  EXPECT_FALSE(d.descriptors[0].limits[0].explicit_name);
  EXPECT_TRUE(d.descriptors[1].limits[0].explicit_name);
  EXPECT_EQ(d.descriptors[1].limits[0].name, "the_name");
}

TEST_F(EnvoySemanticsTest, QuotaModeDeniesOnlyWhenEveryQuotaDescriptorIsOver) {
  // envoy's example.yaml: service_1 allows 1, service_2 allows 2 per minute.
  const std::vector<Descriptor> both = {one("service", "service_1"), one("service", "service_2")};
  Decision first = decide(both);
  EXPECT_TRUE(first.allowed);
  EXPECT_TRUE(first.descriptors[0].limits[0].quota);
  Decision second = decide(both);  // service_1 over, service_2 has room
  EXPECT_TRUE(second.allowed);
  EXPECT_FALSE(second.descriptors[0].limits[0].outcome.allowed);
  EXPECT_FALSE(second.descriptors[0].passed());
  EXPECT_TRUE(second.descriptors[1].passed());
  // Only the passing descriptor's metadata is merged.
  EXPECT_EQ(json::parse(second.metadata_json),
            json::parse(R"({"service_with_quota":{"name":"service_2"}})"));
  Decision third = decide(both);  // both over
  EXPECT_FALSE(third.allowed);
  EXPECT_TRUE(third.metadata_json.empty());
}

TEST_F(EnvoySemanticsTest, MetadataOfPassedDescriptorsIsMergedFirstWins) {
  Decision d = decide({one("named", "v"), one("meta2", "v"), one("free", "v")});
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(json::parse(d.metadata_json),
            json::parse(R"({"first":{"a":1,"nested":{"x":1,"y":2}},"second":"b"})"));
  // meta2 allows 1 per minute; named's metadata alone then; an unlimited node adds nothing.
  Decision again = decide({one("meta2", "v"), one("named", "v")});
  EXPECT_FALSE(again.allowed);
  EXPECT_EQ(json::parse(again.metadata_json), json::parse(R"({"first":{"a":1,"nested":{"x":1}}})"));
}

TEST_F(EnvoySemanticsTest, PerDescriptorHitsAreChargedPerLimit) {
  Decision d = decide({one("named", "a"), one("k", "a")}, {}, {std::int64_t{4}, std::nullopt});
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.descriptors[0].limits[0].outcome.remaining, 1);
  EXPECT_EQ(d.descriptors[1].limits[0].outcome.remaining, 1);
}

TEST_F(EnvoySemanticsTest, ADeniedAnswerReportsTheLimitsItDidNotCharge) {
  // Issue 13: a 10/hour-like and a tighter limit; the second request is denied by the
  // tighter one and reports the other as it is.
  EXPECT_TRUE(decide({one("named", "z"), one("meta2", "z")}).allowed);
  Decision denied = decide({one("named", "z"), one("meta2", "z")});
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.descriptors[0].limits[0].outcome.remaining, 4);
}

}  // namespace
}  // namespace sluice
