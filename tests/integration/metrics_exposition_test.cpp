// GET /metrics after a known mix of requests, parsed exactly; the exposition format itself;
// a refused reload visible in the metrics and in the log.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "support/http_client.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

const char* const kShopRules = R"(domain: shop
descriptors:
  - key: path
    value: /checkout
    rate_limit:
      name: checkout
      unit: minute
      requests_per_unit: 5
  - key: path
    value: /search
    shadow_mode: true
    rate_limit:
      name: search_shadow
      unit: minute
      requests_per_unit: 2
  - key: user
    detailed_metric: true
    rate_limit:
      name: per_user
      unit: minute
      requests_per_unit: 10
)";

/// One parsed exposition: samples by series ("name{labels}"), families by name.
struct Exposition {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;  // family -> counter|gauge|histogram
  std::vector<std::string> problems;         // format violations, one per line

  double value(const std::string& series) const {
    auto it = samples.find(series);
    return it == samples.end() ? -1 : it->second;
  }
  /// Every non-zero series of one family (exact name, no _bucket/_sum/_count) with its
  /// value. Zero series are left out: a module may pre-register the series it will count.
  std::map<std::string, double> family(const std::string& name) const {
    std::map<std::string, double> out;
    for (const auto& [series, v] : samples) {
      if ((series == name || series.rfind(name + "{", 0) == 0) && v != 0) {
        out.emplace(series, v);
      }
    }
    return out;
  }
};

/// The family a sample belongs to: its name, minus _bucket/_sum/_count for histograms.
std::string familyOf(const std::string& name, const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      std::string base = name.substr(0, name.size() - s.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram") {
        return base;
      }
    }
  }
  return name;
}

Exposition parseExposition(const std::string& body) {
  static const std::regex kSample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")"
      R"((?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*\})? )"
      R"((-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|[-+]Inf|NaN)$)");
  static const std::regex kHelp(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$)");
  static const std::regex kType(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$)");
  Exposition out;
  std::set<std::string> helped;
  std::istringstream lines(body);
  std::string line;
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_match(line, m, kHelp)) {
      helped.insert(m[1]);
      continue;
    }
    if (std::regex_match(line, m, kType)) {
      if (!helped.contains(m[1])) {
        out.problems.push_back("TYPE before HELP: " + line);
      }
      if (!out.types.emplace(m[1], m[2]).second) {
        out.problems.push_back("family declared twice: " + line);
      }
      continue;
    }
    if (!std::regex_match(line, m, kSample)) {
      out.problems.push_back("not `name{labels} value`: " + line);
      continue;
    }
    const std::string name = m[1];
    if (name.rfind("sluice_", 0) != 0) {
      out.problems.push_back("name without the sluice_ prefix: " + line);
    }
    if (!out.types.contains(familyOf(name, out.types))) {
      out.problems.push_back("sample without TYPE: " + line);
    }
    const std::string series = name + std::string(m[2]);
    if (!out.samples.emplace(series, std::stod(m[3])).second) {
      out.problems.push_back("duplicate series: " + line);
    }
  }
  return out;
}

std::string shopRequest(const std::string& client, const std::string& key, const std::string& value,
                        const std::string& domain = "shop") {
  return R"({"domain":")" + domain + R"(","clientId":")" + client +
         R"(","descriptors":[{"entries":[{"key":")" + key + R"(","value":")" + value + R"("}]}]})";
}

TEST(MetricsExpositionTest, KnownMixOfRequestsIsCountedExactly) {
  SluiceProcess sluice(withRules({{"shop.yaml", kShopRules}}));
  HttpClient client = sluice.client();
  int requests = 0;
  auto send = [&](const std::string& body) {
    ++requests;
    return client.post("/shouldAllowRequest", body).status;
  };
  for (int i = 0; i < 7; ++i) {  // 5 allowed, 2 denied
    EXPECT_EQ(send(shopRequest("c1", "path", "/checkout")), i < 5 ? 200 : 429) << i;
  }
  for (int i = 0; i < 4; ++i) {  // shadow: 2 allowed, 2 shadow-denied (still 200)
    EXPECT_EQ(send(shopRequest("c2", "path", "/search")), 200) << i;
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(send(shopRequest("c3", "path", "/other")), 200);
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(send(shopRequest("c4", "path", "/checkout", "nope")), 200);
  }
  EXPECT_EQ(send(shopRequest("secret-client-77", "user", "alice")), 200);

  HttpResponse r = client.get("/metrics");
  ASSERT_EQ(r.status, 200);
  Exposition e = parseExposition(r.body);
  EXPECT_TRUE(e.problems.empty()) << testing::PrintToString(e.problems);

  const std::map<std::string, double> expected_decisions = {
      {R"(sluice_decisions_total{domain="shop",rule="checkout",outcome="allowed"})", 5},
      {R"(sluice_decisions_total{domain="shop",rule="checkout",outcome="denied"})", 2},
      {R"(sluice_decisions_total{domain="shop",rule="search_shadow",outcome="allowed"})", 2},
      {R"(sluice_decisions_total{domain="shop",rule="search_shadow",outcome="shadow_denied"})", 2},
      {R"(sluice_decisions_total{domain="shop",rule="",outcome="no_rule"})", 3},
      {R"(sluice_decisions_total{domain="_unknown",rule="",outcome="unknown_domain"})", 2},
      {R"(sluice_decisions_total{domain="shop",rule="per_user",outcome="allowed"})", 1},
  };
  EXPECT_EQ(e.family("sluice_decisions_total"), expected_decisions) << r.body;

  // checkout: remaining 1 and 0 after requests 4 and 5; search_shadow (limit 2): remaining 0
  // after request 2 (remaining 1 is 50 %).
  const std::map<std::string, double> expected_near = {
      {R"(sluice_near_limit_total{domain="shop",rule="checkout"})", 2},
      {R"(sluice_near_limit_total{domain="shop",rule="search_shadow"})", 1},
  };
  EXPECT_EQ(e.family("sluice_near_limit_total"), expected_near);

  // Only the detailed_metric rule carries a descriptor value; no client id anywhere.
  const std::map<std::string, double> expected_detailed = {
      {R"(sluice_descriptor_decisions_total{domain="shop",rule="per_user",descriptor="user=alice",outcome="allowed"})",
       1},
  };
  EXPECT_EQ(e.family("sluice_descriptor_decisions_total"), expected_detailed);
  EXPECT_EQ(r.body.find("secret-client-77"), std::string::npos);
  EXPECT_EQ(r.body.find("/other"), std::string::npos);
  EXPECT_EQ(r.body.find("nope"), std::string::npos);

  EXPECT_EQ(
      e.value(R"(sluice_http_request_duration_seconds_count{endpoint="/shouldAllowRequest"})"),
      requests);
  EXPECT_EQ(
      e.value(
          R"(sluice_http_request_duration_seconds_bucket{endpoint="/shouldAllowRequest",le="+Inf"})"),
      requests);
  EXPECT_EQ(e.value("sluice_rules_active"), 3);
  EXPECT_EQ(e.value(R"(sluice_rules_reloads_total{result="success"})"), 1);
  EXPECT_EQ(e.value(R"(sluice_rules_reloads_total{result="failure"})"), 0);
  // Memory store: checkout (c1), search_shadow (c2), per_user (alice) buckets.
  EXPECT_EQ(e.value("sluice_memory_store_keys"), 3);
  EXPECT_EQ(e.types.at("sluice_memory_store_evictions_total"), "counter");
}

TEST(MetricsExpositionTest, HistogramsAreCumulativeAndEndWithTheCount) {
  SluiceProcess sluice;
  HttpClient client = sluice.client();
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(client.post("/shouldAllowRequest", R"({"domain":"default","clientId":"h"})").status,
              200);
  }
  ASSERT_EQ(client.get("/healthz").status, 200);
  Exposition e = parseExposition(client.get("/metrics").body);
  ASSERT_TRUE(e.problems.empty()) << testing::PrintToString(e.problems);
  int histograms = 0;
  for (const auto& [family, type] : e.types) {
    if (type != "histogram") {
      continue;
    }
    // Group buckets by their labels without `le`, in exposition order of `le`.
    std::map<std::string, std::vector<std::pair<double, double>>> series;
    static const std::regex kLe(R"re(^(.*?),?le="([^"]+)"\}$)re");
    for (const auto& [name, v] : e.samples) {
      if (name.rfind(family + "_bucket{", 0) != 0) {
        continue;
      }
      std::smatch m;
      ASSERT_TRUE(std::regex_match(name, m, kLe)) << name;
      double le = m[2] == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(m[2]);
      series[m[1]].emplace_back(le, v);
    }
    for (auto& [labels, buckets] : series) {
      std::sort(buckets.begin(), buckets.end());
      for (std::size_t i = 1; i < buckets.size(); ++i) {
        EXPECT_LE(buckets[i - 1].second, buckets[i].second) << family << labels;
      }
      ASSERT_FALSE(buckets.empty());
      EXPECT_TRUE(std::isinf(buckets.back().first)) << family << labels;
      // `labels` is "<family>_bucket{" plus the other labels: the _count series has those.
      std::string other = labels.substr(family.size() + std::string("_bucket{").size());
      std::string count_series = family + "_count" + (other.empty() ? "" : "{" + other + "}");
      EXPECT_EQ(e.value(count_series), buckets.back().second) << count_series;
      ++histograms;
    }
  }
  EXPECT_GE(histograms, 2);  // /shouldAllowRequest and /healthz at least
}

TEST(MetricsExpositionTest, RefusedReloadIsCountedAndLogged) {
  SluiceProcess sluice;
  HttpClient client = sluice.client();
  sluice.writeRuleFile("auth.yaml",
                       "domain: auth\ndescriptors:\n  - key: auth_type\n"
                       "    rate_limit:\n      unit: fortnight\n"
                       "      requests_per_unit: 5\n");
  Exposition e;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    e = parseExposition(client.get("/metrics").body);
    if (e.value(R"(sluice_rules_reloads_total{result="failure"})") >= 1) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(e.value(R"(sluice_rules_reloads_total{result="failure"})"), 1);
  EXPECT_EQ(e.value(R"(sluice_rules_reloads_total{result="success"})"), 1);
  EXPECT_EQ(e.value("sluice_rules_active"), 2);  // the seed rules keep serving
  const std::string log = sluice.log();
  EXPECT_NE(log.find("refused"), std::string::npos) << log;
  EXPECT_NE(log.find("auth.yaml:5:"), std::string::npos) << log;
  // The old rules still decide.
  EXPECT_EQ(client.post("/shouldAllowRequest", shopRequest("x", "auth_type", "login", "auth"))
                .header("X-Ratelimit-Limit"),
            "5");
}

}  // namespace
}  // namespace sluice::test
