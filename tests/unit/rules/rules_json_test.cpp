#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sluice/rules/rules.hpp"
#include "support/rules_loading.hpp"

namespace sluice {
namespace {

TEST(RulesJsonTest, RendersDomainsTreeLimitsAndVersion) {
  LoadResult loaded = loadRulesFromStrings({{"auth.yaml", R"(
domain: auth
rate_limit: {unit: minute, requests_per_unit: 100}
descriptors:
  - key: auth_type
    value: login
    metadata: {team: identity}
    rate_limit: {name: login, unit: minute, requests_per_unit: 5}
    descriptors:
      - key: ip
        rate_limit:
          unit: second
          unit_multiplier: 30
          requests_per_unit: 2
          algorithm: token_bucket
          burst: 4
)"}});
  ASSERT_TRUE(loaded.rules);
  auto rules = std::make_shared<RuleSet>(*loaded.rules);
  rules->loaded_at_ms = 1234;
  const auto json = nlohmann::json::parse(rulesToJson(*rules));
  EXPECT_EQ(json["hash"], rules->hash);
  EXPECT_EQ(json["loaded_at_ms"], 1234);
  EXPECT_EQ(json["files"], nlohmann::json::array({"auth.yaml"}));
  EXPECT_EQ(json["limit_count"], 3);
  const auto& auth = json["domains"]["auth"];
  EXPECT_EQ(auth["file"], "auth.yaml");
  EXPECT_EQ(auth["rate_limits"][0]["requests_per_unit"], 100);
  const auto& login = auth["descriptors"][0];
  EXPECT_EQ(login["key"], "auth_type");
  EXPECT_EQ(login["value"], "login");
  EXPECT_EQ(login["metadata"]["team"], "identity");
  EXPECT_EQ(login["rate_limits"][0]["name"], "login");
  EXPECT_EQ(login["rate_limits"][0]["unit"], "minute");
  EXPECT_EQ(login["rate_limits"][0]["algorithm"], "fixed_window");
  const auto& ip = login["descriptors"][0];
  EXPECT_FALSE(ip.contains("value"));
  EXPECT_EQ(ip["rate_limits"][0]["algorithm"], "token_bucket");
  EXPECT_EQ(ip["rate_limits"][0]["burst"], 4);
  EXPECT_EQ(ip["rate_limits"][0]["unit_multiplier"], 30);
  EXPECT_EQ(ip["rate_limits"][0]["window_ms"], 30'000);
  EXPECT_EQ(ip["rate_limits"][0]["location"], "auth.yaml:12:11");
}

TEST(RulesJsonTest, EmptyRuleSetIsValidJson) {
  const auto json = nlohmann::json::parse(rulesToJson(RuleSet{}));
  EXPECT_TRUE(json["domains"].empty());
  EXPECT_EQ(json["limit_count"], 0);
}

}  // namespace
}  // namespace sluice
