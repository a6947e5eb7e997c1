// `algorithm: sketch` over real HTTP against the real binary, on the memory store and on
// `--store redis` with a real redis-server (docs/sketch.md): decisions, headers, "approximate",
// one sketch per rule whatever the number of clients, the shared seed in Redis, metrics.
// Hour windows: no assertion depends on timing.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/http_client.hpp"
#include "support/redis_server.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;

constexpr const char* kRules = R"(domain: sk
descriptors:
  - key: remote_address
    rate_limit:
      name: per_ip
      unit: hour
      requests_per_unit: 3
      algorithm: sketch
      sketch: {expected_requests: 100000}
  - key: user
    rate_limit:
      name: per_user_bloom
      unit: hour
      requests_per_unit: 2
      algorithm: sketch
      sketch: {width: 4096, depth: 3}
      bloom: true
      expected_clients: 10000
)";

std::string body(const std::string& key, const std::string& value, int hits = 1) {
  return R"({"domain":"sk","descriptors":[[{"key":")" + key + R"(","value":")" + value +
         R"("}]],"hits":)" + std::to_string(hits) + "}";
}

class SketchHttpTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    std::vector<std::string> args{"--threads", "2"};
    if (GetParam()) {
      redis_ = std::make_unique<RedisServer>();
      // One I/O thread (one connection, which /readyz reports) and `closed`: no answer is
      // ever a degraded one.
      args = {"--threads", "1", "--store", "redis", "--redis", redis_->url(), "--failure-mode",
              "closed",
              // A loaded CI machine must not turn a slow answer into a 503.
              "--redis-timeout-ms", "1000"};
    }
    sluice_ = std::make_unique<SluiceProcess>(withRules({{"sk.yaml", kRules}}, args));
    if (GetParam()) {
      // /healthz answers before the Redis connection is up; /readyz says when it is.
      HttpClient client = sluice_->client();
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (client.get("/readyz").status != 200) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << sluice_->log();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }

  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<SluiceProcess> sluice_;
};

TEST_P(SketchHttpTest, LimitsEachClientAndSaysItIsApproximate) {
  HttpClient http = sluice_->client();
  for (int i = 0; i < 3; ++i) {
    const HttpResponse r = http.post("/shouldAllowRequest", body("remote_address", "10.0.0.1"));
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    EXPECT_TRUE(j["approximate"].get<bool>());
    const json& limit = j["descriptors"][0]["limits"][0];
    EXPECT_EQ(limit["algorithm"], "sketch");
    EXPECT_TRUE(limit["approximate"].get<bool>());
    EXPECT_EQ(limit["remaining"].get<int>(), 2 - i);
    EXPECT_EQ(r.header("X-Ratelimit-Limit"), "3");
    EXPECT_EQ(r.header("X-Ratelimit-Remaining"), std::to_string(2 - i));
  }
  const HttpResponse denied = http.post("/shouldAllowRequest", body("remote_address", "10.0.0.1"));
  ASSERT_EQ(denied.status, 429) << denied.body;
  EXPECT_FALSE(denied.header("Retry-After").empty());
  EXPECT_EQ(denied.header("RateLimit-Policy"), "\"per_ip\";q=3;w=3600");
  // Another client of the same rule is counted apart.
  EXPECT_EQ(http.post("/shouldAllowRequest", body("remote_address", "10.0.0.2")).status, 200);
  // A cost larger than the limit can never pass.
  const HttpResponse never =
      http.post("/shouldAllowRequest", body("remote_address", "10.0.0.3", 4));
  ASSERT_EQ(never.status, 429);
  EXPECT_TRUE(json::parse(never.body)["descriptors"][0]["limits"][0]["never"].get<bool>());
}

TEST_P(SketchHttpTest, ManyClientsShareOneSketchPerRule) {
  HttpClient http = sluice_->client();
  for (int c = 0; c < 300; ++c) {
    ASSERT_EQ(http.post("/shouldAllowRequest", body("user", "u" + std::to_string(c))).status, 200);
  }
  for (int i = 0; i < 2; ++i) {
    http.post("/shouldAllowRequest", body("user", "u0"));
  }
  EXPECT_EQ(http.post("/shouldAllowRequest", body("user", "u0")).status, 429);
  if (GetParam()) {
    // Two strings per rule (even and odd windows) at most, named with the seed's fingerprint.
    const auto seed = redis_->command({"GET", "sluice:sketch-seed"});
    ASSERT_EQ(seed->type, REDIS_REPLY_STRING);
    EXPECT_EQ(std::string(seed->str).size(), 32U);
    const auto keys = redis_->command({"KEYS", "sluice:*:sk:*"});
    ASSERT_EQ(keys->type, REDIS_REPLY_ARRAY);
    EXPECT_EQ(keys->elements, 1U);  // only the current window's string was written
    const auto all = redis_->command({"DBSIZE"});
    EXPECT_EQ(all->integer, 2);  // that string and the seed: no key per client
  }
  const std::string metrics = http.get("/metrics").body;
  EXPECT_NE(metrics.find("sluice_sketch_load{domain=\"sk\",rule=\"per_user_bloom\"} "),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("sluice_sketch_saturated_ratio{domain=\"sk\",rule=\"per_user_bloom\"} "),
            std::string::npos);
  if (!GetParam()) {
    EXPECT_NE(metrics.find("sluice_memory_store_keys 0"), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("sluice_sketch_memory_bytes{domain=\"sk\",rule=\"per_user_bloom\"} "),
              std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, SketchHttpTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "redis" : "memory"; });

}  // namespace
}  // namespace sluice::test
