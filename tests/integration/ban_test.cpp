// The penalty box through the real binary (docs/bans.md): a client denied `after` times is
// refused for the ban's duration with Retry-After to its end and "banned": true, the next
// ban is longer, the admin reset lifts it, the metrics count it apart and the log says when
// one starts; bad `ban:` blocks are refused with the validator's message. On the memory
// store, on Redis, on Redis Cluster, and with two sidecars on one Redis.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
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

// 2 logins an hour; the third denial within the hour bans for 2 s, then 4 s, at most 5 s.
const char* const kRules = R"(domain: api
descriptors:
  - key: user
    rate_limit:
      name: login
      unit: hour
      requests_per_unit: 2
      ban: {after: 3, duration: 2s, backoff: 2, max: 5s, forgive_after: 1h}
)";

std::string login(const std::string& client) {
  return R"({"domain":"api","clientId":")" + client +
         R"(","descriptors":[{"entries":[{"key":"user","value":")" + client + R"("}]}]})";
}

struct BanSluice {
  explicit BanSluice(std::vector<std::string> extra = {})
      : process(options(std::move(extra))), admin_port(process.adminPort()) {}

  static SluiceOptions options(std::vector<std::string> extra) {
    SluiceOptions o;
    o.rule_files = {{"api.yaml", kRules}};
    o.admin = true;
    o.args = {"--threads", "2"};
    o.args.insert(o.args.end(), extra.begin(), extra.end());
    return o;
  }

  HttpClient admin() const { return HttpClient("127.0.0.1", admin_port); }

  /// The value of one series of /metrics, or -1 when it is absent.
  double metric(const std::string& series) { return seriesValue(process, series); }

  bool ready() {
    HttpClient client = process.client();
    return waitFor([&] { return client.get("/readyz").status == 200; }, milliseconds(10000));
  }

  SluiceProcess process;
  std::uint16_t admin_port;
};

std::vector<std::string> redisArgs(const std::string& store, const std::string& url) {
  return {"--store", store, "--redis", url, "--failure-mode", "closed", "--redis-timeout-ms",
          "1000"};
}

/// Two allowed, two denied, and the third denial starts a ban of `seconds`.
void floodUntilBanned(HttpClient& client, const std::string& who, int seconds) {
  for (int i = 0; i < 2; ++i) {
    HttpResponse r = client.post("/shouldAllowRequest", login(who));
    ASSERT_EQ(r.status, 200) << r.body;
  }
  for (int i = 0; i < 2; ++i) {
    HttpResponse r = client.post("/shouldAllowRequest", login(who));
    ASSERT_EQ(r.status, 429) << r.body;
    EXPECT_FALSE(json::parse(r.body).contains("banned")) << r.body;
  }
  HttpResponse banned = client.post("/shouldAllowRequest", login(who));
  ASSERT_EQ(banned.status, 429) << banned.body;
  const json body = json::parse(banned.body);
  EXPECT_EQ(body["banned"], true) << banned.body;
  EXPECT_EQ(body["descriptors"][0]["limits"][0]["banned"], true) << banned.body;
  EXPECT_EQ(banned.header("Retry-After"), std::to_string(seconds)) << banned.body;
}

/// Banned, then a reset that lifts it, then the ladder's second step after the first ends.
void banLadderAndReset(BanSluice& sluice, HttpClient& client, const std::string& who) {
  floodUntilBanned(client, who, 2);
  HttpResponse again = client.post("/shouldAllowRequest", login(who));
  ASSERT_EQ(again.status, 429) << again.body;
  EXPECT_EQ(json::parse(again.body)["banned"], true) << again.body;
  EXPECT_EQ(again.header("X-Ratelimit-Reset"), again.header("Retry-After")) << again.body;

  HttpResponse reset = sluice.admin().request("DELETE", "/limits",
                                              R"({"domain":"api","clientId":")" + who + R"("})");
  ASSERT_EQ(reset.status, 200) << reset.body;
  HttpResponse lifted = client.post("/shouldAllowRequest", login(who));
  EXPECT_EQ(lifted.status, 200) << lifted.body;

  // Banned again (step 1: the reset forgot the ladder too); once it ends, the hour's limit
  // still denies, and the third denial is step 2: twice as long.
  HttpResponse r = client.post("/shouldAllowRequest", login(who));
  ASSERT_EQ(r.status, 200) << r.body;
  for (int i = 0; i < 3; ++i) {
    r = client.post("/shouldAllowRequest", login(who));
  }
  ASSERT_EQ(json::parse(r.body)["banned"], true) << r.body;
  ASSERT_TRUE(waitFor(
      [&] {
        return !json::parse(client.post("/shouldAllowRequest", login(who)).body).contains("banned");
      },
      milliseconds(5000)));
  for (int i = 0; i < 2; ++i) {
    r = client.post("/shouldAllowRequest", login(who));
  }
  EXPECT_EQ(json::parse(r.body)["banned"], true) << r.body;
  EXPECT_EQ(r.header("Retry-After"), "4") << r.body;
}

TEST(BanTest, TheLadderTheResetAndTheMetricsOnMemory) {
  awayFromWindowBoundary(std::chrono::seconds(3600), std::chrono::seconds(20));
  BanSluice sluice;
  HttpClient client = sluice.process.client();
  banLadderAndReset(sluice, client, "mallory");
  EXPECT_EQ(sluice.metric(R"(sluice_bans_total{domain="api",rule="login"})"), 3);
  EXPECT_GE(sluice.metric(R"(sluice_banned_total{domain="api",rule="login"})"), 4);
  EXPECT_TRUE(waitFor(
      [&] {
        return sluice.process.log().find("ban started: domain=api rule=login client=mallory") !=
               std::string::npos;
      },
      milliseconds(3000)))
      << sluice.process.log();
  EXPECT_NE(sluice.process.log().find("step=2 for=4s"), std::string::npos) << sluice.process.log();
  // Another client is not affected.
  EXPECT_EQ(client.post("/shouldAllowRequest", login("alice")).status, 200);
}

TEST(BanTest, TheLadderAndTheResetOnRedis) {
  awayFromWindowBoundary(std::chrono::seconds(3600), std::chrono::seconds(20));
  RedisServer redis;
  BanSluice sluice(redisArgs("redis", redis.url()));
  ASSERT_TRUE(sluice.ready());
  HttpClient client = sluice.process.client();
  banLadderAndReset(sluice, client, "mallory");
  EXPECT_EQ(sluice.metric(R"(sluice_bans_total{domain="api",rule="login"})"), 3);
}

TEST(BanTest, BansOnRedisClusterForClientsOnEveryMaster) {
  awayFromWindowBoundary(std::chrono::seconds(3600), std::chrono::seconds(20));
  RedisCluster cluster(3, 0);
  BanSluice sluice(redisArgs("redis_cluster", cluster.url(0)));
  ASSERT_TRUE(sluice.ready());
  HttpClient client = sluice.process.client();
  for (const std::string who : {"acme", "globex", "initech", "umbrella"}) {
    floodUntilBanned(client, who, 2);
  }
}

TEST(BanTest, TwoSidecarsOnOneRedisAgreeAndOnesResetLiftsTheBanOnBoth) {
  awayFromWindowBoundary(std::chrono::seconds(3600), std::chrono::seconds(20));
  RedisServer redis;
  BanSluice a(redisArgs("redis", redis.url()));
  BanSluice b(redisArgs("redis", redis.url()));
  ASSERT_TRUE(a.ready());
  ASSERT_TRUE(b.ready());
  HttpClient on_a = a.process.client();
  HttpClient on_b = b.process.client();
  floodUntilBanned(on_a, "shared", 2);
  // B's very first request for this client is refused by A's ban, to the same end.
  HttpResponse on_b_first = on_b.post("/shouldAllowRequest", login("shared"));
  ASSERT_EQ(on_b_first.status, 429) << on_b_first.body;
  EXPECT_EQ(json::parse(on_b_first.body)["banned"], true) << on_b_first.body;
  // A reset through A lifts the ban on B too (B's local cache keeps a ban at most 1 s).
  ASSERT_EQ(
      a.admin().request("DELETE", "/limits", R"({"domain":"api","clientId":"shared"})").status,
      200);
  EXPECT_EQ(on_a.post("/shouldAllowRequest", login("shared")).status, 200);
  EXPECT_TRUE(
      waitFor([&] { return on_b.post("/shouldAllowRequest", login("shared")).status == 200; },
              milliseconds(3000)));
}

TEST(BanTest, EnvoysJsonSaysBannedWithTheResetAtTheBansEnd) {
  BanSluice sluice;
  HttpClient client = sluice.process.client();
  const std::string body =
      R"({"domain":"api","descriptors":[{"entries":[{"key":"user","value":"eve"}]}]})";
  HttpResponse r;
  for (int i = 0; i < 5; ++i) {
    r = client.post("/json", body);
  }
  ASSERT_EQ(r.status, 429) << r.body;
  const json status = json::parse(r.body)["statuses"][0];
  EXPECT_EQ(status["code"], "OVER_LIMIT") << r.body;
  EXPECT_EQ(status["banned"], true) << r.body;
  EXPECT_EQ(status["durationUntilReset"], "2s") << r.body;
}

TEST(BanTest, BadBanBlocksAreRefusedWithTheValidatorsMessage) {
  const std::string dir = makeTempDir("sluice-ban");
  const std::string path = dir + "/bad.yaml";
  std::ofstream(path) << "domain: api\ndescriptors:\n  - key: user\n    rate_limit:\n"
                         "      unit: minute\n      requests_per_unit: 5\n"
                         "      ban: {after: 3, duration: 10m, max: 1m}\n";
  const auto [code, output] = runSluice({"--validate", "--rules", dir});
  EXPECT_EQ(code, 1) << output;
  EXPECT_NE(output.find("bad.yaml:7:"), std::string::npos) << output;
  EXPECT_NE(output.find("'max' must be at least 'duration' (the first ban)"), std::string::npos)
      << output;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::test
