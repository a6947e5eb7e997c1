// How the decision service asks the store to charge: refunds (request- and descriptor-level),
// reports, envoy's counting on envoy's API, and the refunds it refuses before any store call.
#include <gtest/gtest.h>

#include <optional>

#include "sluice/common/clock.hpp"
#include "sluice/decision/decision_service.hpp"

namespace sluice {
namespace {

constexpr const char* kRules = R"(domain: llm
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 1000
  - key: team
    rate_limit:
      unit: minute
      requests_per_unit: 5000
  - key: ip
    rate_limit:
      unit: minute
      requests_per_unit: 100
      algorithm: sketch
      sketch: {expected_requests: 1000}
  - key: tenant
    rate_limit:
      unit: minute
      requests_per_unit: 100
      consistency: eventual
)";

class RecordingStore final : public Store {
 public:
  void evaluate(const StoreRequest& request, Callback done) override {
    requests.push_back(request);
    StoreResponse response;
    response.outcomes.resize(request.limits.size());
    done(response);
  }
  void reset(const std::vector<std::string>&, ResetCallback done) override { done(0); }
  bool healthy() const override { return true; }
  std::string_view kind() const override { return "recording"; }

  std::vector<StoreRequest> requests;
};

class DecisionChargeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadResult loaded = loadRulesFromStrings({{"llm.yaml", kRules}});
    ASSERT_TRUE(loaded.errors.empty()) << loaded.errors.front().toString();
    rules_ = loaded.rules;
  }

  Result<Decision> decide(DecisionRequest r, Charge envoy_charge = Charge::kEvery) {
    DecisionServiceParts parts;
    parts.rules = [this] { return rules_; };
    parts.store = store_;
    parts.clock = &clock_;
    parts.envoy_charge = envoy_charge;
    auto service = makeDecisionService(std::move(parts));
    std::optional<Result<Decision>> out;
    service->decide(std::move(r), [&](Result<Decision> d) { out.emplace(std::move(d)); });
    EXPECT_TRUE(out.has_value());
    return std::move(*out);
  }

  static DecisionRequest request(std::vector<Descriptor> descriptors) {
    DecisionRequest r;
    r.domain = "llm";
    r.descriptors = std::move(descriptors);
    r.hits = 300;
    return r;
  }

  static Descriptor one(std::string key, std::string value) {
    return {Entry{std::move(key), std::move(value)}};
  }

  RuleSetPtr rules_;
  ManualClock clock_{0};
  std::shared_ptr<RecordingStore> store_ = std::make_shared<RecordingStore>();
};

TEST_F(DecisionChargeTest, ARequestRefundMarksEveryLimit) {
  DecisionRequest r = request({one("user", "a"), one("team", "t")});
  r.refund = true;
  ASSERT_TRUE(decide(std::move(r)).ok());
  ASSERT_EQ(store_->requests.size(), 1U);
  const StoreRequest& sent = store_->requests[0];
  ASSERT_EQ(sent.limits.size(), 2U);
  EXPECT_TRUE(sent.limits[0].refund);
  EXPECT_TRUE(sent.limits[1].refund);
  EXPECT_EQ(sent.charge, Charge::kAllOrNothing);
}

TEST_F(DecisionChargeTest, ADescriptorRefundMarksOnlyItsOwnLimits) {
  DecisionRequest r = request({one("user", "a"), one("team", "t")});
  r.descriptor_refunds = {false, true};
  ASSERT_TRUE(decide(std::move(r)).ok());
  const StoreRequest& sent = store_->requests.at(0);
  EXPECT_FALSE(sent.limits.at(0).refund);
  EXPECT_TRUE(sent.limits.at(1).refund);
}

TEST_F(DecisionChargeTest, ASketchRefundIsRefusedWithTheReasonAndNothingIsCharged) {
  DecisionRequest r = request({one("user", "a"), one("ip", "10.0.0.1")});
  r.refund = true;
  auto d = decide(std::move(r));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_NE(d.error().message.find("descriptors[1]"), std::string::npos) << d.error().message;
  EXPECT_NE(d.error().message.find("sketch limit cannot take a refund"), std::string::npos)
      << d.error().message;
  EXPECT_TRUE(store_->requests.empty()) << "no counter may be touched";
}

TEST_F(DecisionChargeTest, EventualLimitsRefuseRefundsAndReports) {
  DecisionRequest refund = request({one("tenant", "x")});
  refund.refund = true;
  auto d = decide(std::move(refund));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("eventual limit cannot take a refund"), std::string::npos)
      << d.error().message;
  DecisionRequest report = request({one("tenant", "x")});
  report.charge = Charge::kReport;
  auto e = decide(std::move(report));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("eventual limit cannot take a report"), std::string::npos);
  EXPECT_TRUE(store_->requests.empty());
}

TEST_F(DecisionChargeTest, EnvoysApiCountsEveryLimitUnlessConfiguredAllOrNothing) {
  DecisionRequest envoy = request({one("user", "a")});
  envoy.envoy_api = true;
  ASSERT_TRUE(decide(envoy).ok());
  EXPECT_EQ(store_->requests.back().charge, Charge::kEvery);
  ASSERT_TRUE(decide(envoy, Charge::kAllOrNothing).ok());
  EXPECT_EQ(store_->requests.back().charge, Charge::kAllOrNothing);
  DecisionRequest own = request({one("user", "a")});
  ASSERT_TRUE(decide(own).ok());
  EXPECT_EQ(store_->requests.back().charge, Charge::kAllOrNothing)
      << "Sluice's own endpoints stay all or nothing";
  DecisionRequest report = request({one("user", "a")});
  report.envoy_api = true;
  report.charge = Charge::kReport;
  ASSERT_TRUE(decide(report).ok());
  EXPECT_EQ(store_->requests.back().charge, Charge::kReport);
}

}  // namespace
}  // namespace sluice
