// POST /shouldAllowRequest over real HTTP against the real binary (README.md, "HTTP API").
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "support/http_client.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;

const std::string kSeedRequest =
    R"({"domain":"auth","clientId":"u1","descriptors":[{"entries":[{"key":"auth_type","value":"login"}]}]})";

std::string seedRequestFor(const std::string& client) {
  return R"({"domain":"auth","clientId":")" + client +
         R"(","descriptors":[{"entries":[{"key":"auth_type","value":"login"}]}]})";
}

// Fixed windows are epoch-aligned minutes: start a test that needs one whole window
// early enough in it.
void awaitFreshMinute(int needed_seconds = 10) {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  auto into = std::chrono::duration_cast<std::chrono::milliseconds>(now) % std::chrono::minutes(1);
  if (into > std::chrono::seconds(60 - needed_seconds)) {
    std::this_thread::sleep_for(std::chrono::minutes(1) - into + std::chrono::milliseconds(50));
  }
}

class DecisionEndpointTest : public ::testing::Test {
 protected:
  SluiceProcess sluice_;
};

TEST_F(DecisionEndpointTest, SeedExampleAllowsFiveThenDeniesWithEveryHeader) {
  awaitFreshMinute();
  HttpClient client = sluice_.client();
  for (int i = 0; i < 5; ++i) {
    HttpResponse r = client.post("/shouldAllowRequest", kSeedRequest);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("X-Ratelimit-Limit"), "5");
    EXPECT_EQ(r.header("X-Ratelimit-Remaining"), std::to_string(4 - i));
    int reset = std::stoi(r.header("X-Ratelimit-Reset"));
    EXPECT_GE(reset, 1);
    EXPECT_LE(reset, 60);
    EXPECT_EQ(r.header("RateLimit-Policy"), R"("auth.auth_type_login";q=5;w=60)");
    EXPECT_EQ(r.header("RateLimit"), R"("auth.auth_type_login";r=)" + std::to_string(4 - i) +
                                         ";t=" + r.header("X-Ratelimit-Reset"));
    EXPECT_FALSE(r.hasHeader("Retry-After"));
    EXPECT_FALSE(r.hasHeader("X-Ratelimit-Retry-After"));
    EXPECT_EQ(r.header("Content-Type"), "application/json");
    json body = json::parse(r.body);
    EXPECT_EQ(body["allowed"], true);
    EXPECT_EQ(body["descriptors"][0]["limits"][0]["remaining"], 4 - i);
  }
  HttpResponse denied = client.post("/shouldAllowRequest", kSeedRequest);
  ASSERT_EQ(denied.status, 429) << denied.body;
  EXPECT_EQ(denied.header("X-Ratelimit-Limit"), "5");
  EXPECT_EQ(denied.header("X-Ratelimit-Remaining"), "0");
  int retry = std::stoi(denied.header("Retry-After"));
  EXPECT_GE(retry, 1);
  EXPECT_LE(retry, 60);
  EXPECT_EQ(denied.header("X-Ratelimit-Retry-After"), denied.header("Retry-After"));
  EXPECT_EQ(denied.header("X-Ratelimit-Reset"), denied.header("Retry-After"));
  EXPECT_EQ(denied.header("RateLimit-Policy"), R"("auth.auth_type_login";q=5;w=60)");
  EXPECT_EQ(denied.header("RateLimit"),
            R"("auth.auth_type_login";r=0;t=)" + denied.header("X-Ratelimit-Reset"));
  json body = json::parse(denied.body);
  EXPECT_EQ(body["allowed"], false);
  const json& limit = body["descriptors"][0]["limits"][0];
  EXPECT_EQ(limit["name"], "auth.auth_type_login");
  EXPECT_EQ(limit["limit"], 5);
  EXPECT_EQ(limit["unit"], "minute");
  EXPECT_EQ(limit["algorithm"], "fixed_window");
  EXPECT_EQ(limit["remaining"], 0);
  EXPECT_GT(limit["retry_after_ms"].get<long>(), 0);
  // Retry-After is retry_after_ms rounded up to whole seconds.
  EXPECT_EQ(retry, (limit["retry_after_ms"].get<long>() + 999) / 1000);
}

TEST_F(DecisionEndpointTest, AnotherClientIsUnaffected) {
  awaitFreshMinute();
  HttpClient client = sluice_.client();
  for (int i = 0; i < 6; ++i) {
    (void)client.post("/shouldAllowRequest", seedRequestFor("alice"));
  }
  EXPECT_EQ(client.post("/shouldAllowRequest", seedRequestFor("alice")).status, 429);
  HttpResponse bob = client.post("/shouldAllowRequest", seedRequestFor("bob"));
  EXPECT_EQ(bob.status, 200);
  EXPECT_EQ(bob.header("X-Ratelimit-Remaining"), "4");
}

TEST_F(DecisionEndpointTest, BareListDescriptorShapeIsTheSameBucket) {
  awaitFreshMinute();
  HttpClient client = sluice_.client();
  EXPECT_EQ(
      client.post("/shouldAllowRequest", seedRequestFor("carol")).header("X-Ratelimit-Remaining"),
      "4");
  HttpResponse r = client.post(
      "/shouldAllowRequest",
      R"({"domain":"auth","clientId":"carol","descriptors":[[{"key":"auth_type","value":"login"}]]})");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("X-Ratelimit-Remaining"), "3");
}

TEST_F(DecisionEndpointTest, SeedMinimalRequestUsesTheDefaultDomainLimit) {
  awaitFreshMinute();
  HttpResponse r = sluice_.client().post(
      "/shouldAllowRequest", R"({"clientId": "123", "timestamp": "2023-07-13T07:20:50.52Z"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("X-Ratelimit-Limit"), "100");
  EXPECT_EQ(r.header("X-Ratelimit-Remaining"), "99");
  EXPECT_EQ(json::parse(r.body)["domain"], "default");
}

TEST_F(DecisionEndpointTest, HitsZeroChecksWithoutConsuming) {
  awaitFreshMinute();
  HttpClient client = sluice_.client();
  std::string peek =
      R"({"domain":"auth","clientId":"dave","hits":0,"descriptors":[{"entries":[{"key":"auth_type","value":"login"}]}]})";
  EXPECT_EQ(client.post("/shouldAllowRequest", peek).header("X-Ratelimit-Remaining"), "5");
  EXPECT_EQ(client.post("/shouldAllowRequest", peek).header("X-Ratelimit-Remaining"), "5");
}

TEST_F(DecisionEndpointTest, CostAboveTheLimitIsDeniedWithoutARetryTime) {
  HttpResponse r = sluice_.client().post(
      "/shouldAllowRequest",
      R"({"domain":"auth","clientId":"big","hits":6,"descriptors":[[{"key":"auth_type","value":"login"}]]})");
  ASSERT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.header("X-Ratelimit-Limit"), "5");
  EXPECT_EQ(r.header("X-Ratelimit-Remaining"), "5");
  EXPECT_FALSE(r.hasHeader("Retry-After"));
  json body = json::parse(r.body);
  EXPECT_EQ(body["descriptors"][0]["limits"][0]["never"], true);
  EXPECT_NE(body["reason"].get<std::string>().find("can ever admit"), std::string::npos);
}

TEST_F(DecisionEndpointTest, NoRuleMatchedIsAllowedWithoutLimitHeaders) {
  HttpResponse r = sluice_.client().post(
      "/shouldAllowRequest",
      R"({"domain":"auth","clientId":"u1","descriptors":[{"entries":[{"key":"nothing","value":"here"}]}]})");
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.hasHeader("X-Ratelimit-Limit"));
  EXPECT_FALSE(r.hasHeader("RateLimit"));
  EXPECT_EQ(json::parse(r.body)["descriptors"][0]["matched"], false);
}

TEST_F(DecisionEndpointTest, UnknownDomainIsAllowedWithoutLimitHeaders) {
  HttpResponse r = sluice_.client().post(
      "/shouldAllowRequest",
      R"({"domain":"nope","descriptors":[{"entries":[{"key":"a","value":"b"}]}]})");
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.hasHeader("X-Ratelimit-Limit"));
  EXPECT_EQ(json::parse(r.body)["reason"], "unknown domain");
}

TEST_F(DecisionEndpointTest, MalformedJsonIs400NamingTheProblem) {
  HttpResponse r = sluice_.client().post("/shouldAllowRequest", "{not json");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_NE(json::parse(r.body)["error"].get<std::string>().find("invalid JSON"),
            std::string::npos);
}

TEST_F(DecisionEndpointTest, WrongTypeIs400NamingTheField) {
  HttpResponse r = sluice_.client().post(
      "/shouldAllowRequest",
      R"({"domain":"auth","descriptors":[{"entries":[{"key":"auth_type","value":5}]}]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"], "descriptors[0].entries[0].value: must be a string");
}

TEST_F(DecisionEndpointTest, EmptyKeyIs400) {
  HttpResponse r = sluice_.client().post(
      "/shouldAllowRequest", R"({"descriptors":[{"entries":[{"key":"","value":"x"}]}]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"],
            "descriptors[0].entries[0].key: must be a non-empty string");
}

TEST_F(DecisionEndpointTest, BadTimestampIs400) {
  HttpResponse r =
      sluice_.client().post("/shouldAllowRequest", R"({"timestamp":"2023-02-30T07:20:50Z"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"].get<std::string>().rfind("timestamp:", 0), 0u);
}

TEST_F(DecisionEndpointTest, UnknownPathIs404) {
  HttpResponse r = sluice_.client().get("/nope");
  EXPECT_EQ(r.status, 404);
  EXPECT_TRUE(json::parse(r.body).contains("error"));
}

TEST_F(DecisionEndpointTest, WrongMethodIs405WithAllow) {
  HttpResponse r = sluice_.client().get("/shouldAllowRequest");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("Allow"), "POST");
  EXPECT_TRUE(json::parse(r.body).contains("error"));
}

}  // namespace
}  // namespace sluice::test
