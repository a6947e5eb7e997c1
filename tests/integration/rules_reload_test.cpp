// Hot reload of the rules under a running sluice (config/rules/README.md, "Validation and reload"):
// edit, break, fix, add and delete rule files and check the served limits, the log and GET /rules.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "support/http_client.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

/// A change is served within 2 seconds (config/rules/README.md) (the watcher's configuration,
/// see EditIsServedAndShownInRules); this deadline only bounds a failing wait on a loaded CI.
constexpr auto kReloadDeadline = 10s;

/// Day windows: a test never straddles a window boundary unless it runs across midnight UTC.
std::string apiRules(int per_day, const std::string& name = "calls") {
  return "domain: api\n"
         "descriptors:\n"
         "  - key: route\n"
         "    value: /search\n"
         "    rate_limit:\n"
         "      name: " +
         name +
         "\n"
         "      unit: day\n"
         "      requests_per_unit: " +
         std::to_string(per_day) + "\n";
}

std::string apiRequest(const std::string& client = "c1") {
  return R"({"domain":"api","clientId":")" + client +
         R"(","descriptors":[{"entries":[{"key":"route","value":"/search"}]}]})";
}

bool waitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) {
      return true;
    }
    std::this_thread::sleep_for(20ms);
  }
  return done();
}

class RulesReloadTest : public ::testing::Test {
 protected:
  RulesReloadTest() : sluice_(options()) {}

  static SluiceOptions options() {
    SluiceOptions options;
    options.rule_files = {{"auth.yaml", kSeedAuthRules}, {"api.yaml", apiRules(100)}};
    return options;
  }

  json rules() { return json::parse(client_.get("/rules").body); }
  std::string hash() { return rules()["hash"].get<std::string>(); }

  /// The limit served for the api request with hits 0 (checks without consuming).
  std::string servedLimit(const std::string& client = "probe") {
    std::string body = apiRequest(client);
    body.insert(body.size() - 1, R"(,"hits":0)");
    return client_.post("/shouldAllowRequest", body).header("X-Ratelimit-Limit");
  }

  bool waitForLimit(int limit) {
    return waitUntil([&] { return servedLimit() == std::to_string(limit); }, kReloadDeadline);
  }

  std::string metrics() { return client_.get("/metrics").body; }

  SluiceProcess sluice_;
  HttpClient client_ = sluice_.client();
};

// The promised two seconds are the watcher's poll interval + debounce (0.7 s by default),
// checked without a clock in rules_watcher_test (DefaultsNoticeAChangeWithinTwoSeconds): a
// wall-clock bound here failed on a loaded machine, where the process is slow, not late.
// The time taken is recorded (reload_ms in the test's XML output) for whoever looks.
TEST_F(RulesReloadTest, EditIsServedAndShownInRules) {
  ASSERT_EQ(servedLimit(), "100");
  const std::string before = hash();
  const auto started = std::chrono::steady_clock::now();
  sluice_.writeRuleFile("api.yaml", apiRules(50));
  ASSERT_TRUE(waitForLimit(50)) << sluice_.log();
  RecordProperty("reload_ms",
                 static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now() - started)
                                      .count()));
  const json after = rules();
  EXPECT_NE(after["hash"], before);
  EXPECT_EQ(after["domains"]["api"]["descriptors"][0]["rate_limits"][0]["requests_per_unit"], 50);
  EXPECT_GT(after["loaded_at_ms"].get<std::int64_t>(), 0);
  EXPECT_EQ(after["files"].size(), 2u);
  EXPECT_NE(sluice_.log().find("rules: loaded"), std::string::npos);
}

TEST_F(RulesReloadTest, CountersSurviveAReloadThatKeepsTheRuleIdentity) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(client_.post("/shouldAllowRequest", apiRequest()).status, 200);
  }
  sluice_.writeRuleFile("api.yaml", apiRules(4));
  ASSERT_TRUE(waitForLimit(4)) << sluice_.log();
  // 3 already counted under the old limit of 100; the new limit of 4 applies to them.
  HttpResponse fourth = client_.post("/shouldAllowRequest", apiRequest());
  ASSERT_EQ(fourth.status, 200) << fourth.body;
  EXPECT_EQ(fourth.header("X-Ratelimit-Remaining"), "0");
  EXPECT_EQ(client_.post("/shouldAllowRequest", apiRequest()).status, 429);
}

TEST_F(RulesReloadTest, BrokenEditKeepsTheOldRulesLogsTheErrorAndCountsAFailure) {
  const std::string before = hash();
  sluice_.writeRuleFile("api.yaml",
                        "domain: api\n"
                        "descriptors:\n"
                        "  - key: route\n"
                        "    value: /search\n"
                        "    rate_limit:\n"
                        "      unit: day\n"
                        "      requestsperunit: 5\n");
  const std::string file = sluice_.rulesDir() + "/api.yaml";
  ASSERT_TRUE(waitUntil(
      [&] {
        return sluice_.log().find(file +
                                  ":7:7: unknown key 'requestsperunit' in a rate limit "
                                  "(did you mean 'requests_per_unit'?)") != std::string::npos;
      },
      kReloadDeadline))
      << sluice_.log();
  EXPECT_NE(sluice_.log().find(file + ":6:7: rate limit is missing 'requests_per_unit'"),
            std::string::npos)
      << sluice_.log();
  EXPECT_EQ(servedLimit(), "100");
  EXPECT_EQ(hash(), before);
  EXPECT_NE(metrics().find("sluice_rules_reloads_total{result=\"failure\"} 1"), std::string::npos)
      << metrics();

  // Fixing the file brings the new rules in.
  sluice_.writeRuleFile("api.yaml", apiRules(20));
  EXPECT_TRUE(waitForLimit(20)) << sluice_.log();
  EXPECT_NE(hash(), before);
}

TEST_F(RulesReloadTest, YamlSyntaxErrorIsRefusedWithItsLocation) {
  sluice_.writeRuleFile("api.yaml", "domain: api\ndescriptors: [\n");
  const std::string file = sluice_.rulesDir() + "/api.yaml";
  ASSERT_TRUE(waitUntil(
      [&] { return sluice_.log().find(file + ":3:1: YAML syntax error") != std::string::npos; },
      kReloadDeadline))
      << sluice_.log();
  EXPECT_EQ(servedLimit(), "100");
}

TEST_F(RulesReloadTest, DuplicateDomainInANewFileIsRefusedAsAWhole) {
  const std::string before = hash();
  sluice_.writeRuleFile("zz.yaml", apiRules(1));
  ASSERT_TRUE(
      waitUntil([&] { return sluice_.log().find("duplicate domain 'api'") != std::string::npos; },
                kReloadDeadline))
      << sluice_.log();
  EXPECT_EQ(servedLimit(), "100");
  EXPECT_EQ(hash(), before);
}

TEST_F(RulesReloadTest, AddedFileAddsADomainAndDeletingItRemovesIt) {
  const std::string request =
      R"({"domain":"extra","clientId":"c","descriptors":[{"entries":[{"key":"k","value":"v"}]}]})";
  HttpResponse unknown = client_.post("/shouldAllowRequest", request);
  ASSERT_EQ(unknown.status, 200);
  EXPECT_FALSE(unknown.hasHeader("X-Ratelimit-Limit"));

  sluice_.writeRuleFile("extra.yml",
                        "domain: extra\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, "
                        "requests_per_unit: 1}\n");
  ASSERT_TRUE(waitUntil([&] { return rules()["domains"].contains("extra"); }, kReloadDeadline))
      << sluice_.log();
  EXPECT_EQ(client_.post("/shouldAllowRequest", request).header("X-Ratelimit-Limit"), "1");

  std::filesystem::remove(sluice_.rulesDir() + "/extra.yml");
  ASSERT_TRUE(waitUntil([&] { return !rules()["domains"].contains("extra"); }, kReloadDeadline))
      << sluice_.log();
  HttpResponse gone = client_.post("/shouldAllowRequest", request);
  EXPECT_EQ(gone.status, 200);
  EXPECT_FALSE(gone.hasHeader("X-Ratelimit-Limit"));
  EXPECT_EQ(servedLimit(), "100");
}

TEST_F(RulesReloadTest, EditorTemporaryFilesAreIgnored) {
  std::ofstream(sluice_.rulesDir() + "/api.yaml~") << "broken: [\n";
  std::ofstream(sluice_.rulesDir() + "/.api.yaml.swp") << "broken: [\n";
  // No fixed sleep: a real edit after the temporaries is loaded, so the watcher has looked at
  // the directory with them in it, and a load that read them would have been refused (the
  // limit would stay 100).
  sluice_.writeRuleFile("api.yaml", apiRules(77));
  ASSERT_TRUE(waitForLimit(77)) << sluice_.log();
  EXPECT_EQ(sluice_.log().find("refused"), std::string::npos) << sluice_.log();
  EXPECT_EQ(rules()["files"].size(), 2u) << rules().dump();
}

TEST_F(RulesReloadTest, SighupReloadsAtOnce) {
  sluice_.writeRuleFile("api.yaml", apiRules(33));
  sluice_.signal(SIGHUP);
  EXPECT_TRUE(waitForLimit(33)) << sluice_.log();
  EXPECT_TRUE(sluice_.running());
}

TEST_F(RulesReloadTest, HundredReloadsWhileAClientSendsRequestsWithoutAFailedRequest) {
  std::atomic<bool> stop{false};
  std::atomic<int> sent{0};
  std::atomic<int> failed{0};
  std::string first_failure;
  std::thread load([&] {
    HttpClient client = sluice_.client();
    int i = 0;
    while (!stop.load()) {
      try {
        // A new client id every time: every request is allowed by every rules version.
        HttpResponse r =
            client.post("/shouldAllowRequest", apiRequest("load-" + std::to_string(i++)));
        const json body = json::parse(r.body);
        if (r.status != 200 || body["allowed"] != true) {
          if (failed.fetch_add(1) == 0) {
            first_failure = std::to_string(r.status) + " " + r.body;
          }
        }
      } catch (const std::exception& e) {
        if (failed.fetch_add(1) == 0) {
          first_failure = e.what();
        }
      }
      sent.fetch_add(1);
    }
  });
  std::string previous = hash();
  for (int i = 0; i < 100; ++i) {
    // Alternate valid versions (new limits, renamed and re-algorithmed limits) with broken
    // ones: neither may disturb a request in flight.
    if (i % 10 == 9) {
      sluice_.writeRuleFile("api.yaml", "domain: api\ndescriptors: [\n");
    } else {
      sluice_.writeRuleFile("api.yaml", apiRules(1000 + i, i % 2 == 0 ? "even" : "odd"));
    }
    sluice_.signal(SIGHUP);
    if (i % 10 != 9) {
      ASSERT_TRUE(waitUntil(
          [&] {
            std::string now = hash();
            return now != previous && servedLimit() == std::to_string(1000 + i);
          },
          kReloadDeadline))
          << "reload " << i << "\n"
          << sluice_.log();
      previous = hash();
    }
  }
  stop.store(true);
  load.join();
  EXPECT_EQ(failed.load(), 0) << first_failure;
  EXPECT_GT(sent.load(), 100);
  EXPECT_TRUE(sluice_.running());
}

TEST(RulesValidateCommandTest, PrintsEveryErrorWithItsLocationAndExitsOne) {
  const std::string dir = makeTempDir("sluice-validate");
  std::ofstream(dir + "/a.yaml") << "domain: a\ndescriptors:\n  - key: k\n    ratelimit: {}\n";
  std::ofstream(dir + "/b.yaml") << "domain: b\ndescriptors:\n  - key: \"\"\n";
  const auto [code, output] = runSluice({"--validate", "--rules", dir});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(code, 1) << output;
  EXPECT_NE(output.find(dir + "/a.yaml:4:5: unknown key 'ratelimit' in a descriptor (did you mean "
                              "'rate_limit'?)"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find(dir + "/b.yaml:3:10: descriptor has an empty 'key'"), std::string::npos)
      << output;
}

TEST(RulesValidateCommandTest, ShippedRulesAreValid) {
  const auto [code, output] =
      runSluice({"--validate", "--rules", std::string(SLUICE_SOURCE_DIR) + "/config/rules"});
  EXPECT_EQ(code, 0) << output;
}

}  // namespace
}  // namespace sluice::test
