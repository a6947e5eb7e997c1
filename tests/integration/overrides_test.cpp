// Runtime overrides through the real binary (docs/overrides.md): PUT, GET and DELETE
// /limits/overrides on the admin listener change the next decision without resetting the
// counter, are refused with the rules validator's messages, expire, survive a restart of the
// memory store (its file); the admin listener's bearer token and unix socket.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/free_port.hpp"
#include "support/http_client.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_server.hpp"
#include "support/sluice_process.hpp"
#include "support/wait.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

const char* const kApiRules = R"(domain: api
descriptors:
  - key: plan
    value: free
    rate_limit:
      name: free
      unit: minute
      requests_per_unit: 5
  - key: user
    rate_limit:
      name: per-user
      unit: minute
      requests_per_unit: 3
  - key: fixed
    rate_limit:
      name: fixed
      unit: minute
      requests_per_unit: 3
      overridable: false
)";

std::string freePlan(const std::string& client) {
  return R"({"domain":"api","clientId":")" + client +
         R"(","descriptors":[{"entries":[{"key":"plan","value":"free"}]}]})";
}

std::string user(const std::string& name) {
  return R"({"domain":"api","descriptors":[{"entries":[{"key":"user","value":")" + name +
         R"("}]}]})";
}

std::string raiseFree(const std::string& client, int limit, const std::string& extra = "") {
  return R"({"domain":"api","rule":"free","clientId":")" + client +
         R"(","rate_limit":{"unit":"minute","requests_per_unit":)" + std::to_string(limit) +
         R"(},"reason":"launch")" + extra + "}";
}

/// A sluice with the api rules and an admin listener on a free loopback port.
struct OverrideSluice {
  explicit OverrideSluice(std::vector<std::string> extra = {})
      : process(options(std::move(extra))), admin_port(process.adminPort()) {}

  static SluiceOptions options(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--threads", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    SluiceOptions o = withRules({{"api.yaml", kApiRules}}, std::move(args));
    o.admin = true;
    return o;
  }

  HttpClient admin() const { return HttpClient("127.0.0.1", admin_port); }

  SluiceProcess process;
  std::uint16_t admin_port;
};

/// The first limit of the first descriptor of a /shouldAllowRequest answer.
json firstLimit(const HttpResponse& response) {
  return json::parse(response.body)["descriptors"][0]["limits"][0];
}

/// A client spends the free plan's 5, is denied, is raised to 1000 and passes on its next
/// request, which counts after the 6 it already made: the counter survived the change.
void expectOverrideChangesTheNextDecision(HttpClient& client, HttpClient& admin,
                                          const std::string& who) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(client.post("/shouldAllowRequest", freePlan(who)).status, 200) << i;
  }
  ASSERT_EQ(client.post("/shouldAllowRequest", freePlan(who)).status, 429);

  HttpResponse put = admin.request("PUT", "/limits/overrides", raiseFree(who, 1000));
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(json::parse(put.body)["override"]["limit"]["requests_per_unit"], 1000);

  HttpResponse next = client.post("/shouldAllowRequest", freePlan(who));
  ASSERT_EQ(next.status, 200) << next.body;
  const json limit = firstLimit(next);
  EXPECT_EQ(limit["limit"], 1000);
  EXPECT_EQ(limit["remaining"], 1000 - 6) << "the 5 charged before the change still count";
  EXPECT_EQ(limit["override"]["reason"], "launch");

  // Another client of the same plan keeps the rule's limit.
  HttpResponse other = client.post("/shouldAllowRequest", freePlan(who + "-other"));
  EXPECT_EQ(firstLimit(other)["limit"], 5);
  EXPECT_FALSE(firstLimit(other).contains("override"));

  ASSERT_EQ(admin
                .request("DELETE", "/limits/overrides",
                         R"({"domain":"api","rule":"free","clientId":")" + who + R"("})")
                .status,
            200);
  EXPECT_EQ(client.post("/shouldAllowRequest", freePlan(who)).status, 429);
}

TEST(OverridesTest, AnOverrideChangesTheNextDecisionAndKeepsTheCounter) {
  awayFromWindowBoundary(seconds(60), seconds(15));
  OverrideSluice sluice;
  HttpClient client = sluice.process.client();
  HttpClient admin = sluice.admin();
  expectOverrideChangesTheNextDecision(client, admin, "acme");
}

TEST(OverridesTest, ABucketOverrideChangesOneDescriptorValue) {
  awayFromWindowBoundary(seconds(60), seconds(15));
  OverrideSluice sluice;
  HttpClient client = sluice.process.client();
  HttpResponse put = sluice.admin().request(
      "PUT", "/limits/overrides",
      R"({"domain":"api","descriptors":[[{"key":"user","value":"bob"}]],)"
      R"("rate_limit":{"unit":"minute","requests_per_unit":4},"reason":"bob is vip"})");
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(json::parse(put.body)["override"]["rule"], "per-user");
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(client.post("/shouldAllowRequest", user("bob")).status, 200) << i;
  }
  EXPECT_EQ(client.post("/shouldAllowRequest", user("bob")).status, 429);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(client.post("/shouldAllowRequest", user("carol")).status, 200) << i;
  }
  EXPECT_EQ(client.post("/shouldAllowRequest", user("carol")).status, 429);
}

TEST(OverridesTest, BadOverridesAreRefusedWithTheValidatorsMessage) {
  OverrideSluice sluice;
  HttpClient admin = sluice.admin();
  HttpResponse unknown = admin.request(
      "PUT", "/limits/overrides",
      R"({"domain":"api","rule":"nope","clientId":"x","rate_limit":{"unit":"minute","requests_per_unit":1},"reason":"r"})");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(json::parse(unknown.body)["error"],
            "rule: no rate limit named \"nope\" in domain \"api\"");

  HttpResponse negative = admin.request("PUT", "/limits/overrides", raiseFree("x", -1));
  EXPECT_EQ(negative.status, 400);
  // The rules loader's own words for the same mistake in a rules file.
  EXPECT_EQ(json::parse(negative.body)["error"],
            "rate_limit: 'requests_per_unit' must be a non-negative integer, got '-1'");
  HttpResponse unit = admin.request(
      "PUT", "/limits/overrides",
      R"({"domain":"api","rule":"free","clientId":"x","rate_limit":{"unit":"minutes","requests_per_unit":1},"reason":"r"})");
  EXPECT_EQ(unit.status, 400);
  EXPECT_NE(unit.body.find("did you mean 'minute'?"), std::string::npos) << unit.body;

  std::string huge =
      R"({"domain":"api","rule":"free","clientId":"x","rate_limit":{"unit":"minute","requests_per_unit":1},"reason":")";
  huge += std::string(1'000'000, 'x') + "\"}";
  HttpResponse big = admin.request("PUT", "/limits/overrides", huge);
  EXPECT_EQ(big.status, 400);
  EXPECT_EQ(json::parse(big.body)["error"], "reason: must be at most 1024 bytes, got 1000000");

  HttpResponse fixed = admin.request(
      "PUT", "/limits/overrides",
      R"({"domain":"api","rule":"fixed","clientId":"x","rate_limit":{"unit":"minute","requests_per_unit":9},"reason":"r"})");
  EXPECT_EQ(fixed.status, 400);
  EXPECT_NE(fixed.body.find("says overridable: false"), std::string::npos) << fixed.body;

  HttpResponse algorithm =
      admin.request("PUT", "/limits/overrides",
                    R"({"domain":"api","rule":"free","clientId":"x","rate_limit":{"unit":"minute",)"
                    R"("requests_per_unit":9,"algorithm":"token_bucket"},"reason":"r"})");
  EXPECT_EQ(algorithm.status, 400);
  EXPECT_NE(algorithm.body.find("keeps the rule's algorithm"), std::string::npos) << algorithm.body;
  HttpResponse none = admin.get("/limits/overrides");
  ASSERT_EQ(none.status, 200);
  EXPECT_TRUE(json::parse(none.body)["overrides"].empty()) << none.body;
}

TEST(OverridesTest, AnOverrideExpires) {
  awayFromWindowBoundary(seconds(60), seconds(15));
  OverrideSluice sluice;
  HttpClient client = sluice.process.client();
  ASSERT_EQ(sluice.admin()
                .request("PUT", "/limits/overrides", raiseFree("temp", 100, R"(,"expires":"2s")"))
                .status,
            200);
  HttpResponse raised = client.post("/shouldAllowRequest", freePlan("temp"));
  EXPECT_EQ(firstLimit(raised)["limit"], 100);
  EXPECT_TRUE(firstLimit(raised)["override"].contains("expires_at_ms"));
  EXPECT_TRUE(waitFor(
      [&] {
        return firstLimit(client.post("/shouldAllowRequest", freePlan("temp")))["limit"] == 5;
      },
      milliseconds(5000)));
  EXPECT_TRUE(json::parse(sluice.admin().get("/limits/overrides").body)["overrides"].empty());
}

TEST(OverridesTest, ListsFiltersAndDeletes) {
  OverrideSluice sluice;
  HttpClient admin = sluice.admin();
  ASSERT_EQ(admin.request("PUT", "/limits/overrides", raiseFree("a", 10)).status, 200);
  HttpResponse again = admin.request("PUT", "/limits/overrides", raiseFree("a", 20));
  EXPECT_EQ(json::parse(again.body)["replaced"], true);
  ASSERT_EQ(admin.request("PUT", "/limits/overrides", raiseFree("b", 30)).status, 200);
  json all = json::parse(admin.get("/limits/overrides").body)["overrides"];
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0]["clientId"], "a");
  EXPECT_EQ(all[0]["limit"]["requests_per_unit"], 20);
  EXPECT_EQ(all[0]["set_by"], "127.0.0.1");
  json only_b = json::parse(admin.get("/limits/overrides?client=b").body)["overrides"];
  ASSERT_EQ(only_b.size(), 1u);
  EXPECT_EQ(only_b[0]["limit"]["requests_per_unit"], 30);
  EXPECT_TRUE(json::parse(admin.get("/limits/overrides?rule=per-user").body)["overrides"].empty());
  EXPECT_EQ(admin.get("/limits/overrides?clients=b").status, 400);
  const std::string target = R"({"domain":"api","rule":"free","clientId":"a"})";
  EXPECT_EQ(admin.request("DELETE", "/limits/overrides", target).status, 200);
  EXPECT_EQ(admin.request("DELETE", "/limits/overrides", target).status, 404);
  EXPECT_EQ(json::parse(admin.get("/limits/overrides").body)["overrides"].size(), 1u);
  HttpResponse metrics = admin.get("/metrics");
  EXPECT_NE(metrics.body.find("sluice_override_changes_total{action=\"replace\"} 1"),
            std::string::npos)
      << metrics.body;
}

TEST(OverridesTest, TheMostDeniedClientsShowTheirOverride) {
  awayFromWindowBoundary(seconds(60), seconds(15));
  OverrideSluice sluice;
  HttpClient client = sluice.process.client();
  ASSERT_EQ(sluice.admin().request("PUT", "/limits/overrides", raiseFree("noisy", 2)).status, 200);
  for (int i = 0; i < 4; ++i) {
    client.post("/shouldAllowRequest", freePlan("noisy"));
  }
  json top = json::parse(sluice.admin().get("/limits/top?domain=api").body);
  ASSERT_EQ(top["rules"].size(), 1u) << top;
  const json& noisy = top["rules"][0]["clients"][0];
  EXPECT_EQ(noisy["client"], "noisy");
  EXPECT_EQ(noisy["override"]["requests_per_unit"], 2);
  EXPECT_EQ(noisy["override"]["reason"], "launch");
}

TEST(OverridesTest, TheMemoryStoreKeepsOverridesInItsFileAcrossARestart) {
  const std::string dir = makeTempDir("sluice-overrides");
  const std::string file = dir + "/overrides.json";
  {
    OverrideSluice sluice({"--overrides-file", file});
    ASSERT_EQ(sluice.admin().request("PUT", "/limits/overrides", raiseFree("kept", 42)).status,
              200);
  }
  ASSERT_TRUE(std::filesystem::exists(file));
  EXPECT_FALSE(std::filesystem::exists(file + ".tmp"));
  OverrideSluice restarted({"--overrides-file", file});
  HttpClient client = restarted.process.client();
  EXPECT_EQ(firstLimit(client.post("/shouldAllowRequest", freePlan("kept")))["limit"], 42);
  std::filesystem::remove_all(dir);
}

TEST(OverridesTest, ACorruptOverridesFileStopsTheStartWithItsName) {
  const std::string dir = makeTempDir("sluice-overrides");
  const std::string file = dir + "/overrides.json";
  std::ofstream(file) << "{\"format\": \"sluice-overrides 1\", \"overrides\": [{\"tag\": 1}]}";
  const std::string rules = dir + "/api.yaml";
  std::ofstream(rules) << kApiRules;
  auto [code, output] =
      runSluice({"--rules", rules, "--listen", "127.0.0.1:0", "--overrides-file", file});
  EXPECT_EQ(code, 1);
  EXPECT_NE(output.find(file + ": overrides[0]: expected"), std::string::npos) << output;
  std::filesystem::remove_all(dir);
}

TEST(OverridesTest, TheAdminTokenIsRequiredAndReReadWhenItChanges) {
  const std::string dir = makeTempDir("sluice-token");
  const std::string token = dir + "/token";
  std::ofstream(token) << "first-secret\n";
  OverrideSluice sluice({"--admin-token-file", token});
  HttpClient admin = sluice.admin();
  HttpResponse none = admin.get("/limits/overrides");
  EXPECT_EQ(none.status, 401);
  HttpResponse wrong =
      admin.request("GET", "/limits/overrides", "", {{"Authorization", "Bearer nope"}});
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(
      admin.request("DELETE", "/limits", freePlan("x"), {{"Authorization", "Bearer nope"}}).status,
      401);
  EXPECT_EQ(
      admin.request("GET", "/limits/overrides", "", {{"Authorization", "Bearer first-secret"}})
          .status,
      200);
  EXPECT_NE(sluice.process.log().find("refused: a wrong bearer token"), std::string::npos);

  std::ofstream(token + ".new") << "second-secret-rotated\n";
  std::filesystem::rename(token + ".new", token);
  EXPECT_EQ(admin
                .request("GET", "/limits/overrides", "",
                         {{"Authorization", "Bearer second-secret-rotated"}})
                .status,
            200);
  EXPECT_EQ(
      admin.request("GET", "/limits/overrides", "", {{"Authorization", "Bearer first-secret"}})
          .status,
      401);
  std::filesystem::remove_all(dir);
}

TEST(OverridesTest, TheAdminListenerServesAUnixSocketWithItsMode) {
  const std::string dir = makeTempDir("sluice-admin-sock");
  const std::string socket = dir + "/admin.sock";
  SluiceProcess sluice(withRules(
      {{"api.yaml", kApiRules}},
      {"--threads", "2", "--admin-listen", "unix:" + socket, "--admin-socket-mode", "0600"}));
  ASSERT_TRUE(waitFor([&] { return std::filesystem::exists(socket); }, milliseconds(5000)));
  struct stat status {};
  ASSERT_EQ(::stat(socket.c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0600u);
  HttpClient admin(UnixSocket{socket});
  HttpResponse put = admin.request("PUT", "/limits/overrides", raiseFree("local", 9));
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(json::parse(put.body)["override"]["set_by"], "unix");
  HttpClient client = sluice.client();
  EXPECT_EQ(firstLimit(client.post("/shouldAllowRequest", freePlan("local")))["limit"], 9);
  std::filesystem::remove_all(dir);
}

/// Waits until the sluice answers /readyz (its store connected).
bool waitReady(SluiceProcess& sluice) {
  HttpClient client = sluice.client();
  return waitFor([&] { return client.get("/readyz").status == 200; }, milliseconds(10000));
}

std::vector<std::string> redisArgs(const std::string& store, const std::string& url) {
  return {"--store", store, "--redis", url, "--failure-mode", "closed", "--redis-timeout-ms",
          "1000"};
}

TEST(OverridesTest, AnOverrideChangesTheNextDecisionOnRedis) {
  awayFromWindowBoundary(seconds(60), seconds(15));
  RedisServer redis;
  OverrideSluice sluice(redisArgs("redis", redis.url()));
  ASSERT_TRUE(waitReady(sluice.process));
  HttpClient client = sluice.process.client();
  HttpClient admin = sluice.admin();
  expectOverrideChangesTheNextDecision(client, admin, "acme");
  // Kept in Redis: its tag's hash, and the index.
  HttpResponse listed = admin.get("/limits/overrides");
  EXPECT_TRUE(json::parse(listed.body)["overrides"].empty()) << listed.body;
}

TEST(OverridesTest, AnOverrideChangesTheNextDecisionOnRedisCluster) {
  awayFromWindowBoundary(seconds(60), seconds(15));
  RedisCluster cluster(3, 0);
  OverrideSluice sluice(redisArgs("redis_cluster", cluster.url(0)));
  ASSERT_TRUE(waitReady(sluice.process));
  HttpClient client = sluice.process.client();
  HttpClient admin = sluice.admin();
  // Clients whose buckets land on different masters.
  for (const std::string who : {"acme", "globex", "initech"}) {
    expectOverrideChangesTheNextDecision(client, admin, who);
  }
}

TEST(OverridesTest, TwoSidecarsOnOneRedisSeeTheSameOverrideOnTheNextDecision) {
  awayFromWindowBoundary(seconds(60), seconds(15));
  RedisServer redis;
  OverrideSluice a(redisArgs("redis", redis.url()));
  OverrideSluice b(redisArgs("redis", redis.url()));
  ASSERT_TRUE(waitReady(a.process));
  ASSERT_TRUE(waitReady(b.process));
  HttpClient on_a = a.process.client();
  HttpClient on_b = b.process.client();
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(on_a.post("/shouldAllowRequest", freePlan("shared")).status, 200) << i;
  }
  ASSERT_EQ(a.admin().request("PUT", "/limits/overrides", raiseFree("shared", 7)).status, 200);
  // B's very next decision applies it, on the counter A charged.
  HttpResponse next = on_b.post("/shouldAllowRequest", freePlan("shared"));
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(firstLimit(next)["limit"], 7);
  EXPECT_EQ(firstLimit(next)["remaining"], 1);
  EXPECT_EQ(firstLimit(next)["override"]["reason"], "launch");
  // B lists what A set, and B's delete is A's next decision.
  EXPECT_EQ(json::parse(b.admin().get("/limits/overrides").body)["overrides"].size(), 1u);
  ASSERT_EQ(b.admin()
                .request("DELETE", "/limits/overrides",
                         R"({"domain":"api","rule":"free","clientId":"shared"})")
                .status,
            200);
  EXPECT_EQ(on_a.post("/shouldAllowRequest", freePlan("shared")).status, 429);
}

TEST(OverridesTest, TheBoundOnOverridesHoldsOnRedis) {
  RedisServer redis;
  std::vector<std::string> args = redisArgs("redis", redis.url());
  args.insert(args.end(), {"--max-overrides", "2"});
  OverrideSluice sluice(args);
  ASSERT_TRUE(waitReady(sluice.process));
  HttpClient admin = sluice.admin();
  EXPECT_EQ(admin.request("PUT", "/limits/overrides", raiseFree("one", 10)).status, 200);
  EXPECT_EQ(admin.request("PUT", "/limits/overrides", raiseFree("two", 10)).status, 200);
  HttpResponse third = admin.request("PUT", "/limits/overrides", raiseFree("three", 10));
  EXPECT_EQ(third.status, 400) << third.body;
  EXPECT_NE(third.body.find("too many overrides"), std::string::npos) << third.body;
  EXPECT_EQ(admin.request("PUT", "/limits/overrides", raiseFree("two", 20)).status, 200);
}

}  // namespace
}  // namespace sluice::test
