#include "simulate/differ.hpp"

#include <gtest/gtest.h>

#include "simulate/replayer.hpp"

namespace sluice::simulate {
namespace {

constexpr const char* kOld = R"(
domain: auth
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: minute, requests_per_unit: 5}
)";
constexpr const char* kNew = R"(
domain: auth
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: minute, requests_per_unit: 2}
)";

RuleSetPtr load(const char* yaml) {
  LoadResult loaded = loadRulesFromStrings({{"auth.yaml", yaml}});
  EXPECT_TRUE(loaded.errors.empty()) << loaded.errors.front().toString();
  return loaded.rules;
}

DecisionRequest request(const std::string& user) {
  DecisionRequest r;
  r.domain = "auth";
  r.descriptors = {{{"user", user}}};
  return r;
}

constexpr Micros kStart = 1'795'665'000'000'000;  // on a minute boundary

class DifferTest : public ::testing::Test {
 protected:
  void replay(Micros at, const std::string& user) {
    auto old_decision = old_.decide(at, "", request(user));
    auto new_decision = new_.decide(at, "", request(user));
    ASSERT_TRUE(old_decision.ok());
    ASSERT_TRUE(new_decision.ok());
    differ_.add(at, &*old_decision, *new_decision, "", "");
  }

  Replayer old_{{load(kOld)}};
  Replayer new_{{load(kNew)}};
  Differ differ_{true};
};

TEST_F(DifferTest, CountsNewlyDeniedRequestsAndClients) {
  for (int i = 0; i < 4; ++i) {
    replay(kStart + i * kMicrosPerSecond, "mallory");
  }
  replay(kStart + 5 * kMicrosPerSecond, "alice");
  const Totals& t = differ_.totals();
  EXPECT_EQ(t.requests, 5u);
  EXPECT_EQ(t.denied_old, 0u);
  EXPECT_EQ(t.denied_new, 2u);
  EXPECT_EQ(t.newly_denied, 2u);
  EXPECT_EQ(t.no_longer_denied, 0u);
  EXPECT_EQ(t.clients, 2u);
  EXPECT_EQ(t.clients_newly_denied, 1u);
  auto rules = differ_.rules();
  ASSERT_EQ(rules.size(), 1u);
  const RuleStats& rule = *rules[0];
  EXPECT_EQ(rule.name, "per_user");
  EXPECT_EQ(rule.matched, 5u);
  EXPECT_EQ(rule.denied_old, 0u);
  EXPECT_EQ(rule.denied_new, 2u);
  EXPECT_EQ(rule.clientsNewlyDenied(), 1u);
  EXPECT_EQ(rule.limit_old, "5 per minute, fixed_window");
  EXPECT_EQ(rule.limit_new, "2 per minute, fixed_window");
  // Without a client id, "who" is the bucket's descriptor entries.
  const ClientStats& mallory = rule.clients.at("user=mallory");
  EXPECT_EQ(mallory.matched, 4u);
  EXPECT_EQ(mallory.denied_new, 2u);
  EXPECT_EQ(mallory.peak, 4);  // four requests in one minute, against a limit of 2
  EXPECT_EQ(mallory.peak_at, kStart);
}

TEST_F(DifferTest, CountsNoLongerDeniedWhenTheNewRulesAreLooser) {
  Replayer looser{{load(kOld)}};
  Replayer tighter{{load(kNew)}};
  Differ differ(true);
  for (int i = 0; i < 3; ++i) {
    const Micros at = kStart + i;
    auto old_decision = tighter.decide(at, "", request("bob"));
    auto new_decision = looser.decide(at, "", request("bob"));
    differ.add(at, &*old_decision, *new_decision, "", "");
  }
  EXPECT_EQ(differ.totals().no_longer_denied, 1u);
  EXPECT_EQ(differ.totals().clients_no_longer_denied, 1u);
  EXPECT_EQ(differ.rules()[0]->clientsNoLongerDenied(), 1u);
}

TEST_F(DifferTest, ComparesTheLoggedDecisionWithTheBaseline) {
  auto old_decision = old_.decide(kStart, "", request("eve"));
  auto new_decision = new_.decide(kStart, "", request("eve"));
  differ_.add(kStart, &*old_decision, *new_decision, "allowed", "per_user");
  differ_.add(kStart, &*old_decision, *new_decision, "denied", "per_user");
  EXPECT_EQ(differ_.totals().compared, 2u);
  EXPECT_EQ(differ_.totals().agreed, 1u);
  ASSERT_EQ(differ_.mismatchSamples().size(), 1u);
  EXPECT_NE(differ_.mismatchSamples()[0].find("logged denied (per_user), replayed allowed"),
            std::string::npos)
      << differ_.mismatchSamples()[0];
}

TEST(TimeSeriesTest, KeepsAtMostItsPointsByWideningTheBuckets) {
  TimeSeries series;
  for (int s = 0; s < 1000; ++s) {
    series.add(kStart + s * kMicrosPerSecond, 1);
  }
  EXPECT_LE(series.counts().size(), TimeSeries::kMaxPoints);
  EXPECT_EQ(series.width(), 8 * kMicrosPerSecond);
  std::uint64_t total = 0;
  for (auto c : series.counts()) {
    total += c;
  }
  EXPECT_EQ(total, 1000u);
}

TEST(ReplayClockTest, FollowsTheLogAndNeverGoesBack) {
  ReplayClock clock;
  EXPECT_EQ(clock.moveTo(kStart), kStart);
  EXPECT_EQ(clock.moveTo(kStart + 5), kStart + 5);
  EXPECT_EQ(clock.moveTo(kStart + 2), kStart + 5);  // a late line is decided at the latest time
  EXPECT_EQ(clock.nowMicros(), kStart + 5);
}

TEST(ReplayerTest, DecidesLikeTheMemoryStoreAtTheLoggedInstant) {
  constexpr const char* kBucket = R"(
domain: api
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket}
)";
  Replayer replayer({load(kBucket)});
  auto ask = [&](Micros at) {
    DecisionRequest r;
    r.domain = "api";
    r.descriptors = {{{"k", "v"}}};
    return replayer.decide(at, "", std::move(r))->allowed;
  };
  EXPECT_TRUE(ask(kStart));
  EXPECT_TRUE(ask(kStart));
  EXPECT_FALSE(ask(kStart + 499'999));  // one token every 500 ms
  EXPECT_TRUE(ask(kStart + 500'000));
}

TEST(ReplayerTest, ChoosesTheBaselineByTheRecordedRulesHash) {
  RuleSetPtr old_rules = load(kOld);
  RuleSetPtr new_rules = load(kNew);
  Replayer replayer({old_rules, new_rules});
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(replayer.decide(kStart, new_rules->hash, request("x"))->allowed);
  }
  EXPECT_FALSE(replayer.decide(kStart, new_rules->hash, request("x"))->allowed);
  // The same bucket (same key) under the looser set: counters carry over, as on a reload.
  EXPECT_TRUE(replayer.decide(kStart, old_rules->hash, request("x"))->allowed);
  EXPECT_EQ(replayer.current(), old_rules);
}

}  // namespace
}  // namespace sluice::simulate
