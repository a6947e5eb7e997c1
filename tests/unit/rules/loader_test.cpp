#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sluice/rules/rules.hpp"
#include "support/rules_loading.hpp"

namespace sluice {
namespace {

using test::loadOne;
namespace fs = std::filesystem;

TEST(LoaderTest, LoadsTheSeedExample) {
  const RuleSetPtr rules = loadOne(R"(
domain: auth
descriptors:
  - key: auth_type
    value: login
    rate_limit:
      unit: minute
      requests_per_unit: 5
)");
  ASSERT_TRUE(rules);
  const DomainConfig* auth = rules->findDomain("auth");
  ASSERT_NE(auth, nullptr);
  EXPECT_EQ(rules->findDomain("other"), nullptr);
  ASSERT_EQ(auth->descriptors.size(), 1u);
  const DescriptorNode& node = auth->descriptors[0];
  EXPECT_EQ(node.key, "auth_type");
  EXPECT_EQ(node.value, "login");
  EXPECT_FALSE(node.wildcard);
  ASSERT_EQ(node.limits.size(), 1u);
  const RateLimit& limit = node.limits[0];
  EXPECT_EQ(limit.unit, TimeUnit::kMinute);
  EXPECT_EQ(limit.requests_per_unit, 5);
  EXPECT_EQ(limit.name, "auth.auth_type_login");
  EXPECT_FALSE(limit.explicit_name);
  EXPECT_EQ(limit.limit_id, "i0");
  EXPECT_EQ(limit.params.algorithm, Algorithm::kFixedWindow);
  EXPECT_EQ(limit.params.limit, 5);
  EXPECT_EQ(limit.params.window_us, 60 * kMicrosPerSecond);
  EXPECT_EQ(limit.params.burst, 0);
  EXPECT_EQ(limit.location.file, "test.yaml");
  EXPECT_EQ(limit.location.line, 7);
  EXPECT_EQ(rules->limitCount(), 1u);
  EXPECT_EQ(rules->files, std::vector<std::string>{"test.yaml"});
  EXPECT_EQ(rules->hash.size(), 16u);
}

TEST(LoaderTest, FillsParamsForEveryAlgorithm) {
  const RuleSetPtr rules = loadOne(R"(
domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, unit_multiplier: 30, requests_per_unit: 10, algorithm: token_bucket, burst: 25, warmup: 2s}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 7, algorithm: leaky_bucket, shape: true}
  - key: c
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: sliding_window_log, min_interval: 250ms, count_rejected: true}
  - key: e
    rate_limit: {unit: DAY, requests_per_unit: 0, algorithm: sliding_window_counter}
)");
  ASSERT_TRUE(rules);
  const auto& nodes = rules->findDomain("d")->descriptors;
  const LimitParams& a = nodes[0].limits[0].params;
  EXPECT_EQ(a.algorithm, Algorithm::kTokenBucket);
  EXPECT_EQ(a.limit, 10);
  EXPECT_EQ(a.window_us, 30 * kMicrosPerSecond);
  EXPECT_EQ(a.burst, 25);
  EXPECT_EQ(a.warmup_us, 2 * kMicrosPerSecond);
  EXPECT_EQ(nodes[0].limits[0].unit_multiplier, 30);
  const LimitParams& b = nodes[1].limits[0].params;
  EXPECT_EQ(b.algorithm, Algorithm::kLeakyBucket);
  EXPECT_EQ(b.burst, 7);  // defaults to the limit
  EXPECT_TRUE(b.shape);
  const LimitParams& c = nodes[2].limits[0].params;
  EXPECT_EQ(c.algorithm, Algorithm::kSlidingWindowLog);
  EXPECT_EQ(c.min_interval_us, 250'000);
  EXPECT_TRUE(c.count_rejected);
  EXPECT_EQ(c.window_us, 3'600 * kMicrosPerSecond);
  const LimitParams& e = nodes[3].limits[0].params;
  EXPECT_EQ(e.algorithm, Algorithm::kSlidingWindowCounter);
  EXPECT_EQ(e.limit, 0);
  EXPECT_EQ(e.window_us, 86'400 * kMicrosPerSecond);
}

TEST(LoaderTest, AcceptsEveryAlgorithmSpelling) {
  for (const Algorithm algorithm :
       {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
        Algorithm::kTokenBucket, Algorithm::kLeakyBucket}) {
    const RuleSetPtr rules =
        loadOne("domain: d\nrate_limit: {unit: second, requests_per_unit: 1, algorithm: " +
                std::string(algorithmName(algorithm)) + "}\n");
    ASSERT_TRUE(rules);
    EXPECT_EQ(rules->findDomain("d")->domain_limits[0].params.algorithm, algorithm);
  }
}

TEST(LoaderTest, ReadsEnvoyFieldsAndMetadata) {
  const RuleSetPtr rules = loadOne(R"(
domain: d
descriptors:
  - key: k
    value: "foo*"
    share_threshold: true
    shadow_mode: true
    detailed_metric: true
    value_to_metric: true
    metadata:
      owner: team-a
      tier: 2
      quoted: "3"
      tags: [x, true]
    rate_limit:
      name: shared
      unit: second
      requests_per_unit: 1
  - key: u
    rate_limit:
      unlimited: true
      replaces:
        - name: shared
)");
  ASSERT_TRUE(rules);
  const auto& nodes = rules->findDomain("d")->descriptors;
  EXPECT_TRUE(nodes[0].wildcard);
  EXPECT_TRUE(nodes[0].share_threshold);
  EXPECT_TRUE(nodes[0].shadow_mode);
  EXPECT_TRUE(nodes[0].detailed_metric);
  EXPECT_TRUE(nodes[0].value_to_metric);
  EXPECT_EQ(nodes[0].metadata_json,
            R"({"owner":"team-a","quoted":"3","tags":["x",true],"tier":2})");
  EXPECT_TRUE(nodes[0].limits[0].shadow_mode);
  EXPECT_EQ(nodes[0].limits[0].name, "shared");
  EXPECT_EQ(nodes[0].limits[0].limit_id, "nshared");
  EXPECT_TRUE(nodes[1].limits[0].unlimited);
  EXPECT_EQ(nodes[1].limits[0].replaces, std::vector<std::string>{"shared"});
}

TEST(LoaderTest, ReadsRateLimitsListAndDomainLevelLimit) {
  const RuleSetPtr rules = loadOne(R"(
domain: d
rate_limit:
  unit: minute
  requests_per_unit: 100
descriptors:
  - key: plan
    value: free
    rate_limits:
      - {name: per_minute, unit: minute, requests_per_unit: 30}
      - {unit: day, requests_per_unit: 1000}
)");
  ASSERT_TRUE(rules);
  const DomainConfig& d = *rules->findDomain("d");
  ASSERT_EQ(d.domain_limits.size(), 1u);
  EXPECT_EQ(d.domain_limits[0].requests_per_unit, 100);
  EXPECT_EQ(d.domain_limits[0].name, "d");
  const auto& limits = d.descriptors[0].limits;
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_EQ(limits[0].limit_id, "nper_minute");
  EXPECT_EQ(limits[1].limit_id, "i1");
  EXPECT_EQ(limits[1].name, "d.plan_free[1]");
  EXPECT_EQ(rules->limitCount(), 3u);
}

TEST(LoaderTest, AcceptsAnEnvoyFileUnchanged) {
  // From envoyproxy/ratelimit's README.
  const RuleSetPtr rules = loadOne(R"(
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
  - key: destination_cluster
    value: mongo_cps
    shadow_mode: true
    detailed_metric: true
    rate_limit:
      unit: SECOND
      requests_per_unit: 500
)");
  ASSERT_TRUE(rules);
  EXPECT_EQ(rules->limitCount(), 3u);
}

TEST(LoaderTest, HashDependsOnContentNotOrder) {
  const std::string a = "domain: a\n";
  const std::string b = "domain: b\n";
  const auto first = loadRulesFromStrings({{"a.yaml", a}, {"b.yaml", b}});
  const auto second = loadRulesFromStrings({{"b.yaml", b}, {"a.yaml", a}});
  const auto changed = loadRulesFromStrings({{"a.yaml", a}, {"b.yaml", b + "# note\n"}});
  ASSERT_TRUE(first.rules && second.rules && changed.rules);
  EXPECT_EQ(first.rules->hash, second.rules->hash);
  EXPECT_NE(first.rules->hash, changed.rules->hash);
}

class LoaderDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sluice_rules_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name) << content;
  }
  fs::path dir_;
};

TEST_F(LoaderDirTest, LoadsYamlAndYmlIgnoringHiddenAndTemporaryFiles) {
  write("a.yaml", "domain: a\n");
  write("b.yml", "domain: b\n");
  write(".hidden.yaml", "not: valid\n");
  write("a.yaml~", "broken: [\n");
  write("a.yaml.swp", "broken: [\n");
  write("#a.yaml#", "broken: [\n");
  write("notes.txt", "broken: [\n");
  const LoadResult result = loadRules(dir_.string());
  ASSERT_TRUE(result.errors.empty()) << result.errors[0].toString();
  EXPECT_EQ(result.rules->domains.size(), 2u);
  EXPECT_EQ(result.rules->files,
            (std::vector<std::string>{(dir_ / "a.yaml").string(), (dir_ / "b.yml").string()}));
}

TEST_F(LoaderDirTest, StampsTheLoadTime) {
  write("a.yaml", "domain: a\n");
  EXPECT_EQ(loadRules(dir_.string(), 1234).rules->loaded_at_ms, 1234);
  EXPECT_EQ(loadRules(dir_.string()).rules->loaded_at_ms, 0);
}

TEST_F(LoaderDirTest, EmptyDirectoryIsAnEmptyRuleSet) {
  const LoadResult result = loadRules(dir_.string());
  ASSERT_TRUE(result.rules);
  EXPECT_TRUE(result.rules->domains.empty());
}

TEST(RulesFileNameTest, AcceptsYamlAndSkipsHiddenAndTemporaries) {
  EXPECT_TRUE(isRulesFileName("a.yaml"));
  EXPECT_TRUE(isRulesFileName("a.yml"));
  EXPECT_TRUE(isRulesFileName("A.YAML"));
  for (const char* name : {".a.yaml", ".#a.yaml", "a.yaml~", "a.yaml.swp", "#a.yaml#", "a.yaml.tmp",
                           "a.txt", ".yaml", "", "4913"}) {
    EXPECT_FALSE(isRulesFileName(name)) << name;
  }
}

TEST_F(LoaderDirTest, LoadsASingleFile) {
  write("rules.conf", "domain: a\n");
  const LoadResult result = loadRules((dir_ / "rules.conf").string());
  ASSERT_TRUE(result.rules);
  EXPECT_NE(result.rules->findDomain("a"), nullptr);
}

TEST_F(LoaderDirTest, ReportsAMissingPath) {
  const LoadResult result = loadRules((dir_ / "nope").string());
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_FALSE(result.rules);
  EXPECT_EQ(result.errors[0].message, "the rules path does not exist");
}

TEST_F(LoaderDirTest, ReportsErrorsOfEveryFile) {
  write("a.yaml", "domain: a\ndescriptors:\n  - key: x\n    rate_limit: {unit: minute}\n");
  write("b.yaml", "domain: b\nratelimit: {}\n");
  const LoadResult result = loadRules(dir_.string());
  ASSERT_EQ(result.errors.size(), 2u);
  EXPECT_EQ(result.errors[0].location.file, (dir_ / "a.yaml").string());
  EXPECT_EQ(result.errors[1].location.file, (dir_ / "b.yaml").string());
}

TEST_F(LoaderDirTest, ValidateCommandPrintsEveryErrorAndReturnsOne) {
  write("a.yaml", "domain: a\ndescriptors:\n  - key: x\n    rate_limit: {unit: minute}\n");
  write("b.yaml", "domain: b\nratelimit: {}\n");
  std::ostringstream out;
  EXPECT_EQ(validateRulesCommand(dir_.string(), out), 1);
  const std::string a = (dir_ / "a.yaml").string();
  const std::string b = (dir_ / "b.yaml").string();
  EXPECT_NE(out.str().find(a + ":4:17: rate limit is missing 'requests_per_unit'"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find(b + ":2:1: unknown key 'ratelimit' at the top level (did you mean "
                               "'rate_limit'?)"),
            std::string::npos)
      << out.str();
}

TEST_F(LoaderDirTest, ValidateCommandReturnsZeroWhenValid) {
  write("a.yaml", "domain: a\n");
  std::ostringstream out;
  EXPECT_EQ(validateRulesCommand(dir_.string(), out), 0);
  EXPECT_NE(out.str().find("OK"), std::string::npos);
}

TEST(ShippedRulesTest, ConfigRulesDirectoryIsValid) {
  const LoadResult result = loadRules(std::string(SLUICE_SOURCE_DIR) + "/config/rules");
  for (const RuleError& error : result.errors) {
    ADD_FAILURE() << error.toString();
  }
  ASSERT_TRUE(result.rules);
  const DomainConfig* auth = result.rules->findDomain("auth");
  ASSERT_NE(auth, nullptr);
  const RequestMatch login = matchRequest(*auth, {test::desc({{"auth_type", "login"}})});
  ASSERT_EQ(login.descriptors[0].limits.size(), 1u);
  EXPECT_EQ(login.descriptors[0].limits[0].limit->requests_per_unit, 5);
  EXPECT_EQ(login.descriptors[0].limits[0].limit->unit, TimeUnit::kMinute);
  const DomainConfig* fallback = result.rules->findDomain("default");
  ASSERT_NE(fallback, nullptr);
  const RequestMatch none = matchRequest(*fallback, {});
  ASSERT_EQ(none.descriptors.size(), 1u);
  EXPECT_EQ(none.descriptors[0].limits.size(), 1u);
}

}  // namespace
}  // namespace sluice
