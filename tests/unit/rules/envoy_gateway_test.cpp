// Envoy Gateway's translator outputs (tests/data/envoy_gateway/README.md): every document loads
// as a Sluice rules file and, converted field by field, as the RateLimitConfig resources of an
// xDS update; the descriptors Envoy sends for each route meet a limit.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sluice/rules/rate_limit_config.hpp"
#include "sluice/rules/rules.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(SLUICE_SOURCE_DIR) / "tests/data/envoy_gateway";

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The configuration files (not *.routes.yaml), sorted.
std::vector<fs::path> configFiles() {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(kDir)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".yaml") && !name.ends_with(".routes.yaml")) {
      out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// One file's documents, each as (name "file#n", text).
std::vector<std::pair<std::string, std::string>> documents(const fs::path& file) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string text = readFile(file);
  std::size_t start = 0;
  while (true) {
    const std::size_t separator = text.find("---\n", start);
    const bool at_line_start =
        separator == 0 || (separator != std::string::npos && text[separator - 1] == '\n');
    if (separator == std::string::npos || !at_line_start) {
      out.emplace_back(file.filename().string() + "#" + std::to_string(out.size()),
                       text.substr(start));
      break;
    }
    out.emplace_back(file.filename().string() + "#" + std::to_string(out.size()),
                     text.substr(start, separator - start));
    start = separator + 4;
  }
  return out;
}

int unitNumber(const std::string& name) {
  for (int unit = 0; unit <= 7; ++unit) {
    if (rateLimitUnitName(unit) == name) {
      return unit;
    }
  }
  return 99;
}

/// What Envoy Gateway's ratelimit YAML would be as a RateLimitConfig message.
RateLimitDescriptorConfig descriptorOf(const YAML::Node& node) {
  RateLimitDescriptorConfig out;
  out.key = node["key"].as<std::string>("");
  out.value = node["value"].as<std::string>("");
  if (const YAML::Node policy = node["rate_limit"]; policy && policy.IsMap()) {
    RateLimitPolicyConfig limit;
    limit.unit = unitNumber(policy["unit"].as<std::string>("UNKNOWN"));
    limit.requests_per_unit = policy["requests_per_unit"].as<std::uint32_t>(0);
    limit.unlimited = policy["unlimited"].as<bool>(false);
    limit.name = policy["name"].as<std::string>("");
    for (const auto& replace : policy["replaces"]) {
      limit.replaces.push_back(replace["name"].as<std::string>(""));
    }
    out.rate_limit = limit;
  }
  out.shadow_mode = node["shadow_mode"].as<bool>(false);
  out.detailed_metric = node["detailed_metric"].as<bool>(false);
  out.quota_mode = node["quota_mode"].as<bool>(false);
  for (const auto& child : node["descriptors"]) {
    out.descriptors.push_back(descriptorOf(child));
  }
  return out;
}

RateLimitConfigResource resourceOf(const std::string& text) {
  const YAML::Node root = YAML::Load(text);
  RateLimitConfigResource out;
  out.name = root["name"].as<std::string>("");
  out.domain = root["domain"].as<std::string>("");
  for (const auto& d : root["descriptors"]) {
    out.descriptors.push_back(descriptorOf(d));
  }
  return out;
}

TEST(EnvoyGatewayTest, KeepsTheThirtyThreeDocumentsOfTwentySixFiles) {
  std::size_t docs = 0;
  const auto files = configFiles();
  for (const fs::path& file : files) {
    docs += documents(file).size();
  }
  EXPECT_EQ(files.size(), 26u);
  EXPECT_EQ(docs, 33u);
}

TEST(EnvoyGatewayTest, EveryDocumentLoadsAsARulesFile) {
  for (const fs::path& file : configFiles()) {
    for (const auto& document : documents(file)) {
      LoadResult loaded = loadRulesFromStrings({document});
      EXPECT_TRUE(loaded.rules) << document.first;
      for (const RuleError& error : loaded.errors) {
        ADD_FAILURE() << error.toString();
      }
    }
  }
}

TEST(EnvoyGatewayTest, EveryFileLoadsAsOneXdsUpdate) {
  for (const fs::path& file : configFiles()) {
    std::vector<RateLimitConfigResource> resources;
    std::vector<std::pair<std::string, std::string>> docs = documents(file);
    for (const auto& document : docs) {
      resources.push_back(resourceOf(document.second));
    }
    LoadResult over_xds = loadRateLimitConfigs(resources, 0, LoadOptions{});
    for (const RuleError& error : over_xds.errors) {
      ADD_FAILURE() << file.filename() << ": " << error.toString();
    }
    ASSERT_TRUE(over_xds.rules) << file;
    LoadResult as_files = loadRulesFromStrings(docs);
    ASSERT_TRUE(as_files.rules) << file;
    EXPECT_EQ(over_xds.rules->limitCount(), as_files.rules->limitCount()) << file;
    EXPECT_EQ(over_xds.rules->domains.size(), docs.size()) << file;
  }
}

/// The descriptor Envoy builds from one route's rate-limit actions; header values are
/// whatever the client sent ("value-of-<header>").
Descriptor descriptorFromActions(const YAML::Node& actions) {
  Descriptor out;
  for (const auto& action : actions) {
    const YAML::Node spec = action["ActionSpecifier"];
    for (const auto& kind : spec) {
      const std::string name = kind.first.as<std::string>();
      const YAML::Node a = kind.second;
      if (name == "GenericKey") {
        out.push_back({a["descriptor_key"].as<std::string>("generic_key"),
                       a["descriptor_value"].as<std::string>("")});
      } else if (name == "HeaderValueMatch") {
        out.push_back({a["descriptor_key"].as<std::string>("header_match"),
                       a["descriptor_value"].as<std::string>("")});
      } else if (name == "QueryParameterValueMatch") {
        out.push_back({a["descriptor_key"].as<std::string>("query_match"),
                       a["descriptor_value"].as<std::string>("")});
      } else if (name == "RemoteAddressMatch") {
        out.push_back({a["descriptor_key"].as<std::string>("masked_remote_address"),
                       a["descriptor_value"].as<std::string>("")});
      } else if (name == "RequestHeaders") {
        out.push_back({a["descriptor_key"].as<std::string>(""),
                       "value-of-" + a["header_name"].as<std::string>("")});
      } else {
        ADD_FAILURE() << "an action this test does not know: " << name;
      }
    }
  }
  return out;
}

TEST(EnvoyGatewayTest, EveryRoutesDescriptorsMeetALimit) {
  std::size_t checked = 0;
  for (const fs::path& file : configFiles()) {
    std::vector<std::pair<std::string, std::string>> docs = documents(file);
    LoadResult loaded = loadRulesFromStrings(docs);
    ASSERT_TRUE(loaded.rules) << file;
    fs::path routes = file;
    routes.replace_extension(".routes.yaml");
    for (const YAML::Node& route : YAML::LoadAll(readFile(routes))) {
      for (const auto& by_domain : route["rateLimitsByDomain"]) {
        const std::string domain_name = by_domain.first.as<std::string>();
        const DomainConfig* domain = loaded.rules->findDomain(domain_name);
        ASSERT_NE(domain, nullptr) << routes << ": domain " << domain_name;
        for (const auto& rate_limit : by_domain.second) {
          const Descriptor descriptor = descriptorFromActions(rate_limit["actions"]);
          const RequestMatch match = matchRequest(*domain, {descriptor});
          ASSERT_EQ(match.descriptors.size(), 1u);
          EXPECT_TRUE(match.descriptors[0].matched) << routes << " " << domain_name;
          EXPECT_FALSE(match.descriptors[0].limits.empty()) << routes << " " << domain_name;
          ++checked;
        }
      }
    }
  }
  EXPECT_GE(checked, 40u);
}

TEST(EnvoyGatewayTest, ProtoDefaultsAreAcceptedButRealErrorsStay) {
  // Envoy Gateway's spelling of "no limit here" and "no name".
  LoadResult ok = loadRulesFromStrings({{"a.yaml", R"(name: ns/policy
domain: d
descriptors:
  - key: k
    value: ""
    rate_limit: null
    descriptors:
      - key: k2
        rate_limit:
          unit: UNKNOWN
          requests_per_unit: 0
          unlimited: true
          name: ""
          replaces: []
        descriptors: []
        metadata: null
)"}});
  for (const RuleError& error : ok.errors) {
    ADD_FAILURE() << error.toString();
  }
  // A limited policy still needs a real unit, and a name must still be a string.
  LoadResult bad = loadRulesFromStrings({{"b.yaml", R"(name: [x]
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: UNKNOWN
      requests_per_unit: 5
)"}});
  ASSERT_EQ(bad.errors.size(), 2u);
  EXPECT_NE(bad.errors[0].toString().find("b.yaml:1:"), std::string::npos)
      << bad.errors[0].toString();
  EXPECT_NE(bad.errors[1].toString().find("invalid unit 'UNKNOWN'"), std::string::npos)
      << bad.errors[1].toString();
}

TEST(EnvoyGatewayTest, XdsErrorsNameTheResourceAndThePath) {
  RateLimitConfigResource resource;
  resource.name = "ns/policy";
  resource.domain = "d";
  RateLimitDescriptorConfig outer;
  outer.key = "route";
  outer.value = "r";
  RateLimitDescriptorConfig inner;
  inner.key = "user";
  inner.rate_limit = RateLimitPolicyConfig{0, 5, false, "", {}};
  outer.descriptors.push_back(inner);
  resource.descriptors.push_back(outer);
  LoadResult loaded = loadRateLimitConfigs({resource}, 0, LoadOptions{});
  ASSERT_EQ(loaded.errors.size(), 1u);
  EXPECT_EQ(loaded.errors[0].toString(),
            "RateLimitConfig \"ns/policy\" descriptors[0].descriptors[0].rate_limit.unit: "
            "invalid unit 'UNKNOWN' (expected second, minute, hour, day, week, month or year)");
}

TEST(EnvoyGatewayTest, TwoResourcesWithOneDomainNameEachOther) {
  RateLimitConfigResource one;
  one.name = "ns/one";
  one.domain = "d";
  RateLimitConfigResource two = one;
  two.name = "ns/two";
  LoadResult loaded = loadRateLimitConfigs({one, two}, 0, LoadOptions{});
  ASSERT_EQ(loaded.errors.size(), 1u);
  EXPECT_EQ(loaded.errors[0].toString(),
            "RateLimitConfig \"ns/two\" domain: duplicate domain 'd' (already defined at "
            "RateLimitConfig \"ns/one\")");
  EXPECT_TRUE(loadRateLimitConfigs({one, two}, 0, LoadOptions{true}).rules);
}

}  // namespace
}  // namespace sluice
