// Sluice's /metrics read by the Prometheus tools themselves (Debian's `prometheus` package):
// - `promtool check metrics` on a live exposition after traffic on every endpoint, with the
//   memory, Redis (failing over to the local failure mode) and Redis Cluster stores, and
//   every family documented in docs/operations.md present;
// - a real `prometheus` server scraping a real Sluice: the series arrive with the values
//   /metrics shows, every expression of the Grafana dashboard (docker/grafana/sluice.json)
//   parses and returns series, and the alert rules (docker/prometheus/alerts.yml) load and
//   evaluate without errors.
// Skipped when prometheus/promtool are missing (scripts/deps.sh test installs them).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/free_port.hpp"
#include "support/http_client.hpp"
#include "support/prometheus_server.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_server.hpp"
#include "support/sluice_process.hpp"
#include "support/wait.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

const char* const kShopRules = R"(domain: shop
descriptors:
  - key: path
    value: /checkout
    rate_limit:
      name: checkout
      unit: minute
      requests_per_unit: 3
  - key: path
    value: /search
    shadow_mode: true
    rate_limit:
      name: search_shadow
      unit: minute
      requests_per_unit: 1
  - key: user
    detailed_metric: true
    rate_limit:
      name: per_user
      unit: minute
      requests_per_unit: 2
)";

// /check: the shop domain, the descriptor and the client from raw header bytes.
const char* const kForwardAuth = R"(forward_auth:
  domain: shop
  deny_status: 429
  client: [{from: header, name: X-User}, {from: client_ip}]
  descriptors: [[{key: user, from: header, name: X-User}]]
)";

std::string source(const std::string& path) { return std::string(SLUICE_SOURCE_DIR) + "/" + path; }

struct CommandResult {
  int exit_code = -1;
  std::string output;
};

CommandResult runShell(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    return result;
  }
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.output.append(buffer.data(), n);
  }
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

/// `promtool check metrics` on an exposition: exit code and what it printed (problems).
CommandResult promtoolCheckMetrics(const std::string& exposition, const std::string& dir) {
  const std::string file = dir + "/metrics-" + std::to_string(freeLoopbackPort()) + ".txt";
  std::ofstream(file, std::ios::binary) << exposition;
  return runShell("promtool check metrics < '" + file + "'");
}

/// The families an exposition declares (# TYPE lines).
std::set<std::string> families(const std::string& exposition) {
  std::set<std::string> out;
  std::istringstream lines(exposition);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      out.insert(line.substr(7, line.find(' ', 7) - 7));
    }
  }
  return out;
}

/// The families of the table of docs/operations.md's "## Metrics" section
/// ("| `sluice_...` | type | ...").
std::set<std::string> documentedFamilies() {
  std::ifstream in(source("docs/operations.md"));
  std::set<std::string> out;
  std::string line;
  static const std::regex kRow(R"(^\| `(sluice_[a-z_]+)` \|)");
  std::smatch m;
  bool in_metrics = false;  // the "## Metrics" section only, not the planned metrics
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) {
      in_metrics = line.rfind("## Metrics", 0) == 0;
    }
    if (in_metrics && std::regex_search(line, m, kRow)) {
      out.insert(m[1]);
    }
  }
  return out;
}

std::string request(const std::string& domain, const std::string& client, const std::string& key,
                    const std::string& value) {
  return R"({"domain":")" + domain + R"(","clientId":")" + client +
         R"(","descriptors":[{"entries":[{"key":")" + key + R"(","value":")" + value + R"("}]}]})";
}

/// Options of a sluice with the shop rules, /check from kForwardAuth, an admin listener.
SluiceOptions sluiceOptions(std::vector<std::string> extra) {
  SluiceOptions o;
  o.rule_files.emplace("shop.yaml", kShopRules);
  o.admin = true;
  o.args = {"--threads", "2"};
  o.args.insert(o.args.end(), extra.begin(), extra.end());
  return o;
}

/// Writes the forward-auth config next to nothing else; returns its path.
std::string writeForwardAuth(const std::string& dir) {
  const std::string path = dir + "/forward-auth.yaml";
  std::ofstream(path) << kForwardAuth;
  return path;
}

/// Requests on every endpoint of both listeners: allowed, denied, shadow-denied, no rule,
/// unknown domain, value labels (raw bytes too), errors, operations views, admin actions.
void trafficOnEveryEndpoint(const SluiceProcess& sluice, std::uint16_t admin_port) {
  HttpClient client = sluice.client();
  for (int i = 0; i < 6; ++i) {
    client.post("/shouldAllowRequest", request("shop", "c1", "path", "/checkout"));
    client.post("/shouldAllowRequest", request("shop", "c2", "path", "/search"));
    client.post("/shouldAllowRequest", request("auth", "c3", "auth_type", "login"));
    client.post("/shouldAllowRequest", request("shop", "c4", "user", "u-" + std::to_string(i % 2)));
  }
  client.post("/shouldAllowRequest", request("shop", "c5", "path", "/unknown"));  // no rule
  client.post("/shouldAllowRequest", request("nowhere", "c6", "path", "/x"));     // unknown domain
  client.post("/shouldAllowRequest", "{not json");                                // 400
  client.post("/json", R"({"domain":"auth","descriptors":[{"entries":[)"
                       R"({"key":"auth_type","value":"login"}]}]})");
  // A reservation (a fresh client: room for it), committed with more than it held.
  const std::string holder = request("shop", "c7", "user", "u-hold");
  const HttpResponse held =
      client.post("/reserve", holder.substr(0, holder.size() - 1) + R"(,"amount":1})");
  const json answer = json::parse(held.body, nullptr, false);
  const std::string id = answer.is_object() ? answer.value("reservation_id", std::string()) : "";
  client.post("/commit", holder.substr(0, holder.size() - 1) + R"(,"reservation_id":")" + id +
                             R"(","actual":2})");
  for (int i = 0; i < 4; ++i) {
    client.request("GET", "/check", {}, {{"X-User", "bytes-\xff\xfe-\"q\\"}});
    client.request("GET", "/check/orders?id=1", {}, {{"X-User", "b\xc3\xa9"}});
  }
  client.get("/healthz");
  client.get("/readyz");
  client.get("/rules");
  client.get("/metrics");
  client.get("/no/such/path");
  client.request("DELETE", "/shouldAllowRequest");  // 405
  HttpClient admin("127.0.0.1", admin_port);
  admin.request("DELETE", "/limits", request("shop", "c1", "path", "/checkout"));
  admin.get("/limits/top");
  admin.get("/metrics");
  admin.get("/readyz");
}

class PrometheusToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!havePrometheus()) {
      GTEST_SKIP() << "prometheus/promtool are not installed (scripts/deps.sh test installs them)";
    }
    dir_ = makeTempDir("sluice-promtool");
  }
  void TearDown() override {
    if (!dir_.empty()) {
      std::filesystem::remove_all(dir_);
    }
  }

  /// Checks both listeners' /metrics with promtool; adds their families to seen_.
  void check(const SluiceProcess& sluice, std::uint16_t admin_port, const std::string& what) {
    for (std::uint16_t port : {sluice.port(), admin_port}) {
      HttpResponse metrics = HttpClient("127.0.0.1", port).get("/metrics");
      ASSERT_EQ(metrics.status, 200) << what;
      CommandResult result = promtoolCheckMetrics(metrics.body, dir_);
      EXPECT_EQ(result.exit_code, 0) << what << ":\n" << result.output << "\n" << metrics.body;
      EXPECT_EQ(result.output, "") << what << ": promtool lint findings";
      for (const std::string& family : families(metrics.body)) {
        seen_.insert(family);
      }
    }
  }

  std::string dir_;
  std::set<std::string> seen_;
};

TEST_F(PrometheusToolsTest, LiveExpositionOfEveryStorePassesPromtoolCheckMetrics) {
  const std::string forward_auth = writeForwardAuth(dir_);
  {
    // Memory store, one key at most: capacity evictions.
    SluiceProcess sluice(
        sluiceOptions({"--config", forward_auth, "--memory-max-keys", "1", "--grpc-listen",
                       "127.0.0.1:" + std::to_string(freeLoopbackPort())}));
    const std::uint16_t admin = sluice.adminPort();
    trafficOnEveryEndpoint(sluice, admin);
    check(sluice, admin, "memory store");
  }
  {
    // Redis with events, then Redis down: the local failure mode takes over.
    RedisServer redis;
    SluiceProcess sluice(sluiceOptions({"--config", forward_auth, "--store", "redis", "--redis",
                                        redis.url(), "--failure-mode", "local", "--events",
                                        "redis-stream", "--redis-timeout-ms", "1000"}));
    const std::uint16_t admin = sluice.adminPort();
    ASSERT_TRUE(waitFor(
        [&] {
          // Ready once every I/O thread's store has connected (store health).
          HttpResponse r = sluice.client().get("/readyz");
          return r.status == 200 && r.body.find("\"store\":\"healthy\"") != std::string::npos;
        },
        std::chrono::seconds(10)))
        << sluice.log();
    trafficOnEveryEndpoint(sluice, admin);
    redis.stop();
    HttpClient client = sluice.client();
    ASSERT_TRUE(waitFor(
        [&] {
          client.post("/shouldAllowRequest", request("auth", "c9", "auth_type", "login"));
          const std::string body = client.get("/metrics").body;
          return body.find("sluice_store_failure_mode_activations_total{mode=\"local\"} 0") ==
                     std::string::npos &&
                 body.find("sluice_store_failure_mode_activations_total{mode=\"local\"}") !=
                     std::string::npos;
        },
        std::chrono::seconds(15)))
        << sluice.log();
    check(sluice, admin, "redis store, then failing");
  }
  {
    RedisCluster cluster(3, 0);
    SluiceProcess sluice(
        sluiceOptions({"--config", forward_auth, "--store", "redis_cluster", "--redis",
                       cluster.url(0) + "," + cluster.url(1), "--redis-timeout-ms", "1000"}));
    const std::uint16_t admin = sluice.adminPort();
    ASSERT_TRUE(waitFor([&] { return sluice.client().get("/readyz").status == 200; },
                        std::chrono::seconds(15)))
        << sluice.log();
    trafficOnEveryEndpoint(sluice, admin);
    check(sluice, admin, "redis cluster store");
  }
  {
    // Rules over xDS from a management server nobody runs, started without a first set: the
    // config source's own families, with its streams failing and retried.
    SluiceOptions options = sluiceOptions(
        {"--rules-xds", "127.0.0.1:" + std::to_string(freeLoopbackPort()),
         "--force-start-without-initial-config", "true", "--xds-backoff-initial-ms", "100"});
    options.rules_dir = false;
    SluiceProcess sluice(options);
    const std::uint16_t admin = sluice.adminPort();
    ASSERT_TRUE(waitFor(
        [&] {
          const std::string body = sluice.client().get("/metrics").body;
          return body.find("sluice_rules_xds_stream_failures_total 0") == std::string::npos &&
                 body.find("sluice_rules_xds_stream_failures_total") != std::string::npos;
        },
        std::chrono::seconds(15)))
        << sluice.log();
    check(sluice, admin, "rules over xDS");
  }
  const std::set<std::string> documented = documentedFamilies();
  ASSERT_GE(documented.size(), 15u) << "the table of docs/operations.md was not found";
  for (const std::string& family : documented) {
    EXPECT_TRUE(seen_.contains(family)) << family << " is documented but was never exposed";
  }
  for (const std::string& family : seen_) {
    EXPECT_TRUE(documented.contains(family)) << family << " is exposed but not documented";
  }
}

/// Grafana's variables, as the test sets them: every domain and instance, a 10 s rate window
/// (20 scrapes at the test's 500 ms interval).
std::string withGrafanaVariables(std::string expr) {
  const std::vector<std::pair<std::string, std::string>> variables = {
      {"$__rate_interval", "10s"}, {"$domain", ".*"}, {"$instance", ".*"}};
  for (const auto& [name, value] : variables) {
    for (auto pos = expr.find(name); pos != std::string::npos; pos = expr.find(name, pos)) {
      expr.replace(pos, name.size(), value);
      pos += value.size();
    }
  }
  return expr;
}

/// Every PromQL expression of the dashboard's panels.
std::vector<std::string> dashboardExpressions() {
  std::ifstream in(source("docker/grafana/sluice.json"));
  json dashboard = json::parse(in);
  std::vector<std::string> out;
  std::function<void(const json&)> walk = [&](const json& panels) {
    for (const json& panel : panels) {
      if (panel.contains("targets")) {
        for (const json& target : panel["targets"]) {
          out.push_back(target["expr"].get<std::string>());
        }
      }
      if (panel.contains("panels")) {
        walk(panel["panels"]);
      }
    }
  };
  walk(dashboard["panels"]);
  return out;
}

TEST_F(PrometheusToolsTest, PrometheusScrapesSluiceAndAnswersEveryDashboardQuery) {
  RedisServer redis;
  SluiceProcess sluice(sluiceOptions({"--config", writeForwardAuth(dir_), "--store", "redis",
                                      "--redis", redis.url(), "--failure-mode", "local", "--events",
                                      "redis-stream", "--redis-timeout-ms", "1000"}));
  const std::uint16_t admin = sluice.adminPort();
  ASSERT_TRUE(waitFor(
      [&] {
        // Ready once every I/O thread's store has connected (store health).
        HttpResponse r = sluice.client().get("/readyz");
        return r.status == 200 && r.body.find("\"store\":\"healthy\"") != std::string::npos;
      },
      std::chrono::seconds(10)))
      << sluice.log();
  trafficOnEveryEndpoint(sluice, admin);
  const std::string target = "127.0.0.1:" + std::to_string(sluice.port());

  PrometheusOptions options;
  options.targets = {target};
  options.rule_files = {source("docker/prometheus/alerts.yml")};
  PrometheusServer prometheus(options);

  // The target is scraped without errors.
  json targets;
  ASSERT_TRUE(waitFor(
      [&] {
        targets = json::parse(prometheus.get("/api/v1/targets").second);
        const json& active = targets["data"]["activeTargets"];
        return active.size() == 1 && active[0]["health"] == "up";
      },
      std::chrono::seconds(30)))
      << targets.dump(2) << "\n"
      << prometheus.log();
  EXPECT_EQ(targets["data"]["activeTargets"][0]["lastError"], "");

  // The series Prometheus stored carry the values /metrics shows: the counters are still,
  // since the traffic has stopped.
  const std::string denied_series =
      R"(sluice_decisions_total{domain="shop",rule="checkout",outcome="denied"})";
  const std::string exposition = sluice.client().get("/metrics").body;
  const auto at = exposition.find(denied_series + " ");
  ASSERT_NE(at, std::string::npos) << exposition;
  const std::string expected = exposition.substr(
      at + denied_series.size() + 1, exposition.find('\n', at) - at - denied_series.size() - 1);
  ASSERT_NE(expected, "0");
  json answer;
  ASSERT_TRUE(waitFor(
      [&] {
        answer = json::parse(prometheus.query(denied_series));
        return answer["status"] == "success" && answer["data"]["result"].size() == 1 &&
               answer["data"]["result"][0]["value"][1] == expected;
      },
      std::chrono::seconds(30)))
      << answer.dump(2);
  EXPECT_EQ(answer["data"]["result"][0]["metric"]["instance"], target);
  EXPECT_EQ(answer["data"]["result"][0]["metric"]["job"], "sluice");

  // A value label made of raw header bytes arrived as valid UTF-8 (U+FFFD).
  answer = json::parse(prometheus.query(R"(sluice_descriptor_decisions_total{rule="per_user"})"));
  ASSERT_EQ(answer["status"], "success") << answer.dump(2);
  std::set<std::string> descriptors;
  for (const json& series : answer["data"]["result"]) {
    descriptors.insert(series["metric"]["descriptor"].get<std::string>());
  }
  EXPECT_TRUE(descriptors.contains("user=bytes-\xEF\xBF\xBD\xEF\xBF\xBD-\"q\\")) << answer.dump(2);
  EXPECT_TRUE(descriptors.contains("user=b\xc3\xa9")) << answer.dump(2);

  // Grafana's template variables read label values.
  for (const char* label : {"instance", "domain"}) {
    json values = json::parse(
        prometheus
            .get(std::string("/api/v1/label/") + label + "/values?match[]=sluice_decisions_total")
            .second);
    EXPECT_EQ(values["status"], "success");
    EXPECT_FALSE(values["data"].empty()) << label;
  }

  // Every dashboard expression parses and returns series. Rates need two scrapes in their
  // window, so each one is retried until it does (or the deadline passes).
  const std::vector<std::string> expressions = dashboardExpressions();
  ASSERT_GE(expressions.size(), 20u);
  for (const std::string& raw : expressions) {
    const std::string expr = withGrafanaVariables(raw);
    ASSERT_TRUE(waitFor(
        [&] {
          answer = json::parse(prometheus.query(expr));
          return answer["status"] == "success" && !answer["data"]["result"].empty();
        },
        std::chrono::seconds(20)))
        << expr << "\n"
        << answer.dump(2);
  }

  // The alert rules load and evaluate without errors against the real series.
  json rules;
  ASSERT_TRUE(waitFor(
      [&] {
        rules = json::parse(prometheus.get("/api/v1/rules").second);
        if (rules["status"] != "success" || rules["data"]["groups"].size() != 1) {
          return false;
        }
        for (const json& rule : rules["data"]["groups"][0]["rules"]) {
          if (rule["health"] != "ok") {
            return false;
          }
        }
        return true;
      },
      std::chrono::seconds(20)))
      << rules.dump(2);
  EXPECT_EQ(rules["data"]["groups"][0]["rules"].size(), 12u) << rules.dump(2);
}

}  // namespace
}  // namespace sluice::test
