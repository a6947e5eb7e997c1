#include "sluice/decision/decision_service.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/store/memory_store.hpp"

namespace sluice {
namespace {

constexpr const char* kRules = R"(domain: auth
descriptors:
  - key: auth_type
    value: login
    rate_limit:
      unit: minute
      requests_per_unit: 2
  - key: auth_type
    value: free
    rate_limit:
      unlimited: true
  - key: auth_type
    value: trial
    shadow_mode: true
    rate_limit:
      name: trial
      unit: minute
      requests_per_unit: 1
)";

/// A store that records its requests and answers with a fixed result.
class RecordingStore final : public Store {
 public:
  explicit RecordingStore(std::optional<Error> error = std::nullopt) : error_(std::move(error)) {}
  void evaluate(const StoreRequest& request, Callback done) override {
    requests.push_back(request);
    if (error_) {
      done(*error_);
      return;
    }
    StoreResponse response;
    response.outcomes.resize(request.limits.size());
    done(response);
  }
  void reset(const std::vector<std::string>&, ResetCallback done) override { done(0); }
  bool healthy() const override { return true; }
  std::string_view kind() const override { return "recording"; }

  std::vector<StoreRequest> requests;

 private:
  std::optional<Error> error_;
};

class DecisionServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadResult loaded = loadRulesFromStrings({{"auth.yaml", kRules}});
    ASSERT_TRUE(loaded.errors.empty()) << loaded.errors.front().toString();
    rules_ = loaded.rules;
  }

  std::unique_ptr<DecisionService> service(StorePtr store) {
    DecisionServiceParts parts;
    parts.rules = [this] { return rules_; };
    parts.store = std::move(store);
    parts.clock = &clock_;
    parts.observers = {metrics_observer_.get()};
    return makeDecisionService(std::move(parts));
  }

  static DecisionRequest request(std::string client, std::string value, std::int64_t hits = 1) {
    DecisionRequest r;
    r.domain = "auth";
    r.client_id = std::move(client);
    r.descriptors = {{Entry{"auth_type", std::move(value)}}};
    r.hits = hits;
    return r;
  }

  static Result<Decision> decide(DecisionService& s, DecisionRequest r) {
    std::optional<Result<Decision>> out;
    s.decide(std::move(r), [&](Result<Decision> d) { out.emplace(std::move(d)); });
    EXPECT_TRUE(out.has_value()) << "the memory store answers inline";
    return std::move(*out);
  }

  std::uint64_t decisions(const std::string& rule, const std::string& outcome,
                          const std::string& domain = "auth") {
    return metrics_
        .counter("decisions_total", {{"domain", domain}, {"rule", rule}, {"outcome", outcome}})
        .value();
  }

  RuleSetPtr rules_;
  Metrics metrics_;
  ManualClock clock_;
  std::unique_ptr<DecisionObserver> metrics_observer_ = makeDecisionMetrics(metrics_);
};

TEST_F(DecisionServiceTest, DeniesAfterTheLimitPerClient) {
  auto s = service(makeMemoryStore({}, clock_, metrics_));
  EXPECT_TRUE(decide(*s, request("a", "login"))->allowed);
  EXPECT_TRUE(decide(*s, request("a", "login"))->allowed);
  auto third = decide(*s, request("a", "login"));
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->allowed);
  ASSERT_NE(third->binding(), nullptr);
  EXPECT_EQ(third->binding()->limit, 2);
  EXPECT_GT(third->binding()->outcome.retry_after_us, 0);
  EXPECT_TRUE(decide(*s, request("b", "login"))->allowed);
  EXPECT_EQ(decisions("auth.auth_type_login", "allowed"), 3u);
  EXPECT_EQ(decisions("auth.auth_type_login", "denied"), 1u);
}

TEST_F(DecisionServiceTest, CountsKeepTheirSeriesAcrossARulesReload) {
  auto s = service(makeMemoryStore({}, clock_, metrics_));
  EXPECT_TRUE(decide(*s, request("a", "login"))->allowed);
  rules_ = loadRulesFromStrings({{"auth.yaml", kRules}}).rules;  // a new snapshot
  EXPECT_TRUE(decide(*s, request("a", "login"))->allowed);
  EXPECT_FALSE(decide(*s, request("a", "login"))->allowed);
  EXPECT_EQ(decisions("auth.auth_type_login", "allowed"), 2u);
  EXPECT_EQ(decisions("auth.auth_type_login", "denied"), 1u);
}

TEST_F(DecisionServiceTest, KeysAreEscapedClientThenBucket) {
  auto store = std::make_shared<RecordingStore>();
  auto s = service(store);
  ASSERT_TRUE(decide(*s, request("a|b c", "login")).ok());
  ASSERT_EQ(store->requests.size(), 1u);
  const std::string& key = store->requests[0].limits.at(0).key;
  EXPECT_EQ(key.rfind(escapeKeyPart("a|b c") + "|", 0), 0u) << key;
  EXPECT_NE(BucketKey::storeKey("a|b", "c"), BucketKey::storeKey("a", "b|c"));
}

TEST_F(DecisionServiceTest, UnlimitedIsReportedButNotEvaluated) {
  auto store = std::make_shared<RecordingStore>();
  auto s = service(store);
  auto d = decide(*s, request("a", "free"));
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_TRUE(store->requests.empty());
  ASSERT_EQ(d->descriptors.size(), 1u);
  EXPECT_TRUE(d->descriptors[0].matched);
  ASSERT_EQ(d->descriptors[0].limits.size(), 1u);
  EXPECT_TRUE(d->descriptors[0].limits[0].unlimited);
  EXPECT_EQ(d->binding(), nullptr);
}

TEST_F(DecisionServiceTest, ShadowLimitNeverDenies) {
  auto s = service(makeMemoryStore({}, clock_, metrics_));
  EXPECT_TRUE(decide(*s, request("a", "trial"))->allowed);
  auto second = decide(*s, request("a", "trial"));
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->allowed);
  EXPECT_FALSE(second->descriptors[0].limits[0].outcome.allowed);
  EXPECT_EQ(decisions("trial", "shadow_denied"), 1u);
}

TEST_F(DecisionServiceTest, NoRuleAndUnknownDomainAreAllowedAndCounted) {
  auto store = std::make_shared<RecordingStore>();
  auto s = service(store);
  auto none = decide(*s, request("a", "other"));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->allowed);
  EXPECT_FALSE(none->descriptors[0].matched);
  EXPECT_EQ(decisions("", "no_rule"), 1u);

  DecisionRequest unknown = request("a", "login");
  unknown.domain = "elsewhere";
  auto d = decide(*s, unknown);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_FALSE(d->domain_known);
  EXPECT_EQ(decisions("", "unknown_domain", "_unknown"), 1u);
  EXPECT_TRUE(store->requests.empty());
}

TEST_F(DecisionServiceTest, HitsBecomeTheCost) {
  auto store = std::make_shared<RecordingStore>();
  auto s = service(store);
  ASSERT_TRUE(decide(*s, request("a", "login", 0)).ok());
  ASSERT_TRUE(decide(*s, request("a", "login", 7)).ok());
  EXPECT_EQ(store->requests[0].cost, 0);
  EXPECT_EQ(store->requests[1].cost, 7);
}

TEST_F(DecisionServiceTest, MixedDescriptorHitsChargeEachLimitItsOwnCostInOneStoreCall) {
  auto store = std::make_shared<RecordingStore>();
  auto s = service(store);
  DecisionRequest r = request("a", "login", 4);
  r.descriptors.push_back({Entry{"auth_type", "trial"}});
  r.descriptors.push_back({Entry{"auth_type", "login"}});
  r.descriptor_hits = {2, 3, std::nullopt};
  auto d = decide(*s, r);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(store->requests.size(), 1u);
  const StoreRequest& sent = store->requests[0];
  ASSERT_EQ(sent.limits.size(), 3u);
  EXPECT_EQ(sent.limits[0].costOr(sent.cost), 2);
  EXPECT_EQ(sent.limits[1].costOr(sent.cost), 3);
  EXPECT_EQ(sent.limits[2].costOr(sent.cost), 4);  // no hits of its own: the request's
}

TEST_F(DecisionServiceTest, MixedHitsAreAllOrNothing) {
  auto s = service(makeMemoryStore({}, clock_, metrics_));
  DecisionRequest r = request("a", "login");
  r.descriptors.push_back({Entry{"auth_type", "other"}});
  r.descriptor_hits = {3, 1};  // login allows 2 per minute: 3 never fits
  auto d = decide(*s, r);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
  EXPECT_TRUE(d->descriptors[0].limits[0].outcome.never);
  r.descriptor_hits = {2, 1};
  EXPECT_TRUE(decide(*s, r)->allowed);
  EXPECT_EQ(decide(*s, request("a", "login", 0))->descriptors[0].limits[0].outcome.remaining, 0);
}

TEST_F(DecisionServiceTest, StoreErrorsReachTheCaller) {
  auto s = service(std::make_shared<RecordingStore>(makeError(ErrorKind::kTimeout, "deadline")));
  auto d = decide(*s, request("a", "login"));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().kind, ErrorKind::kTimeout);
}

TEST_F(DecisionServiceTest, NoRulesLoadedIsUnavailable) {
  rules_.reset();
  auto s = service(std::make_shared<RecordingStore>());
  auto d = decide(*s, request("a", "login"));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().kind, ErrorKind::kUnavailable);
}

/// Records what each decision's observer call saw.
class CountingObserver final : public DecisionObserver {
 public:
  void observe(const DecisionRequest& request, const Result<Decision>& decision,
               Micros started_us) override {
    clients.push_back(request.client_id);
    outcomes.push_back(decision ? std::string(decisionWord(*decision)) : "error");
    started.push_back(started_us);
  }
  std::vector<std::string> clients;
  std::vector<std::string> outcomes;
  std::vector<Micros> started;
};

TEST_F(DecisionServiceTest, EveryObserverSeesEachDecisionOnceErrorsIncluded) {
  CountingObserver first;
  CountingObserver second;
  DecisionServiceParts parts;
  parts.rules = [this] { return rules_; };
  parts.store = makeMemoryStore({}, clock_, metrics_);
  parts.clock = &clock_;
  parts.observers = {&first, &second};
  auto s = makeDecisionService(std::move(parts));
  EXPECT_TRUE(decide(*s, request("a", "login")).ok());
  rules_.reset();  // an error: no rules loaded
  EXPECT_FALSE(decide(*s, request("b", "login")).ok());
  for (const CountingObserver* o : {&first, &second}) {
    EXPECT_EQ(o->clients, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(o->outcomes, (std::vector<std::string>{"allowed", "error"}));
    EXPECT_EQ(o->started, (std::vector<Micros>{clock_.nowMicros(), clock_.nowMicros()}));
  }
}

TEST_F(DecisionServiceTest, TheRequestComesBackInsideTheDecision) {
  auto s = service(makeMemoryStore({}, clock_, metrics_));
  auto d = decide(*s, request("a", "login", 1));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->request.domain, "auth");
  EXPECT_EQ(d->request.client_id, "a");
  ASSERT_EQ(d->request.descriptors.size(), 1u);
  EXPECT_EQ(d->request.descriptors[0][0].value, "login");
  ASSERT_NE(d->domain, nullptr);
  EXPECT_EQ(d->domain->domain, "auth");
  ASSERT_EQ(d->descriptors.size(), 1u);
  ASSERT_NE(d->descriptors[0].node, nullptr);
  EXPECT_EQ(d->descriptors[0].node->value, "login");
}

// The in-place entry decides as decide() does, reusing its storage: a request written into
// the service's own (cleared between requests), its decision read where it was made.
TEST_F(DecisionServiceTest, DecidesARequestWrittenInPlace) {
  auto s = service(makeMemoryStore({}, clock_, metrics_));
  std::vector<bool> allowed;
  for (const char* client : {"a", "a", "a", "b"}) {
    DecisionService::Callback done = [&](Result<Decision>&& d) {
      ASSERT_TRUE(d.ok());
      allowed.push_back(d->allowed);
      EXPECT_EQ(d->request.client_id, client);
    };
    Status filled = s->decideInPlace(
        [client](DecisionRequest& into) {
          // Cleared for reuse: what an earlier request wrote is gone.
          EXPECT_TRUE(into.client_id.empty());
          EXPECT_EQ(into.hits, 1);
          into = request(client, "login");
          return Status{};
        },
        done);
    EXPECT_TRUE(filled.ok());
  }
  EXPECT_EQ(allowed, (std::vector<bool>{true, true, false, true}));
  EXPECT_EQ(decisions("auth.auth_type_login", "denied"), 1u);
}

// A request that cannot be written is refused with its error: no callback, no observer.
TEST_F(DecisionServiceTest, InPlaceFillErrorIsReturnedNotDecided) {
  auto s = service(makeMemoryStore({}, clock_, metrics_));
  bool called = false;
  DecisionService::Callback done = [&](Result<Decision>&&) { called = true; };
  Status filled = s->decideInPlace(
      [](DecisionRequest&) { return Status(makeError(ErrorKind::kInvalidArgument, "bad body")); },
      done);
  ASSERT_FALSE(filled.ok());
  EXPECT_EQ(filled.error().message, "bad body");
  EXPECT_FALSE(called);
  EXPECT_EQ(decisions("auth.auth_type_login", "allowed"), 0u);
  // The callback was not moved from: the next request can still use it.
  EXPECT_TRUE(s->decideInPlace(
                   [](DecisionRequest& into) {
                     into = request("a", "login");
                     return Status{};
                   },
                   done)
                  .ok());
  EXPECT_TRUE(called);
}

}  // namespace
}  // namespace sluice
