// The admin listener (--admin-listen): DELETE /limits resets counters, the read-only views
// are served there too, and the decision port never exposes the admin actions.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/free_port.hpp"
#include "support/http_client.hpp"
#include "support/redis_server.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;

std::string login(const std::string& client) {
  return R"({"domain":"auth","clientId":")" + client +
         R"(","descriptors":[{"entries":[{"key":"auth_type","value":"login"}]}]})";
}

/// A sluice with an admin listener on a free loopback port.
struct AdminSluice {
  explicit AdminSluice(std::vector<std::string> extra = {})
      : process(options(std::move(extra))), admin_port(process.adminPort()) {}

  static SluiceOptions options(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--threads", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    SluiceOptions o = withArgs(std::move(args));
    o.admin = true;
    return o;
  }

  HttpClient admin() const { return HttpClient("127.0.0.1", admin_port); }

  SluiceProcess process;
  std::uint16_t admin_port;
};

/// How many Redis connections the log reports as established.
/// True once the store's health left start-up as healthy: every I/O thread's store has
/// connected (one log line for the process).
bool allThreadsConnected(const std::string& log) {
  return log.find("store redis health: connecting -> healthy") != std::string::npos;
}

/// Spends client's 5 logins and checks the 6th is denied.
void exhaust(HttpClient& client, const std::string& who) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(client.post("/shouldAllowRequest", login(who)).status, 200) << who << " " << i;
  }
  ASSERT_EQ(client.post("/shouldAllowRequest", login(who)).status, 429) << who;
}

void expectResetMakesDeniedClientPass(AdminSluice& sluice) {
  HttpClient client = sluice.process.client();
  exhaust(client, "alice");
  exhaust(client, "bob");

  HttpResponse reset = sluice.admin().request("DELETE", "/limits", login("alice"));
  ASSERT_EQ(reset.status, 200) << reset.body;
  json body = json::parse(reset.body);
  EXPECT_EQ(body["reset"], true);
  EXPECT_EQ(body["domain"], "auth");
  EXPECT_EQ(body["clientId"], "alice");
  EXPECT_EQ(body["buckets_removed"], 1);

  // Every I/O thread sees the reset (the client may land on any of them).
  for (int i = 0; i < 5; ++i) {
    HttpClient fresh = sluice.process.client();
    EXPECT_EQ(fresh.post("/shouldAllowRequest", login("alice")).status, 200) << i;
  }
  EXPECT_EQ(client.post("/shouldAllowRequest", login("alice")).status, 429);
  EXPECT_EQ(client.post("/shouldAllowRequest", login("bob")).status, 429);  // untouched
}

TEST(AdminListenerTest, ResetMakesADeniedClientPassAgain) {
  AdminSluice sluice;
  expectResetMakesDeniedClientPass(sluice);
}

TEST(AdminListenerTest, ResetMakesADeniedClientPassAgainWithRedis) {
  RedisServer redis;
  AdminSluice sluice({"--store", "redis", "--redis", redis.url(), "--failure-mode", "closed",
                      "--redis-timeout-ms", "1000"});
  // Each I/O thread connects on its own, after /healthz already answers.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!allThreadsConnected(sluice.process.log()) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(allThreadsConnected(sluice.process.log())) << sluice.process.log();
  expectResetMakesDeniedClientPass(sluice);
}

TEST(AdminListenerTest, ResetWithoutDescriptorsClearsEveryBucketOfTheClientInTheDomain) {
  AdminSluice sluice;
  HttpClient client = sluice.process.client();
  exhaust(client, "carol");
  HttpResponse reset =
      sluice.admin().request("DELETE", "/limits", R"({"domain":"auth","clientId":"carol"})");
  ASSERT_EQ(reset.status, 200) << reset.body;
  EXPECT_EQ(json::parse(reset.body)["buckets_removed"], 1);
  EXPECT_EQ(client.post("/shouldAllowRequest", login("carol")).status, 200);
}

TEST(AdminListenerTest, ResetRejectsBadRequests) {
  AdminSluice sluice;
  HttpClient admin = sluice.admin();
  EXPECT_EQ(admin.request("DELETE", "/limits", "{not json").status, 400);
  EXPECT_EQ(admin.request("DELETE", "/limits", R"({"domain":"nope","clientId":"x"})").status, 404);
  HttpResponse unmatched = admin.request(
      "DELETE", "/limits",
      R"({"domain":"auth","clientId":"x","descriptors":[[{"key":"other","value":"v"}]]})");
  EXPECT_EQ(unmatched.status, 400);
  EXPECT_NE(unmatched.body.find("descriptors"), std::string::npos) << unmatched.body;
  EXPECT_EQ(admin.request("POST", "/limits", login("x")).status, 405);
}

TEST(AdminListenerTest, AdminPathsAnswer404OnTheDecisionPort) {
  AdminSluice sluice;
  HttpClient client = sluice.process.client();
  exhaust(client, "dave");
  for (const char* method : {"DELETE", "POST", "GET", "PUT"}) {
    EXPECT_EQ(client.request(method, "/limits", login("dave")).status, 404) << method;
  }
  // Nothing was reset.
  EXPECT_EQ(client.post("/shouldAllowRequest", login("dave")).status, 429);
}

TEST(AdminListenerTest, ServesTheReadOnlyViews) {
  AdminSluice sluice;
  HttpClient admin = sluice.admin();
  EXPECT_EQ(admin.get("/healthz").status, 200);
  EXPECT_EQ(admin.get("/readyz").status, 200);
  HttpResponse rules = admin.get("/rules");
  ASSERT_EQ(rules.status, 200);
  EXPECT_TRUE(json::parse(rules.body)["domains"].contains("auth"));
  HttpResponse metrics = admin.get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("# TYPE sluice_decisions_total counter"), std::string::npos);
  // The admin port decides nothing.
  EXPECT_EQ(admin.post("/shouldAllowRequest", login("x")).status, 404);
}

TEST(AdminListenerTest, IsOffByDefault) {
  SluiceProcess sluice;
  EXPECT_NE(sluice.log().find("sluice listening"), std::string::npos);
  EXPECT_EQ(sluice.log().find("admin listener"), std::string::npos);
}

}  // namespace
}  // namespace sluice::test
