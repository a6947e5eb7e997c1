// The operators' logs: --log-format json, --log-level, the access log, and degraded modes
// logged once when they start and once when they end (with their counters).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) {
      out.push_back(line);
    }
  }
  return out;
}

/// Waits until `path` holds at least `n` lines (the access log is written off-thread).
std::vector<std::string> waitForLines(const std::string& path, std::size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::vector<std::string> out;
  do {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    out = lines(text.str());
    if (out.size() >= n) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < deadline);
  return out;
}

std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

TEST(MetricsLogsTest, JsonLogFormatWritesOneJsonObjectPerLine) {
  SluiceProcess sluice(withArgs({"--threads", "1", "--log-format", "json"}));
  // A refused reload logs messages with quotes and a file:line:column location.
  sluice.writeRuleFile("auth.yaml",
                       "domain: auth\ndescriptors:\n  - key: \"auth_type\"\n"
                       "    rate_limit: {unit: \"fortnight\", requests_per_unit: 5}\n");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (sluice.log().find("refused") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::vector<std::string> log = lines(sluice.log());
  ASSERT_GE(log.size(), 3u);
  bool saw_error = false;
  for (const std::string& line : log) {
    json entry;
    ASSERT_NO_THROW(entry = json::parse(line)) << line;
    EXPECT_TRUE(entry["time"].is_string()) << line;
    EXPECT_TRUE(entry["level"].is_string()) << line;
    EXPECT_TRUE(entry["msg"].is_string()) << line;
    saw_error =
        saw_error || (entry["level"] == "error" &&
                      entry["msg"].get<std::string>().find("auth.yaml:4:") != std::string::npos);
  }
  EXPECT_TRUE(saw_error) << sluice.log();
}

TEST(MetricsLogsTest, LogLevelFiltersMessages) {
  SluiceProcess sluice(withArgs({"--threads", "1", "--log-level", "warn"}));
  ASSERT_EQ(sluice.client().get("/healthz").status, 200);
  EXPECT_EQ(sluice.log().find("sluice listening"), std::string::npos) << sluice.log();
}

TEST(MetricsLogsTest, AccessLogRecordsEveryDecision) {
  const std::string dir = makeTempDir("sluice-access");
  const std::string path = dir + "/access.log";
  SluiceProcess sluice(withArgs({"--threads", "2", "--access-log", path}));
  HttpClient client = sluice.client();
  for (int i = 0; i < 6; ++i) {
    client.post("/shouldAllowRequest", login("hal"));
  }
  client.post("/shouldAllowRequest", R"({"domain":"nowhere","clientId":"ivy"})");
  const std::vector<std::string> access = waitForLines(path, 7);
  ASSERT_EQ(access.size(), 7u);
  EXPECT_NE(access[0].find(R"(domain="auth" client="hal" rule="auth.auth_type_login" )"
                           R"(decision=allowed degraded=false latency_us=)"),
            std::string::npos)
      << access[0];
  EXPECT_NE(access[5].find("decision=denied"), std::string::npos) << access[5];
  EXPECT_NE(access[6].find(R"(domain="nowhere" client="ivy" rule="" decision=unknown_domain)"),
            std::string::npos)
      << access[6];
  // The process log does not carry access lines.
  EXPECT_EQ(sluice.log().find("client=\"hal\""), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(MetricsLogsTest, JsonAccessLog) {
  const std::string dir = makeTempDir("sluice-access");
  const std::string path = dir + "/access.log";
  SluiceProcess sluice(withArgs({"--threads", "1", "--access-log", path, "--log-format", "json"}));
  HttpClient client = sluice.client();
  // A client id with a quote (JSON-escaped in the request) stays valid JSON in the log.
  ASSERT_EQ(client.post("/shouldAllowRequest", login(R"(jo\"e)")).status, 200);
  const std::vector<std::string> access = waitForLines(path, 1);
  ASSERT_EQ(access.size(), 1u);
  json entry = json::parse(access[0]);
  EXPECT_EQ(entry["domain"], "auth");
  EXPECT_EQ(entry["client"], "jo\"e");
  EXPECT_EQ(entry["rule"], "auth.auth_type_login");
  EXPECT_EQ(entry["decision"], "allowed");
  EXPECT_EQ(entry["degraded"], false);
  EXPECT_TRUE(entry["latency_us"].is_number_integer());
  EXPECT_TRUE(entry["time"].is_string());
  std::filesystem::remove_all(dir);
}

TEST(MetricsLogsTest, DegradedModeIsLoggedOnceWhenItStartsAndOnceWhenItEnds) {
  RedisServer redis;
  SluiceProcess sluice(withArgs({"--threads", "2", "--store", "redis", "--redis", redis.url(),
                                 "--failure-mode", "open", "--redis-timeout-ms", "1000"}));
  // Each I/O thread connects on its own, after /healthz already answers: start from a
  // healthy store so that the outage below is the only one.
  const auto connected_by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  // (One line for the process once every thread's store has connected.)
  while (occurrences(sluice.log(), "store redis health: connecting -> healthy") < 1 &&
         std::chrono::steady_clock::now() < connected_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(occurrences(sluice.log(), "store redis health: connecting -> healthy"), 1u)
      << sluice.log();
  HttpClient client = sluice.client(std::chrono::milliseconds(3000));
  ASSERT_EQ(client.post("/shouldAllowRequest", login("kim")).status, 200);
  redis.stop();
  for (int i = 0; i < 30; ++i) {
    HttpClient fresh = sluice.client(std::chrono::milliseconds(3000));
    EXPECT_EQ(fresh.post("/shouldAllowRequest", login("kim")).status, 200);
  }
  redis.restart();
  // Redis reconnects within a second; then decisions are exact again.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (sluice.log().find("healthy again") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 4; ++i) {
      HttpClient fresh = sluice.client(std::chrono::milliseconds(3000));
      fresh.post("/shouldAllowRequest", login("kim"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (int i = 0; i < 10; ++i) {
    HttpClient fresh = sluice.client(std::chrono::milliseconds(3000));
    fresh.post("/shouldAllowRequest", login("lee"));
  }
  const std::string log = sluice.log();
  EXPECT_EQ(occurrences(log, "failure mode 'open' allows"), 1u) << log;
  EXPECT_EQ(occurrences(log, "healthy again"), 1u) << log;
  const std::string metrics = client.get("/metrics").body;
  EXPECT_NE(metrics.find(R"(sluice_store_failure_mode_activations_total{mode="open"} 1)"),
            std::string::npos)
      << metrics;
}

}  // namespace
}  // namespace sluice::test
