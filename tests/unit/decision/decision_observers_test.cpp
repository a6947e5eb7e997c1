#include <gtest/gtest.h>

#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/decision/decision_service.hpp"
#include "sluice/store/memory_store.hpp"

namespace sluice {
namespace {

constexpr const char* kRules = R"(domain: auth
descriptors:
  - key: auth_type
    value: login
    rate_limit:
      name: login
      unit: minute
      requests_per_unit: 10
  - key: auth_type
    value: trial
    shadow_mode: true
    rate_limit:
      name: trial
      unit: minute
      requests_per_unit: 1
  - key: user
    value_to_metric: true
    rate_limit:
      name: per_user
      unit: minute
      requests_per_unit: 3
)";

/// Keeps every published event.
class RecordingSink final : public DenialEventSink {
 public:
  void publish(DenialEvent event) override { events.push_back(std::move(event)); }
  std::vector<DenialEvent> events;
};

class ObservedDecisionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadResult loaded = loadRulesFromStrings({{"auth.yaml", kRules}});
    ASSERT_TRUE(loaded.errors.empty());
    rules_ = loaded.rules;
    store_ = makeMemoryStore(MemoryStoreOptions{}, clock_, metrics_);
    metrics_observer_ = makeDecisionMetrics(metrics_);
    events_observer_ = makeDenialEvents(sink_, clock_);
    DecisionServiceParts parts;
    parts.rules = [this] { return rules_; };
    parts.store = store_;
    parts.clock = &clock_;
    parts.observers = {metrics_observer_.get(), events_observer_.get()};
    service_ = makeDecisionService(std::move(parts));
  }

  Decision decide(const std::string& key, const std::string& value,
                  const std::string& client = "c") {
    DecisionRequest request;
    request.domain = "auth";
    request.client_id = client;
    request.descriptors = {{{key, value}}};
    std::optional<Result<Decision>> out;
    service_->decide(std::move(request), [&](Result<Decision> d) { out = std::move(d); });
    EXPECT_TRUE(out && *out);
    return **out;
  }

  std::uint64_t count(std::string_view name, const Labels& labels) {
    return metrics_.counter(name, labels).value();
  }

  ManualClock clock_;
  Metrics metrics_;
  RuleSetPtr rules_;
  StorePtr store_;
  RecordingSink sink_;
  std::unique_ptr<DecisionObserver> metrics_observer_;
  std::unique_ptr<DecisionObserver> events_observer_;
  std::unique_ptr<DecisionService> service_;
};

TEST_F(ObservedDecisionsTest, CountsNearLimitWhenAtMostOneFifthRemains) {
  for (int i = 0; i < 7; ++i) {
    decide("auth_type", "login");
  }
  EXPECT_EQ(count("near_limit_total", {{"domain", "auth"}, {"rule", "login"}}), 0u);
  decide("auth_type", "login");  // remaining 2 of 10: 20 %
  EXPECT_EQ(count("near_limit_total", {{"domain", "auth"}, {"rule", "login"}}), 1u);
  decide("auth_type", "login");
  decide("auth_type", "login");
  decide("auth_type", "login");  // denied: not counted as near
  EXPECT_EQ(count("near_limit_total", {{"domain", "auth"}, {"rule", "login"}}), 3u);
}

TEST_F(ObservedDecisionsTest, PublishesOneEventPerDeniedRequestOnly) {
  clock_.set(1'700'000'000'123'456);
  for (int i = 0; i < 10; ++i) {
    decide("auth_type", "login", "eve");
  }
  EXPECT_TRUE(sink_.events.empty());
  decide("auth_type", "login", "eve");
  ASSERT_EQ(sink_.events.size(), 1u);
  const DenialEvent& e = sink_.events[0];
  EXPECT_EQ(e.time_us, 1'700'000'000'123'456);
  EXPECT_EQ(e.domain, "auth");
  EXPECT_EQ(e.client, "eve");
  EXPECT_EQ(e.descriptor, "auth_type=login");
  EXPECT_EQ(e.rule, "login");
}

TEST_F(ObservedDecisionsTest, ShadowDenialsAreNotEvents) {
  decide("auth_type", "trial");
  Decision d = decide("auth_type", "trial");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(decisionWord(d), "shadow_denied");
  EXPECT_TRUE(sink_.events.empty());
}

TEST_F(ObservedDecisionsTest, ValueLabelsOnlyForRulesThatAskForThem) {
  decide("user", "ann");
  decide("auth_type", "login");
  EXPECT_EQ(count("descriptor_decisions_total", {{"domain", "auth"},
                                                 {"rule", "per_user"},
                                                 {"descriptor", "user=ann"},
                                                 {"outcome", "allowed"}}),
            1u);
  const std::string rendered = metrics_.render();
  EXPECT_EQ(rendered.find("auth_type=login"), std::string::npos) << rendered;
}

/// GET /limits/top's counts: each non-shadow limit that denied, with the request's client.
TEST_F(ObservedDecisionsTest, CountsDeniedClientsPerRuleForTheTopList) {
  TopDenialsOptions options;
  options.capacity = 4;
  TopDenials top(options);
  std::unique_ptr<DecisionObserver> recorder = makeTopDenialsRecorder(top);
  DecisionServiceParts parts;
  parts.rules = [this] { return rules_; };
  parts.store = store_;
  parts.clock = &clock_;
  parts.observers = {recorder.get()};
  service_ = makeDecisionService(std::move(parts));
  for (int i = 0; i < 5; ++i) {
    decide("user", "u1", "mallory");  // 3 allowed, 2 denied
  }
  for (int i = 0; i < 3; ++i) {
    decide("auth_type", "trial", "shadowy");  // shadow denials: allowed
  }
  decide("auth_type", "login", "alice");  // allowed
  auto parts_seen = top.parts({}, clock_.nowMicros());
  ASSERT_EQ(parts_seen.size(), 1u);
  EXPECT_EQ(parts_seen[0].domain, "auth");
  EXPECT_EQ(parts_seen[0].rule, "per_user");
  ASSERT_EQ(parts_seen[0].summary.entries.size(), 1u);
  EXPECT_EQ(parts_seen[0].summary.entries[0].key, "mallory");
  EXPECT_EQ(parts_seen[0].summary.entries[0].count, 2u);
}

TEST(DecisionWordTest, NamesTheRequestLevelOutcome) {
  Decision unknown;
  unknown.domain_known = false;
  EXPECT_EQ(decisionWord(unknown), "unknown_domain");
  Decision no_rule;
  no_rule.descriptors.resize(1);
  EXPECT_EQ(decisionWord(no_rule), "no_rule");
  Decision denied;
  denied.allowed = false;
  EXPECT_EQ(decisionWord(denied), "denied");
  Decision allowed;
  allowed.descriptors.resize(1);
  allowed.descriptors[0].matched = true;
  EXPECT_EQ(decisionWord(allowed), "allowed");
}

}  // namespace
}  // namespace sluice
