// Candidate limits through the real binary (docs/what-if.md): a `candidate:` beside a live
// limit never denies and never touches the live counter; what it would have decided is in
// sluice_candidate_decisions_total and in the admin listener's /limits/top?candidate=1; on
// the memory store and on Redis alike.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/free_port.hpp"
#include "support/http_client.hpp"
#include "support/redis_server.hpp"
#include "support/sluice_process.hpp"
#include "support/wait.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;

const char* const kRules = R"(domain: shop
descriptors:
  - key: path
    value: /checkout
    rate_limit:
      name: checkout
      unit: hour
      requests_per_unit: 10
    candidate:
      name: checkout_next
      unit: hour
      requests_per_unit: 3
  - key: path
    value: /new
    candidate:
      name: new_limit
      unit: hour
      requests_per_unit: 1
      algorithm: token_bucket
)";

std::string request(const std::string& client, const std::string& path) {
  return R"({"domain":"shop","clientId":")" + client +
         R"(","descriptors":[{"entries":[{"key":"path","value":")" + path + R"("}]}]})";
}

struct CandidateSluice {
  explicit CandidateSluice(std::vector<std::string> extra = {})
      : process(options(std::move(extra))), admin_port(process.adminPort()) {}

  static SluiceOptions options(std::vector<std::string> extra) {
    SluiceOptions o;
    o.rule_files = {{"shop.yaml", kRules}};
    o.admin = true;
    o.args = {"--threads", "2"};
    o.args.insert(o.args.end(), extra.begin(), extra.end());
    return o;
  }

  /// The value of one series of /metrics, or -1 when it is absent.
  double metric(const std::string& series) { return seriesValue(process, series); }

  json top(const std::string& query) {
    HttpResponse r = HttpClient("127.0.0.1", admin_port).get("/limits/top" + query);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
  }

  SluiceProcess process;
  std::uint16_t admin_port;
};

const std::string kWouldAllow =
    R"(sluice_candidate_decisions_total{domain="shop",rule="checkout_next",would="allow"})";
const std::string kWouldDeny =
    R"(sluice_candidate_decisions_total{domain="shop",rule="checkout_next",would="deny"})";

void candidateNeverDeniesAndCountsApart(CandidateSluice& sluice) {
  // Six checkouts: the live limit (10 an hour) admits all of them; the candidate (3 an
  // hour) would have denied the last three.
  for (int i = 0; i < 6; ++i) {
    HttpResponse r =
        sluice.process.client().post("/shouldAllowRequest", request("mallory", "/checkout"));
    ASSERT_EQ(r.status, 200) << r.body;
    const json answer = json::parse(r.body);
    // The answer shows the live limit only: its remaining count is the live counter's.
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), std::to_string(10 - 1 - i)) << r.body;
    EXPECT_EQ(answer.dump().find("checkout_next"), std::string::npos) << r.body;
  }
  EXPECT_TRUE(waitFor([&] { return sluice.metric(kWouldDeny) == 3; }, std::chrono::seconds(5)))
      << sluice.metric(kWouldDeny);
  EXPECT_EQ(sluice.metric(kWouldAllow), 3);
  // No live denial was made (the series is absent, or 0), and the live counters saw none of
  // the candidate's.
  EXPECT_LE(
      sluice.metric(R"(sluice_decisions_total{domain="shop",rule="checkout",outcome="denied"})"),
      0);
  EXPECT_EQ(
      sluice.metric(R"(sluice_decisions_total{domain="shop",rule="checkout",outcome="allowed"})"),
      6);

  // Who the candidate would have denied; the live board is empty.
  const json candidate = sluice.top("?candidate=1");
  ASSERT_EQ(candidate["rules"].size(), 1u) << candidate.dump(2);
  EXPECT_EQ(candidate["rules"][0]["rule"], "checkout_next");
  EXPECT_EQ(candidate["rules"][0]["candidate"], true);
  EXPECT_EQ(candidate["rules"][0]["denied"], 3);
  EXPECT_EQ(candidate["rules"][0]["clients"][0]["client"], "mallory");
  EXPECT_TRUE(sluice.top("")["rules"].empty());

  // A node with a candidate only: nothing live, every request admitted.
  for (int i = 0; i < 3; ++i) {
    HttpResponse r = sluice.process.client().post("/shouldAllowRequest", request("eve", "/new"));
    ASSERT_EQ(r.status, 200) << r.body;
  }
  EXPECT_TRUE(waitFor(
      [&] {
        return sluice.metric(
                   R"(sluice_candidate_decisions_total{domain="shop",rule="new_limit",would="deny"})") ==
               2;
      },
      std::chrono::seconds(5)));
}

TEST(CandidateLimitsTest, NeverDeniesAndCountsWhatItWouldHaveDecided) {
  CandidateSluice sluice;
  candidateNeverDeniesAndCountsApart(sluice);
}

TEST(CandidateLimitsTest, NeverDeniesAndCountsWhatItWouldHaveDecidedOnRedis) {
  RedisServer redis;
  CandidateSluice sluice({"--store", "redis", "--redis", redis.url(), "--failure-mode", "closed",
                          "--redis-timeout-ms", "1000"});
  ASSERT_TRUE(waitFor(
      [&] {
        HttpResponse r = sluice.process.client().get("/readyz");
        return r.status == 200 && r.body.find("\"store\":\"healthy\"") != std::string::npos;
      },
      std::chrono::seconds(10)))
      << sluice.process.log();
  candidateNeverDeniesAndCountsApart(sluice);
}

TEST(CandidateLimitsTest, TheLiveLimitStillDeniesWhateverTheCandidateSays) {
  CandidateSluice sluice;
  int denied = 0;
  for (int i = 0; i < 12; ++i) {
    HttpResponse r =
        sluice.process.client().post("/shouldAllowRequest", request("bob", "/checkout"));
    denied += r.status == 429 ? 1 : 0;
  }
  EXPECT_EQ(denied, 2);  // the live limit's 10, not the candidate's 3
  HttpResponse bad = HttpClient("127.0.0.1", sluice.admin_port).get("/limits/top?candidate=yes");
  EXPECT_EQ(bad.status, 400) << bad.body;
}

}  // namespace
}  // namespace sluice::test
