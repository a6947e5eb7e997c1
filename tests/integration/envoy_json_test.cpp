// envoyproxy/ratelimit's behaviour through POST /json of the real binary, with envoy's own
// fixtures (tests/data/envoy_ratelimit): quota_mode, empty descriptors, entries without
// value, merged rules metadata, request-side limits, unlimited, unnamed limits, per-descriptor
// hits_addend, MERGE_DOMAIN_CONFIG; and the denied answer of both decision APIs (docs/envoy.md).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "support/http_client.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(SLUICE_SOURCE_DIR) + "/tests/data/envoy_ratelimit/" + name);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_FALSE(text.str().empty()) << name;
  return text.str();
}

constexpr const char* kIssue13Rules = R"(domain: i13
descriptors:
  - key: a
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 1}
)";

// example.yaml's limits are per minute: start a test that needs one whole window early
// enough in it (the wait happens only in the last seconds of a minute).
void awaitFreshMinute(int needed_seconds = 15) {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  auto into = std::chrono::duration_cast<std::chrono::milliseconds>(now) % std::chrono::minutes(1);
  if (into > std::chrono::seconds(60 - needed_seconds)) {
    std::this_thread::sleep_for(std::chrono::minutes(1) - into + std::chrono::milliseconds(50));
  }
}

class EnvoyJsonTest : public ::testing::Test {
 protected:
  EnvoyJsonTest()
      : sluice_(withRules({{"example.yaml", fixture("examples/example.yaml")},
                           {"config.yaml", fixture("examples/config.yaml")},
                           {"basic_config.yaml", fixture("config/basic_config.yaml")},
                           {"i13.yaml", kIssue13Rules}})) {}

  json post(const std::string& body, int expected_status) {
    HttpResponse r = sluice_.client().post("/json", body);
    EXPECT_EQ(r.status, expected_status) << body << " -> " << r.body;
    return json::parse(r.body, nullptr, false);
  }

  SluiceProcess sluice_;
};

TEST_F(EnvoyJsonTest, EnvoysExampleConfigLoadsWithQuotaMode) {
  auto [code, output] =
      runSluice({"--validate", "--rules",
                 std::string(SLUICE_SOURCE_DIR) + "/tests/data/envoy_ratelimit/examples"});
  EXPECT_EQ(code, 0) << output;
  HttpResponse rules = sluice_.client().get("/rules");
  ASSERT_EQ(rules.status, 200);
  EXPECT_NE(rules.body.find("\"quota_mode\":true"), std::string::npos);
}

TEST_F(EnvoyJsonTest, EmptyDescriptorsAnswerOkWithNoLimit) {
  json body = post(R"({"domain":"rl","descriptors":[{},{"entries":[]}]})", 200);
  EXPECT_EQ(body, json::parse(R"({"overallCode":"OK","statuses":[{"code":"OK"},{"code":"OK"}]})"));
  post(R"({"domain":"rl","descriptors":[]})", 400);  // envoy: the list must not be empty
}

TEST_F(EnvoyJsonTest, AnEntryWithoutValueIsTheEmptyValue) {
  // basic_config's key-only node key2 (20 per minute) takes the value "".
  json body = post(R"({"domain":"test-domain","descriptors":[{"entries":[{"key":"key2"}]}]})", 200);
  EXPECT_EQ(body["statuses"][0]["currentLimit"]["requestsPerUnit"], 20);
  EXPECT_EQ(body["statuses"][0]["currentLimit"]["unit"], "MINUTE");
}

TEST_F(EnvoyJsonTest, QuotaModeAndMetadataOfThePassedDescriptors) {
  awaitFreshMinute();
  const std::string both =
      R"({"domain":"rl","descriptors":[{"entries":[{"key":"service","value":"service_1"}]},
          {"entries":[{"key":"service","value":"service_2"}]}]})";
  json first = post(both, 200);
  EXPECT_EQ(first["dynamicMetadata"]["metadata"],
            json::parse(R"({"service_with_quota":{"name":"service_1"}})"))
      << first.dump();
  EXPECT_EQ(first["dynamicMetadata"]["domain"], "rl");
  EXPECT_EQ(first["dynamicMetadata"]["descriptors"][0]["entries"][0], "service=service_1");
  json second = post(both, 200);  // service_1 over its quota; service_2 has room
  EXPECT_EQ(second["statuses"][0]["code"], "OVER_LIMIT");
  EXPECT_EQ(second["statuses"][1]["code"], "OK");
  EXPECT_EQ(second["dynamicMetadata"]["metadata"],
            json::parse(R"({"service_with_quota":{"name":"service_2"}})"));
  json third = post(both, 429);  // every quota descriptor is over
  EXPECT_EQ(third["overallCode"], "OVER_LIMIT");
  EXPECT_FALSE(third["dynamicMetadata"].contains("metadata"));
}

TEST_F(EnvoyJsonTest, ARequestSideLimitIsUsedInsteadOfTheRules) {
  const std::string request =
      R"({"domain":"rl","descriptors":[{"entries":[{"key":"source_cluster","value":"proxy"}],
          "limit":{"requestsPerUnit":1,"unit":"HOUR"}}]})";
  json first = post(request, 200);
  EXPECT_EQ(first["statuses"][0]["currentLimit"],
            json::parse(R"({"requestsPerUnit":1,"unit":"HOUR"})"));
  EXPECT_EQ(first["statuses"][0]["limitRemaining"], 0);
  json second = post(request, 429);
  EXPECT_EQ(second["statuses"][0]["code"], "OVER_LIMIT");
  // A new number keeps the window's count, as envoy keys the counter without it; the denied
  // request was counted too (envoy's counting), so the third of three is the last allowed.
  json raised = post(
      R"({"domain":"rl","descriptors":[{"entries":[{"key":"source_cluster","value":"proxy"}],
          "limit":{"requestsPerUnit":3,"unit":"HOUR"}}]})",
      200);
  EXPECT_EQ(raised["statuses"][0]["code"], "OK");
  EXPECT_EQ(raised["statuses"][0]["limitRemaining"], 0);
}

TEST_F(EnvoyJsonTest, UnlimitedAnswersAllOfUint32AndUnnamedLimitsHaveNoName) {
  json body = post(
      R"({"domain":"rl","descriptors":[{"entries":[{"key":"qux","value":"x"}]},
          {"entries":[{"key":"unspec","value":"x"}]},
          {"entries":[{"key":"foo","value":"x"},{"key":"bar","value":"bkthomps"}]}]})",
      200);
  EXPECT_EQ(body["statuses"][0], json::parse(R"({"code":"OK","limitRemaining":4294967295})"));
  EXPECT_FALSE(body["statuses"][1]["currentLimit"].contains("name")) << body.dump();
  EXPECT_EQ(body["statuses"][2]["currentLimit"]["name"], "bkthomps");
}

TEST_F(EnvoyJsonTest, DescriptorsWithDifferentHitsAddendAreEachChargedTheirOwn) {
  json body = post(
      R"({"domain":"test-domain","descriptors":[
          {"entries":[{"key":"key2","value":"mixed"}],"hitsAddend":5},
          {"entries":[{"key":"key4","value":"mixed"}],"hits_addend":"1"}]})",
      200);
  EXPECT_EQ(body["statuses"][0]["limitRemaining"], 15);
  EXPECT_EQ(body["statuses"][1]["limitRemaining"], 0);
  // key4 (1 per day) is exhausted: the next request is denied, and key2 is charged its 5
  // all the same, as envoy counts every matched limit (--envoy-charge every).
  json denied = post(
      R"({"domain":"test-domain","descriptors":[
          {"entries":[{"key":"key2","value":"mixed"}],"hitsAddend":5},
          {"entries":[{"key":"key4","value":"mixed"}]}]})",
      429);
  EXPECT_EQ(denied["statuses"][0]["code"], "OK");
  EXPECT_EQ(denied["statuses"][0]["limitRemaining"], 10);
}

TEST_F(EnvoyJsonTest, ADeniedAnswerReportsTheTrueStateOfTheLimitsItDidNotCharge) {
  // a 10/hour and b 1/hour, a request with both, twice. /json counts every matched limit as
  // envoy does (--envoy-charge every): the denied request charges a too.
  const std::string request =
      R"({"domain":"i13","descriptors":[{"entries":[{"key":"a","value":"1"}]},
          {"entries":[{"key":"b","value":"1"}]}]})";
  EXPECT_EQ(post(request, 200)["statuses"][0]["limitRemaining"], 9);
  json denied = post(request, 429);
  EXPECT_EQ(denied["statuses"][0]["code"], "OK");
  EXPECT_EQ(denied["statuses"][0]["limitRemaining"], 8);
  EXPECT_EQ(denied["statuses"][1]["code"], "OVER_LIMIT");
  // Sluice's own API charges nothing to a denied request, and a check agrees.
  const std::string own =
      R"({"domain":"i13","descriptors":[[{"key":"a","value":"2"}],[{"key":"b","value":"2"}]]})";
  HttpClient client = sluice_.client();
  ASSERT_EQ(client.post("/shouldAllowRequest", own).status, 200);
  HttpResponse r = client.post("/shouldAllowRequest", own);
  ASSERT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(json::parse(r.body)["descriptors"][0]["limits"][0]["remaining"], 9);
  HttpResponse check =
      client.post("/shouldAllowRequest",
                  R"({"domain":"i13","hits":0,"descriptors":[[{"key":"a","value":"2"}]]})");
  EXPECT_EQ(json::parse(check.body)["descriptors"][0]["limits"][0]["remaining"], 9);
}

TEST(EnvoyMergeDomainConfigTest, FilesThatShareADomainMergeOnlyWhenAsked) {
  const std::map<std::string, std::string> files = {
      {"merge_domain_key1.yaml", fixture("config/merge_domain_key1.yaml")},
      {"merge_domain_key2.yaml", fixture("config/merge_domain_key2.yaml")}};
  const std::string dir = makeTempDir("sluice-merge");
  for (const auto& [name, yaml] : files) {
    std::ofstream(dir + "/" + name) << yaml;
  }
  auto [refused, why] = runSluice({"--validate", "--rules", dir});
  EXPECT_EQ(refused, 1) << why;
  EXPECT_NE(why.find("duplicate domain 'test-domain'"), std::string::npos) << why;
  auto [merged, output] = runSluice({"--validate", "--merge-domain-config", "--rules", dir});
  EXPECT_EQ(merged, 0) << output;
  std::filesystem::remove_all(dir);

  // The environment variable, as a container sets it.
  SluiceOptions options = withRules(files);
  options.env.emplace_back("SLUICE_MERGE_DOMAIN_CONFIG", "true");
  SluiceProcess sluice(options);
  HttpResponse r = sluice.client().post(
      "/json",
      R"({"domain":"test-domain","descriptors":[{"entries":[{"key":"key2","value":"value2"}]}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["statuses"][0]["currentLimit"]["requestsPerUnit"], 20);
}

}  // namespace
}  // namespace sluice::test
