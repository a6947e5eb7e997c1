// The operational endpoints, /json and the command line, against the real binary.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "support/free_port.hpp"
#include "support/http_client.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;

TEST(OperationsTest, HealthzAndReadyz) {
  SluiceProcess sluice;
  HttpClient client = sluice.client();
  EXPECT_EQ(client.get("/healthz").status, 200);
  HttpResponse ready = client.get("/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(json::parse(ready.body)["status"], "ready");
}

TEST(OperationsTest, MetricsParseAndCountDecisions) {
  SluiceProcess sluice;
  HttpClient client = sluice.client();
  std::string login =
      R"({"domain":"auth","clientId":"m","descriptors":[[{"key":"auth_type","value":"login"}]]})";
  ASSERT_EQ(client.post("/shouldAllowRequest", login).status, 200);
  ASSERT_EQ(client.post("/shouldAllowRequest", R"({"domain":"zzz"})").status, 200);
  ASSERT_EQ(client
                .post("/shouldAllowRequest",
                      R"({"domain":"auth","descriptors":[[{"key":"x","value":"y"}]]})")
                .status,
            200);
  HttpResponse r = client.get("/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u);
  // Every line is a comment or `name{labels} value`.
  std::regex sample(
      R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? -?[0-9.eE+-]+(Inf)?$)");
  std::istringstream lines(r.body);
  std::string line;
  int samples = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      continue;
    }
    EXPECT_TRUE(std::regex_match(line, sample)) << line;
    ++samples;
  }
  EXPECT_GT(samples, 0);
  EXPECT_NE(
      r.body.find(
          R"(sluice_decisions_total{domain="auth",rule="auth.auth_type_login",outcome="allowed"} 1)"),
      std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find(
                R"(sluice_decisions_total{domain="_unknown",rule="",outcome="unknown_domain"} 1)"),
            std::string::npos);
  EXPECT_NE(r.body.find(R"(sluice_decisions_total{domain="auth",rule="",outcome="no_rule"} 1)"),
            std::string::npos);
  EXPECT_NE(r.body.find(
                R"(sluice_http_request_duration_seconds_count{endpoint="/shouldAllowRequest"} 3)"),
            std::string::npos);
  EXPECT_EQ(r.body.find("clientId"), std::string::npos);
}

TEST(OperationsTest, RulesShowsTheActiveSet) {
  SluiceProcess sluice;
  HttpResponse r = sluice.client().get("/rules");
  ASSERT_EQ(r.status, 200);
  json body = json::parse(r.body);
  EXPECT_TRUE(body.contains("hash"));
  EXPECT_TRUE(body["domains"].contains("auth"));
  EXPECT_TRUE(body["domains"].contains("default"));
}

TEST(OperationsTest, EnvoyJsonEndpoint) {
  SluiceProcess sluice;
  HttpClient client = sluice.client();
  std::string request =
      R"({"domain":"auth","descriptors":[{"entries":[{"key":"auth_type","value":"login"}]}]})";
  HttpResponse first = client.post("/json", request);
  ASSERT_EQ(first.status, 200) << first.body;
  json body = json::parse(first.body);
  EXPECT_EQ(body["overallCode"], "OK");
  EXPECT_EQ(body["statuses"][0]["code"], "OK");
  EXPECT_EQ(body["statuses"][0]["currentLimit"]["requestsPerUnit"], 5);
  EXPECT_EQ(body["statuses"][0]["currentLimit"]["unit"], "MINUTE");
  EXPECT_EQ(body["statuses"][0]["limitRemaining"], 4);
  EXPECT_TRUE(std::regex_match(body["statuses"][0]["durationUntilReset"].get<std::string>(),
                               std::regex("[0-9]+s")));
  HttpResponse last;
  for (int i = 0; i < 5; ++i) {
    last = client.post("/json", request);
  }
  // Five more in the same minute (or the window turned over and it is allowed again).
  if (last.status == 429) {
    EXPECT_EQ(json::parse(last.body)["overallCode"], "OVER_LIMIT");
    EXPECT_EQ(json::parse(last.body)["statuses"][0]["code"], "OVER_LIMIT");
  }
  EXPECT_EQ(client.post("/json", R"({"descriptors":[]})").status, 400);
}

TEST(OperationsTest, HelpListsTheFlags) {
  auto [code, output] = runSluice({"--help"});
  EXPECT_EQ(code, 0);
  EXPECT_NE(output.find("--listen ADDRESSES"), std::string::npos) << output;
  EXPECT_NE(output.find("HOST:PORT and/or unix:PATH"), std::string::npos) << output;
  EXPECT_NE(output.find("--listen-mode MODE"), std::string::npos) << output;
  EXPECT_NE(output.find("--failure-mode"), std::string::npos);
}

TEST(OperationsTest, BadFlagExitsTwoWithAMessage) {
  auto [code, output] = runSluice({"--thread", "2"});
  EXPECT_EQ(code, 2);
  EXPECT_NE(output.find("unknown flag --thread"), std::string::npos) << output;
}

TEST(OperationsTest, RedisClusterSeedOnADatabaseOtherThanZeroIsRefusedClearly) {
  auto [code, output] = runSluice(
      {"--store", "redis_cluster", "--redis", "redis://127.0.0.1:7000,redis://127.0.0.1:7001/2"});
  EXPECT_EQ(code, 2);
  EXPECT_NE(output.find("--redis: seed 2 ('redis://127.0.0.1:7001/2'): Redis Cluster has "
                        "database 0 only"),
            std::string::npos)
      << output;
}

TEST(OperationsTest, ValidateExampleRules) {
  auto [code, output] = runSluice({"--validate", "--rules", "config/rules"});
  EXPECT_EQ(code, 0) << output;
}

TEST(OperationsTest, InvalidRulesRefuseToStart) {
  std::string dir = makeTempDir("sluice-bad-rules");
  {
    std::ofstream(dir + "/bad.yaml")
        << "domain: bad\ndescriptors:\n  - key: a\n    ratelimit: {}\n";
  }
  auto [code, output] =
      runSluice({"--rules", dir, "--listen", "127.0.0.1:" + std::to_string(freeLoopbackPort())});
  EXPECT_EQ(code, 1);
  EXPECT_NE(output.find(dir + "/bad.yaml:4:5"), std::string::npos) << output;
  std::filesystem::remove_all(dir);
}

TEST(OperationsTest, EnvironmentConfiguresTheServer) {
  SluiceOptions options = withArgs({"--threads", "1"});
  options.env = {{"SLUICE_DEFAULT_DOMAIN", "auth"}};
  SluiceProcess sluice(options);
  HttpResponse r = sluice.client().post(
      "/shouldAllowRequest",
      R"({"clientId":"e","descriptors":[[{"key":"auth_type","value":"login"}]]})");
  EXPECT_EQ(r.header("X-Ratelimit-Limit"), "5");
}

}  // namespace
}  // namespace sluice::test
