#include "simulate/differ.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <random>

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

TEST(DifferWindowTest, ALimitNameOfTwoWindowsCountsPeaksInTheWindowLastSeen) {
  // One name on two nodes with windows of different lengths: the rule's peaks are counted in
  // the window of the limit seen last, and a client's window begun in the other length
  // starts again in the new one.
  Replayer fresh{{load(R"(
domain: auth
descriptors:
  - key: user
    rate_limit: {name: shared, unit: minute, requests_per_unit: 100}
  - key: ip
    rate_limit: {name: shared, unit: hour, requests_per_unit: 100}
)")}};
  Differ differ(false);
  auto add = [&](Micros at, const std::string& key, const std::string& value) {
    DecisionRequest r;
    r.domain = "auth";
    r.descriptors = {{{key, value}}};
    auto decision = fresh.decide(at, "", std::move(r));
    ASSERT_TRUE(decision.ok());
    differ.add(at, nullptr, *decision, "", "");
  };
  static_assert(kStart % (60 * kMicrosPerSecond) == 0 && kStart % (3600 * kMicrosPerSecond) != 0);
  // u's first request opens the minute from kStart; two more let the differ count it (it
  // counts a request two adds later) before the rule's window changes.
  add(kStart + 30 * kMicrosPerSecond, "user", "u");
  add(kStart + 31 * kMicrosPerSecond, "user", "v");
  add(kStart + 32 * kMicrosPerSecond, "user", "w");
  add(kStart + 40 * kMicrosPerSecond, "ip", "1.2.3.4");  // the rule counts hours from now on
  add(kStart + 45 * kMicrosPerSecond, "user", "u");      // in the hour before kStart's minute
  const RuleStats& rule = *differ.rules().front();
  EXPECT_EQ(rule.window_us, 3600 * kMicrosPerSecond);
  const ClientStats& u = rule.clients.at("user=u");
  EXPECT_EQ(u.matched, 2u);
  EXPECT_EQ(u.window_start, kStart + 45 * kMicrosPerSecond -
                                (kStart + 45 * kMicrosPerSecond) % (3600 * kMicrosPerSecond));
  EXPECT_EQ(u.window_hits, 1);
  EXPECT_EQ(u.peak, 1);
  EXPECT_EQ(u.peak_at, kStart);
}

TEST_F(DifferTest, ReadingItMidwayChangesNothing) {
  // The differ counts a request's clients a couple of requests later (its pipeline): a
  // differ read after every request and one read only at the end agree in every count.
  Differ read_often(true);
  std::mt19937_64 random(5);
  for (int i = 0; i < 600; ++i) {
    const Micros at = kStart + i * 50'000;
    const std::string user = "u" + std::to_string(random() % 7);
    auto old_decision = old_.decide(at, "", request(user));
    auto new_decision = new_.decide(at, "", request(user));
    ASSERT_TRUE(old_decision.ok() && new_decision.ok());
    differ_.add(at, &*old_decision, *new_decision, "", "");
    read_often.add(at, &*old_decision, *new_decision, "", "");
    EXPECT_EQ(read_often.totals().requests, static_cast<std::uint64_t>(i + 1));
    EXPECT_EQ(read_often.rules().size(), 1u);
  }
  const Totals& a = differ_.totals();
  const Totals& b = read_often.totals();
  EXPECT_EQ(a.newly_denied, b.newly_denied);
  EXPECT_EQ(a.clients, b.clients);
  EXPECT_EQ(a.clients_newly_denied, b.clients_newly_denied);
  EXPECT_GT(a.newly_denied, 0u);
  const RuleStats& x = *differ_.rules()[0];
  const RuleStats& y = *read_often.rules()[0];
  EXPECT_EQ(x.matched, 600u);
  EXPECT_EQ(x.matched, y.matched);
  EXPECT_EQ(x.denied_new, y.denied_new);
  ASSERT_EQ(x.clients.size(), y.clients.size());
  for (const auto& [who, c] : x.clients) {
    const ClientStats& d = y.clients.at(who);
    EXPECT_EQ(c.matched, d.matched) << who;
    EXPECT_EQ(c.newly_denied, d.newly_denied) << who;
    EXPECT_EQ(c.peak, d.peak) << who;
    EXPECT_EQ(c.peak_at, d.peak_at) << who;
  }
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

// The replayer decides the usual request directly (its own match, keys and memory store
// call); every other request goes through the decision service. Both must decide alike:
// a random stream over rules of every algorithm, shadow and quota limits, unlimited and
// nested rules, client ids and costs, replayed both ways, decision by decision.
TEST(ReplayerTest, TheDirectPathDecidesAsTheDecisionService) {
  constexpr const char* kRules = R"(
domain: api
descriptors:
  - key: path
    value: /login
    rate_limit: {name: login, unit: second, requests_per_unit: 6}
    descriptors:
      - key: user
        rate_limit: {name: login_per_user, unit: second, requests_per_unit: 2}
  - key: path
    value: /free
    rate_limit: {unlimited: true}
  - key: path
    value: /search
    descriptors:
      - key: user
        rate_limit: {name: search, unit: second, requests_per_unit: 3, algorithm: token_bucket}
  - key: path
    value: /checkout
    descriptors:
      - key: user
        rate_limit: {name: checkout, unit: second, requests_per_unit: 3, algorithm: sliding_window_counter}
  - key: path
    value: /items
    descriptors:
      - key: user
        rate_limit: {name: items, unit: second, requests_per_unit: 3, algorithm: leaky_bucket}
  - key: path
    value: /log
    descriptors:
      - key: user
        rate_limit: {name: log, unit: second, requests_per_unit: 3, algorithm: sliding_window_log}
  - key: path
    value: /sk
    descriptors:
      - key: user
        rate_limit: {name: sk, unit: second, requests_per_unit: 3, algorithm: sketch, sketch: {expected_requests: 500}}
  - key: tenant
    shadow_mode: true
    rate_limit: {name: tenant, unit: second, requests_per_unit: 4}
  - key: plan
    quota_mode: true
    rate_limit: {name: plan, unit: second, requests_per_unit: 2}
)";
  constexpr const char* kFlat = R"(
domain: flat
rate_limit: {name: flat, unit: second, requests_per_unit: 3}
descriptors:
  - key: path
    value: /w*
    rate_limit: {name: wild, unit: second, requests_per_unit: 2, algorithm: token_bucket}
)";
  LoadResult loaded = loadRulesFromStrings({{"api.yaml", kRules}, {"flat.yaml", kFlat}});
  ASSERT_TRUE(loaded.errors.empty()) << loaded.errors.front().toString();
  RuleSetPtr rules = loaded.rules;
  Replayer direct({rules});
  Replayer service({rules}, /*direct=*/false);
  std::mt19937_64 rng(7);
  const char* paths[] = {"/login", "/free", "/search", "/checkout", "/items", "/log", "/sk", "/x"};
  // The direct replayer is told of most requests a few places ahead (prepare()), as
  // `sluice simulate` does, some twice, some not at all: the same decisions.
  std::deque<DecisionRequest> ahead;
  auto make = [&rng, &paths]() {
    DecisionRequest r;
    const std::uint64_t which = rng() % 20;
    r.domain = which == 0 ? "unknown" : which < 4 ? "flat" : "api";
    r.hits = static_cast<std::int64_t>(rng() % 4);
    const std::string user = "u" + std::to_string(rng() % 5);
    if (rng() % 4 == 0) {
      r.client_id = user;
    }
    if (r.domain == "flat") {
      // The domain-level limit (no descriptors), or a wildcard node.
      if (rng() % 2 == 0) {
        r.descriptors.push_back({{"path", rng() % 2 == 0 ? "/wx" : "/y"}});
      }
    } else {
      r.descriptors.push_back({{"path", paths[rng() % 8]}, {"user", user}});
    }
    if (r.domain == "api" && rng() % 3 == 0) {
      r.descriptors.push_back(
          {{rng() % 2 == 0 ? "tenant" : "plan", "t" + std::to_string(rng() % 2)}});
    }
    return r;
  };
  for (std::size_t i = 0; i < Replayer::kAhead; ++i) {
    ahead.push_back(make());
  }
  Micros at = kStart;
  for (int i = 0; i < 4000; ++i) {
    at += static_cast<Micros>(rng() % 200'000);
    ahead.push_back(make());
    const std::uint64_t hint = rng() % 4;
    if (hint != 0) {
      direct.prepare("", ahead.back());
    }
    if (hint == 1) {
      direct.prepare("", ahead[rng() % ahead.size()]);
    }
    DecisionRequest& r = ahead.front();
    DecisionRequest copy = r;
    Decision seen;
    bool decided = direct.decide(at, "", r, [&](const Decision& d) {
      seen.allowed = d.allowed;
      seen.domain_known = d.domain_known;
      seen.decided_at_us = d.decided_at_us;
      seen.descriptors = d.descriptors;
    });
    ASSERT_TRUE(decided);
    EXPECT_EQ(r.domain, copy.domain) << "the request comes back";
    auto expected = service.decide(at, "", std::move(copy));
    ASSERT_TRUE(expected.ok());
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(seen.allowed, expected->allowed);
    EXPECT_EQ(seen.domain_known, expected->domain_known);
    EXPECT_EQ(seen.decided_at_us, expected->decided_at_us);
    ASSERT_EQ(seen.descriptors.size(), expected->descriptors.size());
    for (std::size_t d = 0; d < seen.descriptors.size(); ++d) {
      const DescriptorStatus& a = seen.descriptors[d];
      const DescriptorStatus& b = expected->descriptors[d];
      EXPECT_EQ(a.matched, b.matched);
      EXPECT_EQ(a.node, b.node);
      ASSERT_EQ(a.limits.size(), b.limits.size());
      for (std::size_t l = 0; l < a.limits.size(); ++l) {
        const LimitStatus& x = a.limits[l];
        const LimitStatus& y = b.limits[l];
        EXPECT_EQ(x.name, y.name);
        EXPECT_EQ(x.rule, y.rule);
        EXPECT_EQ(x.limit, y.limit);
        EXPECT_EQ(x.shadow, y.shadow);
        EXPECT_EQ(x.unlimited, y.unlimited);
        EXPECT_EQ(x.quota, y.quota);
        EXPECT_EQ(x.outcome.allowed, y.outcome.allowed);
        EXPECT_EQ(x.outcome.remaining, y.outcome.remaining);
        EXPECT_EQ(x.outcome.reset_after_us, y.outcome.reset_after_us);
        EXPECT_EQ(x.outcome.retry_after_us, y.outcome.retry_after_us);
        EXPECT_EQ(x.outcome.delay_us, y.outcome.delay_us);
        EXPECT_EQ(x.outcome.never, y.outcome.never);
      }
    }
    EXPECT_EQ(decisionWord(seen), decisionWord(*expected));
    ahead.pop_front();
  }
}

}  // namespace
}  // namespace sluice::simulate
