#include "http/admin_routes.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "sluice/common/clock.hpp"
#include "sluice/rules/bucket_key.hpp"
#include "sluice/store/memory_store.hpp"

namespace sluice::http {
namespace {

constexpr const char* kRules = R"(domain: auth
rate_limit:
  name: per_client
  unit: minute
  requests_per_unit: 100
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
)";

class AdminRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadResult loaded = loadRulesFromStrings({{"auth.yaml", kRules}});
    ASSERT_TRUE(loaded.errors.empty());
    rules_ = loaded.rules;
    store_ = makeMemoryStore(MemoryStoreOptions{}, clock_, metrics_);
    DecisionServiceParts parts;
    parts.rules = [this] { return rules_; };
    parts.store = store_;
    decisions_ = makeDecisionService(std::move(parts));
    AdminContext context;
    context.operations.metrics = &metrics_;
    context.operations.rules = [this] { return rules_; };
    context.operations.store_healthy = [] { return true; };
    // One decision thread whose tasks run in place.
    reset_ =
        makeLimitReset([this] { return rules_; },
                       {ResetTarget{[](std::function<void()> task) { task(); }, store_.get()}});
    context.reset = reset_.get();
    addAdminRoutes(router_, context);
  }

  Response call(std::string method, std::string path, std::string body = {}) {
    Request request;
    request.method = std::move(method);
    request.path = path;
    request.target = std::move(path);
    request.body = std::move(body);
    Router::Match match = router_.route(request.method, request.path);
    if (match.route == nullptr) {
      Response r;
      r.status = match.status;
      return r;
    }
    std::optional<Response> out;
    match.route->handler(request, [&](Response r) { out = std::move(r); });
    EXPECT_TRUE(out.has_value());
    return *out;
  }

  bool allowed(const std::string& client, const std::string& value) {
    DecisionRequest request;
    request.domain = "auth";
    request.client_id = client;
    request.descriptors = {{{"auth_type", value}}};
    std::optional<Result<Decision>> out;
    decisions_->decide(std::move(request), [&](Result<Decision> d) { out = std::move(d); });
    return out && *out && (*out)->allowed;
  }

  ManualClock clock_;
  Metrics metrics_;
  RuleSetPtr rules_;
  StorePtr store_;
  std::unique_ptr<DecisionService> decisions_;
  std::unique_ptr<LimitReset> reset_;
  Router router_;
};

const char* const kLoginBody =
    R"({"domain":"auth","clientId":"ann","descriptors":[[{"key":"auth_type","value":"login"}]]})";

TEST_F(AdminRoutesTest, PrefixesAreTheKeysTheDecisionServiceCharges) {
  DecisionRequest request;
  request.domain = "auth";
  request.client_id = "a|b";
  request.descriptors = {{{"auth_type", "login"}}};
  auto prefixes = resetKeyPrefixes(*rules_, request);
  ASSERT_TRUE(prefixes);
  RequestMatch match = matchRequest(*rules_->findDomain("auth"), request.descriptors);
  ASSERT_EQ(match.descriptors.size(), 1u);
  ASSERT_EQ(match.descriptors[0].limits.size(), 1u);
  EXPECT_EQ(*prefixes, std::vector<std::string>{
                           BucketKey::storeKey("a|b", match.descriptors[0].limits[0].bucket_key)});
}

TEST_F(AdminRoutesTest, PrefixesWithoutDescriptorsCoverTheWholeDomainForTheClient) {
  DecisionRequest request;
  request.domain = "auth";
  request.client_id = "ann";
  auto prefixes = resetKeyPrefixes(*rules_, request);
  ASSERT_TRUE(prefixes);
  EXPECT_EQ(*prefixes, (std::vector<std::string>{BucketKey::storeKey("ann", "auth:"),
                                                 BucketKey::storeKey("ann", "auth;")}));
}

TEST_F(AdminRoutesTest, UnlimitedOrUnmatchedDescriptorsHaveNothingToReset) {
  DecisionRequest request;
  request.domain = "auth";
  request.descriptors = {{{"auth_type", "free"}}};
  auto prefixes = resetKeyPrefixes(*rules_, request);
  ASSERT_FALSE(prefixes);
  EXPECT_EQ(prefixes.error().kind, ErrorKind::kInvalidArgument);
  request.domain = "other";
  EXPECT_EQ(resetKeyPrefixes(*rules_, request).error().kind, ErrorKind::kNotFound);
}

TEST_F(AdminRoutesTest, DeleteLimitsLetsADeniedClientPassAgain) {
  ASSERT_TRUE(allowed("ann", "login"));
  ASSERT_TRUE(allowed("ann", "login"));
  ASSERT_FALSE(allowed("ann", "login"));
  ASSERT_TRUE(allowed("bob", "login"));
  ASSERT_TRUE(allowed("bob", "login"));
  Response r = call("DELETE", "/limits", kLoginBody);
  ASSERT_EQ(r.status, 200) << r.body;
  auto body = nlohmann::json::parse(r.body);
  EXPECT_EQ(body["buckets_removed"], 1);
  EXPECT_EQ(body["clientId"], "ann");
  EXPECT_TRUE(allowed("ann", "login"));
  EXPECT_FALSE(allowed("bob", "login"));  // another client keeps its count
}

TEST_F(AdminRoutesTest, DeleteLimitsAnswersErrorsWithStatus) {
  EXPECT_EQ(call("DELETE", "/limits", "{").status, 400);
  EXPECT_EQ(call("DELETE", "/limits", R"({"domain":"nope"})").status, 404);
  EXPECT_EQ(
      call("DELETE", "/limits", R"({"domain":"auth","descriptors":[[{"key":"x","value":"y"}]]})")
          .status,
      400);
  EXPECT_EQ(call("GET", "/limits").status, 405);
}

TEST_F(AdminRoutesTest, ServesTheReadOnlyViews) {
  EXPECT_EQ(call("GET", "/healthz").status, 200);
  EXPECT_EQ(call("GET", "/readyz").status, 200);
  EXPECT_EQ(call("GET", "/rules").status, 200);
  EXPECT_EQ(call("GET", "/metrics").status, 200);
  EXPECT_EQ(call("POST", "/shouldAllowRequest", kLoginBody).status, 404);
}

TEST(TopQueryTest, ParsesDomainRuleAndCountPercentDecoded) {
  auto query = parseTopQuery("domain=auth&rule=auth.login%20x&n=3");
  ASSERT_TRUE(query) << query.error().message;
  EXPECT_EQ(query->domain, "auth");
  EXPECT_EQ(query->rule, "auth.login x");
  EXPECT_EQ(query->n, 3u);
  auto defaults = parseTopQuery("");
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->domain, "");
  EXPECT_EQ(defaults->n, 10u);
}

TEST(TopQueryTest, RefusesUnknownParametersAndBadCounts) {
  for (const char* bad : {"n=0", "n=1001", "n=-1", "n=2x", "n=", "rules=x"}) {
    auto query = parseTopQuery(bad);
    ASSERT_FALSE(query) << bad;
    EXPECT_EQ(query.error().kind, ErrorKind::kInvalidArgument);
    EXPECT_EQ(query.error().message.rfind("query: ", 0), 0u) << query.error().message;
  }
}

TEST(TopQueryTest, JsonCarriesBoundsAndReplacesBytesThatAreNotUtf8) {
  TopDenialsReport report;
  report.from_us = 60'000'000;
  report.to_us = 150'000'000;
  RuleTopDenials rule;
  rule.domain = "auth";
  rule.rule = "login";
  rule.denied = 7;
  rule.error_bound = 1;
  rule.clients.push_back({"ok", 5, 1});
  rule.clients.push_back({"bad\xff", 2, 0});
  report.rules.push_back(rule);
  TopDenialsOptions options;
  options.window_us = 60'000'000;
  options.capacity = 5;
  auto body = nlohmann::json::parse(topDenialsJson(report, options));
  EXPECT_EQ(body["from_ms"], 60'000);
  EXPECT_EQ(body["to_ms"], 150'000);
  EXPECT_EQ(body["window_seconds"], 60);
  EXPECT_EQ(body["capacity"], 5);
  EXPECT_EQ(body["rules"][0]["denied"], 7);
  EXPECT_EQ(body["rules"][0]["error_bound"], 1);
  EXPECT_EQ(body["rules"][0]["clients"][0],
            nlohmann::json({{"client", "ok"}, {"count", 5}, {"error", 1}}));
  EXPECT_EQ(body["rules"][0]["clients"][1]["client"], "bad\xEF\xBF\xBD");
}

}  // namespace
}  // namespace sluice::http
