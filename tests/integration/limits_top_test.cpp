// GET /limits/top on the admin listener of the real binary: the most denied clients per
// rule, from denials on the decision port (memory and Redis stores), its query parameters,
// and the window after which old denials leave the answer.
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

const char* const kShopRules = R"(domain: shop
descriptors:
  - key: path
    value: /checkout
    rate_limit:
      name: checkout
      unit: hour
      requests_per_unit: 2
  - key: path
    value: /search
    shadow_mode: true
    rate_limit:
      name: search_shadow
      unit: hour
      requests_per_unit: 1
)";

// Limited per user, under a path every such bucket shares: requests without clientId.
const char* const kUserRules = R"(domain: users
descriptors:
  - key: path
    value: /login
    descriptors:
      - key: user
        rate_limit:
          name: login_per_user
          unit: hour
          requests_per_unit: 1
)";

std::string request(const std::string& domain, const std::string& client, const std::string& key,
                    const std::string& value) {
  return R"({"domain":")" + domain + R"(","clientId":")" + client +
         R"(","descriptors":[{"entries":[{"key":")" + key + R"(","value":")" + value + R"("}]}]})";
}

std::string login(const std::string& client) {
  return request("auth", client, "auth_type", "login");
}

std::string checkout(const std::string& client) {
  return request("shop", client, "path", "/checkout");
}

struct TopSluice {
  explicit TopSluice(std::vector<std::string> extra = {})
      : process(options(std::move(extra))), admin_port(process.adminPort()) {}

  static SluiceOptions options(std::vector<std::string> extra) {
    SluiceOptions o;
    o.rule_files.emplace("shop.yaml", kShopRules);
    o.rule_files.emplace("users.yaml", kUserRules);
    o.admin = true;
    o.args = {"--threads", "2"};
    o.args.insert(o.args.end(), extra.begin(), extra.end());
    return o;
  }

  json top(const std::string& query = "") {
    HttpResponse r = HttpClient("127.0.0.1", admin_port).get("/limits/top" + query);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
  }

  SluiceProcess process;
  std::uint16_t admin_port;
};

/// Sends `body` `times` times on fresh connections (so both I/O threads see some).
void send(TopSluice& sluice, const std::string& body, int times) {
  for (int i = 0; i < times; ++i) {
    HttpClient client = sluice.process.client();
    client.post("/shouldAllowRequest", body);
  }
}

const json* findRule(const json& answer, const std::string& domain, const std::string& rule) {
  for (const json& r : answer["rules"]) {
    if (r["domain"] == domain && r["rule"] == rule) {
      return &r;
    }
  }
  return nullptr;
}

/// The seed rule allows 5 logins per client per minute; checkout 2 per hour.
void deny(TopSluice& sluice) {
  send(sluice, login("mallory"), 5 + 12);  // 12 denials
  send(sluice, login("eve"), 5 + 3);       // 3
  send(sluice, login("alice"), 4);         // never denied
  send(sluice, checkout("mallory"), 2 + 4);
  send(sluice, request("shop", "snoop", "path", "/search"), 5);  // shadow: not a denial
}

void expectTopOfDenials(TopSluice& sluice) {
  json answer = sluice.top();
  EXPECT_EQ(answer["window_seconds"], 60);
  EXPECT_EQ(answer["capacity"], 100);
  EXPECT_LE(answer["from_ms"].get<std::int64_t>(), answer["to_ms"].get<std::int64_t>());
  ASSERT_EQ(answer["rules"].size(), 2u) << answer.dump(2);
  const json* logins = findRule(answer, "auth", "auth.auth_type_login");
  ASSERT_NE(logins, nullptr) << answer.dump(2);
  EXPECT_EQ((*logins)["denied"], 15);
  EXPECT_EQ((*logins)["error_bound"], 0);
  ASSERT_EQ((*logins)["clients"].size(), 2u) << answer.dump(2);
  EXPECT_EQ((*logins)["clients"][0], json({{"client", "mallory"}, {"count", 12}, {"error", 0}}));
  EXPECT_EQ((*logins)["clients"][1], json({{"client", "eve"}, {"count", 3}, {"error", 0}}));
  const json* checkouts = findRule(answer, "shop", "checkout");
  ASSERT_NE(checkouts, nullptr) << answer.dump(2);
  EXPECT_EQ((*checkouts)["clients"][0]["client"], "mallory");
  EXPECT_EQ((*checkouts)["clients"][0]["count"], 4);
  EXPECT_EQ(findRule(answer, "shop", "search_shadow"), nullptr) << "shadow denials are not denials";
}

TEST(LimitsTopTest, ListsTheMostDeniedClientsPerRule) {
  TopSluice sluice;
  deny(sluice);
  expectTopOfDenials(sluice);
}

TEST(LimitsTopTest, ListsTheMostDeniedClientsPerRuleWithRedis) {
  RedisServer redis;
  TopSluice sluice({"--store", "redis", "--redis", redis.url(), "--failure-mode", "closed",
                    "--redis-timeout-ms", "1000"});
  // /readyz is 200 with a healthy store once every I/O thread's store has connected; a
  // decision before that would wait for its connection, so wait for readiness first.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto ready = [&] {
    HttpResponse r = sluice.process.client().get("/readyz");
    return r.status == 200 && r.body.find("\"store\":\"healthy\"") != std::string::npos;
  };
  while (!ready() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(ready()) << sluice.process.log();
  deny(sluice);
  expectTopOfDenials(sluice);
}

TEST(LimitsTopTest, FiltersByDomainRuleAndCount) {
  TopSluice sluice;
  deny(sluice);
  json answer = sluice.top("?domain=auth");
  ASSERT_EQ(answer["rules"].size(), 1u);
  EXPECT_EQ(answer["rules"][0]["rule"], "auth.auth_type_login");

  answer = sluice.top("?rule=checkout");
  ASSERT_EQ(answer["rules"].size(), 1u);
  EXPECT_EQ(answer["rules"][0]["domain"], "shop");

  answer = sluice.top("?domain=auth&rule=auth.auth_type_login&n=1");
  ASSERT_EQ(answer["rules"].size(), 1u);
  ASSERT_EQ(answer["rules"][0]["clients"].size(), 1u);
  EXPECT_EQ(answer["rules"][0]["clients"][0]["client"], "mallory");
  EXPECT_EQ(answer["rules"][0]["denied"], 15);

  EXPECT_TRUE(sluice.top("?domain=nobody")["rules"].empty());
}

TEST(LimitsTopTest, BadQueriesAreRefusedAndTheDecisionPortHasNoTop) {
  TopSluice sluice;
  HttpClient admin("127.0.0.1", sluice.admin_port);
  for (const char* query : {"?n=0", "?n=1001", "?n=ten", "?domian=auth"}) {
    HttpResponse r = admin.get(std::string("/limits/top") + query);
    EXPECT_EQ(r.status, 400) << query << " " << r.body;
    EXPECT_TRUE(json::parse(r.body).contains("error")) << r.body;
  }
  EXPECT_EQ(admin.request("POST", "/limits/top").status, 405);
  EXPECT_EQ(sluice.process.client().get("/limits/top").status, 404);
}

TEST(LimitsTopTest, DenialsLeaveTheAnswerAfterTwoWindows) {
  // A 1 s window: the answer covers the previous and the current window, so a denial is
  // gone 1 to 2 s later. Waits on observed state (at most 10 s).
  TopSluice sluice({"--top-window-ms", "1000"});
  send(sluice, login("mallory"), 6);
  json answer = sluice.top();
  ASSERT_EQ(answer["rules"].size(), 1u) << answer.dump(2);
  EXPECT_EQ(answer["window_seconds"], 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!answer["rules"].empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    answer = sluice.top();
  }
  EXPECT_TRUE(answer["rules"].empty()) << answer.dump(2);
}

TEST(LimitsTopTest, BadFlagsStopStartUp) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--top-capacity", "0"},
                                        std::vector<std::string>{"--top-window-ms", "10"}}) {
    args.push_back("--validate");
    auto [code, output] = runSluice(args);
    EXPECT_NE(code, 0) << output;
    EXPECT_NE(output.find(args[0]), std::string::npos) << output;
  }
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

TEST(LimitsTopIdentityTest, NamesTheBucketsIdentityWhenTheRequestHasNoClientId) {
  TopSluice sluice;
  auto user = [](const std::string& name) {
    return R"({"domain":"users","descriptors":[{"entries":[{"key":"path","value":"/login"},)"
           R"({"key":"user","value":")" +
           name + R"("}]}]})";
  };
  send(sluice, user("mallory"), 1 + 5);
  send(sluice, user("trudy"), 1 + 2);
  const json answer = sluice.top("?domain=users");
  const json* rule = findRule(answer, "users", "login_per_user");
  ASSERT_NE(rule, nullptr) << answer.dump();
  // Two users, not one client "": each named by the entry its bucket is counted by.
  ASSERT_EQ((*rule)["clients"].size(), 2u) << answer.dump();
  EXPECT_EQ((*rule)["clients"][0]["client"], "user=mallory");
  EXPECT_EQ((*rule)["clients"][0]["count"], 5);
  EXPECT_EQ((*rule)["clients"][1]["client"], "user=trudy");
  EXPECT_EQ((*rule)["clients"][1]["count"], 2);
}

}  // namespace
}  // namespace sluice::test
