#include "http/forward_auth.hpp"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace sluice::http {
namespace {

Request makeRequest(std::string target, std::vector<Header> headers = {},
                    std::string method = "GET") {
  Request request;
  request.method = std::move(method);
  request.target = target;
  request.path = target.substr(0, target.find('?'));
  for (const Header& header : headers) {
    request.addHeader(header.name, header.value);
  }
  return request;
}

ForwardAuthConfig trusting(std::vector<std::string> cidrs) {
  ForwardAuthConfig config;
  for (const auto& cidr : cidrs) {
    auto network = parseIpNetwork(cidr);
    EXPECT_TRUE(network.ok()) << cidr;
    config.trusted_proxies.push_back(*network);
  }
  return config;
}

Result<ForwardAuthConfig> parseYaml(const std::string& text) {
  return parseForwardAuthConfig(YAML::Load(text)["forward_auth"], "server.yaml");
}

// --- Addresses ------------------------------------------------------------------------

TEST(IpAddressTest, ParsesTheSpellingsProxiesUse) {
  EXPECT_EQ(parseIpAddress("192.0.2.1")->toString(), "192.0.2.1");
  EXPECT_EQ(parseIpAddress(" 192.0.2.1:4711 ")->toString(), "192.0.2.1");
  EXPECT_EQ(parseIpAddress("2001:DB8::1")->toString(), "2001:db8::1");
  EXPECT_EQ(parseIpAddress("[2001:db8::1]:443")->toString(), "2001:db8::1");
  EXPECT_EQ(parseIpAddress("[2001:db8::1]")->toString(), "2001:db8::1");
}

TEST(IpAddressTest, StoresMappedIpv4AsIpv4) {
  auto mapped = parseIpAddress("::ffff:10.1.2.3");
  ASSERT_TRUE(mapped);
  EXPECT_TRUE(mapped->v4);
  EXPECT_EQ(*mapped, *parseIpAddress("10.1.2.3"));
}

TEST(IpAddressTest, RejectsWhatIsNotAnAddress) {
  for (const char* text : {"", "unknown", "_hidden", "300.1.1.1", "1.2.3", "[::1", "[::1]x",
                           "fe80::1%eth0", "1.2.3.4:5:6x"}) {
    EXPECT_FALSE(parseIpAddress(text)) << text;
  }
}

TEST(IpNetworkTest, MatchesAddressesInsideTheBlock) {
  auto net = parseIpNetwork("10.0.0.0/8");
  ASSERT_TRUE(net.ok());
  EXPECT_TRUE(net->contains(*parseIpAddress("10.255.0.1")));
  EXPECT_FALSE(net->contains(*parseIpAddress("11.0.0.1")));
  EXPECT_FALSE(net->contains(*parseIpAddress("::ffff:11.0.0.1")));
}

TEST(IpNetworkTest, HandlesPrefixesThatSplitAByte) {
  auto net = parseIpNetwork("172.16.0.0/12");
  ASSERT_TRUE(net.ok());
  EXPECT_TRUE(net->contains(*parseIpAddress("172.31.255.255")));
  EXPECT_FALSE(net->contains(*parseIpAddress("172.32.0.0")));
}

TEST(IpNetworkTest, BareAddressIsASingleHost) {
  auto net = parseIpNetwork("127.0.0.1");
  ASSERT_TRUE(net.ok());
  EXPECT_EQ(net->prefix_length, 32);
  EXPECT_TRUE(net->contains(*parseIpAddress("127.0.0.1")));
  EXPECT_FALSE(net->contains(*parseIpAddress("127.0.0.2")));
}

TEST(IpNetworkTest, Ipv6BlocksNeverMatchIpv4) {
  auto net = parseIpNetwork("2001:db8::/32");
  ASSERT_TRUE(net.ok());
  EXPECT_TRUE(net->contains(*parseIpAddress("2001:db8:1::7")));
  EXPECT_FALSE(net->contains(*parseIpAddress("2001:db9::7")));
  EXPECT_FALSE(net->contains(*parseIpAddress("32.1.13.184")));
  EXPECT_TRUE(parseIpNetwork("::/0")->contains(*parseIpAddress("::1")));
}

TEST(IpNetworkTest, RejectsBadBlocksWithTheirText) {
  for (const char* text : {"10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/a", "10.0.0.0:80",
                           "[::1]/128", "localhost", ""}) {
    auto net = parseIpNetwork(text);
    ASSERT_FALSE(net.ok()) << text;
    EXPECT_EQ(net.error().kind, ErrorKind::kInvalidArgument);
    EXPECT_NE(net.error().message.find(std::string("'") + text + "'"), std::string::npos)
        << net.error().message;
  }
}

// --- Client IP ------------------------------------------------------------------------

TEST(ClientIpTest, UntrustedPeerIsTheClientWhateverItForwards) {
  auto config = trusting({"10.0.0.0/8"});
  auto request = makeRequest("/check", {{"X-Forwarded-For", "203.0.113.9"}});
  EXPECT_EQ(clientIp(config, request, "198.51.100.7"), "198.51.100.7");
}

TEST(ClientIpTest, NoTrustedProxiesMeansThePeer) {
  ForwardAuthConfig config;
  auto request = makeRequest("/check", {{"X-Forwarded-For", "203.0.113.9"}});
  EXPECT_EQ(clientIp(config, request, "127.0.0.1:5555"), "127.0.0.1");
}

TEST(ClientIpTest, TrustedPeerNamesTheNearestUntrustedHop) {
  auto config = trusting({"10.0.0.0/8"});
  // The client forged "1.1.1.1"; the trusted proxy appended the address it saw.
  auto request = makeRequest("/check", {{"X-Forwarded-For", "1.1.1.1, 203.0.113.9"}});
  EXPECT_EQ(clientIp(config, request, "10.0.0.2"), "203.0.113.9");
}

TEST(ClientIpTest, SkipsEveryTrustedHop) {
  auto config = trusting({"10.0.0.0/8", "192.168.0.0/16"});
  auto request = makeRequest(
      "/check", {{"X-Forwarded-For", "9.9.9.9, 203.0.113.9"}, {"X-Forwarded-For", "192.168.1.1"}});
  EXPECT_EQ(clientIp(config, request, "10.0.0.2"), "203.0.113.9");
}

TEST(ClientIpTest, AllTrustedMeansTheFarthestHop) {
  auto config = trusting({"10.0.0.0/8"});
  auto request = makeRequest("/check", {{"X-Forwarded-For", "10.0.0.7, 10.0.0.8"}});
  EXPECT_EQ(clientIp(config, request, "10.0.0.2"), "10.0.0.7");
}

TEST(ClientIpTest, UnixSocketPeerIsATrustedProxy) {
  ForwardAuthConfig config;
  auto request = makeRequest("/check", {{"X-Forwarded-For", "1.1.1.1, 203.0.113.9"}});
  EXPECT_EQ(clientIp(config, request, kUnixSocketPeer), "203.0.113.9");
  auto trusted = trusting({"10.0.0.0/8"});
  auto via_proxy = makeRequest("/check", {{"X-Forwarded-For", "203.0.113.9, 10.0.0.4"}});
  EXPECT_EQ(clientIp(trusted, via_proxy, kUnixSocketPeer), "203.0.113.9");
}

TEST(ClientIpTest, UnixSocketPeerWithoutHeaderHasNoClientAddress) {
  ForwardAuthConfig config;
  EXPECT_EQ(clientIp(config, makeRequest("/check"), kUnixSocketPeer), "");
  auto garbage = makeRequest("/check", {{"X-Forwarded-For", "unknown"}});
  EXPECT_EQ(clientIp(config, garbage, kUnixSocketPeer), "");
  // No client address: the request has no client scope (the default client source is it).
  DecisionRequest decision =
      buildForwardAuthRequest(config, makeRequest("/check"), kUnixSocketPeer, "default");
  EXPECT_EQ(decision.client_id, "");
}

TEST(ClientIpTest, TrustedPeerWithoutHeaderIsTheClient) {
  auto config = trusting({"10.0.0.0/8"});
  EXPECT_EQ(clientIp(config, makeRequest("/check"), "10.0.0.2"), "10.0.0.2");
}

TEST(ClientIpTest, GarbageHopStopsTheWalk) {
  auto config = trusting({"10.0.0.0/8"});
  auto request = makeRequest("/check", {{"X-Forwarded-For", "203.0.113.9, unknown, 10.0.0.5"}});
  EXPECT_EQ(clientIp(config, request, "10.0.0.2"), "10.0.0.5");
}

TEST(ClientIpTest, ReadsTheConfiguredHeader) {
  auto config = trusting({"127.0.0.1"});
  config.client_ip_header = "X-Real-IP";
  auto request =
      makeRequest("/check", {{"X-Forwarded-For", "1.1.1.1"}, {"X-Real-IP", "[2001:db8::5]:1234"}});
  EXPECT_EQ(clientIp(config, request, "::ffff:127.0.0.1"), "2001:db8::5");
}

// --- Original request -----------------------------------------------------------------

TEST(OriginalRequestTest, PrefersTheUriHeaders) {
  ForwardAuthConfig config;
  auto request = makeRequest("/check/ignored",
                             {{"X-Forwarded-Uri", "/b?y=2"}, {"X-Original-URI", "/a/x?q=1"}});
  auto original = originalRequest(config, request);
  EXPECT_EQ(original.path, "/a/x");
  EXPECT_EQ(original.query, "q=1");
}

TEST(OriginalRequestTest, StripsTheCheckPrefixForEnvoy) {
  ForwardAuthConfig config;
  auto original = originalRequest(config, makeRequest("/check/orders/7?id=1", {}, "DELETE"));
  EXPECT_EQ(original.path, "/orders/7");
  EXPECT_EQ(original.query, "id=1");
  EXPECT_EQ(original.method, "DELETE");
  EXPECT_EQ(originalRequest(config, makeRequest("/check")).path, "/");
  EXPECT_EQ(originalRequest(config, makeRequest("/check?x=1")).query, "x=1");
}

TEST(OriginalRequestTest, PrefersTheMethodHeaders) {
  ForwardAuthConfig config;
  auto request = makeRequest("/check", {{"X-Forwarded-Method", "PUT"}}, "GET");
  EXPECT_EQ(originalRequest(config, request).method, "PUT");
}

TEST(OriginalRequestTest, KeepsThePathOfAnAbsoluteUri) {
  ForwardAuthConfig config;
  auto request = makeRequest("/check", {{"X-Forwarded-Uri", "https://shop.example/cart?x=1#top"}});
  auto original = originalRequest(config, request);
  EXPECT_EQ(original.path, "/cart");
  EXPECT_EQ(original.query, "x=1");
}

TEST(OriginalRequestTest, NormalizationCanBeTurnedOff) {
  ForwardAuthConfig config;
  config.normalize_path = false;
  auto request = makeRequest("/check", {{"X-Original-URI", "/a//b/../%63"}});
  EXPECT_EQ(originalRequest(config, request).path, "/a//b/../%63");
}

TEST(NormalizePathTest, DecodesUnreservedEscapes) {
  EXPECT_EQ(normalizePath("/api/%6Cogin"), "/api/login");
  EXPECT_EQ(normalizePath("/%7euser"), "/~user");
}

TEST(NormalizePathTest, KeepsReservedEscapesUpperCased) {
  EXPECT_EQ(normalizePath("/a%2fb"), "/a%2Fb");
  EXPECT_EQ(normalizePath("/100%"), "/100%");
  EXPECT_EQ(normalizePath("/%zz"), "/%zz");
}

TEST(NormalizePathTest, MergesSlashesAndRemovesDotSegments) {
  EXPECT_EQ(normalizePath("//api///login"), "/api/login");
  EXPECT_EQ(normalizePath("/a/b/../c/./d"), "/a/c/d");
  EXPECT_EQ(normalizePath("/a/%2E%2E/b"), "/b");
  EXPECT_EQ(normalizePath("/../../etc"), "/etc");
  EXPECT_EQ(normalizePath("/a/b/.."), "/a/");
  EXPECT_EQ(normalizePath("/a/"), "/a/");
  EXPECT_EQ(normalizePath(""), "/");
  EXPECT_EQ(normalizePath("/"), "/");
}

TEST(CookieValueTest, FindsACookieAmongOthersAndHeaders) {
  auto request =
      makeRequest("/check", {{"Cookie", "a=1; theme=dark"}, {"cookie", "session=\"abc\"; b=2"}});
  EXPECT_EQ(cookieValue(request, "theme"), "dark");
  EXPECT_EQ(cookieValue(request, "session"), "abc");
  EXPECT_EQ(cookieValue(request, "missing"), std::nullopt);
  EXPECT_EQ(cookieValue(request, "sess"), std::nullopt);
}

TEST(QueryValueTest, DecodesTheFirstMatchingParameter) {
  EXPECT_EQ(queryValue("a=1&api%5Fkey=k%20e+y&api_key=2", "api_key"), "k e y");
  EXPECT_EQ(queryValue("flag&x=1", "flag"), "");
  EXPECT_EQ(queryValue("x=1", "y"), std::nullopt);
  EXPECT_EQ(queryValue("", "y"), std::nullopt);
}

// --- Decision request -----------------------------------------------------------------

TEST(BuildForwardAuthRequestTest, DefaultsToTheServerDomainPerClientIp) {
  ForwardAuthConfig config;
  auto decision = buildForwardAuthRequest(config, makeRequest("/check"), "192.0.2.4", "web");
  EXPECT_EQ(decision.domain, "web");
  EXPECT_EQ(decision.client_id, "192.0.2.4");
  EXPECT_TRUE(decision.descriptors.empty());
  EXPECT_EQ(decision.hits, 1);
}

TEST(BuildForwardAuthRequestTest, DomainHeaderOverridesTheConfiguredDomain) {
  ForwardAuthConfig config;
  config.domain = "api";
  config.domain_header = "X-Sluice-Domain";
  EXPECT_EQ(buildForwardAuthRequest(config, makeRequest("/check"), "::1", "web").domain, "api");
  auto request = makeRequest("/check", {{"x-sluice-domain", "admin"}});
  EXPECT_EQ(buildForwardAuthRequest(config, request, "::1", "web").domain, "admin");
}

TEST(BuildForwardAuthRequestTest, FirstClientSourceWithAValueWins) {
  ForwardAuthConfig config;
  config.client = {{AttributeSource::kHeader, "X-User-Id", std::nullopt},
                   {AttributeSource::kCookie, "session", std::nullopt},
                   {AttributeSource::kClientIp, "", std::nullopt}};
  auto both = makeRequest("/check", {{"X-User-Id", "alice"}, {"Cookie", "session=s1"}});
  EXPECT_EQ(buildForwardAuthRequest(config, both, "192.0.2.4", "d").client_id, "alice");
  auto cookie = makeRequest("/check", {{"X-User-Id", ""}, {"Cookie", "session=s1"}});
  EXPECT_EQ(buildForwardAuthRequest(config, cookie, "192.0.2.4", "d").client_id, "s1");
  EXPECT_EQ(buildForwardAuthRequest(config, makeRequest("/check"), "192.0.2.4", "d").client_id,
            "192.0.2.4");
}

TEST(BuildForwardAuthRequestTest, NoClientSourceMeansNoClientScope) {
  ForwardAuthConfig config;
  config.client = {{AttributeSource::kHeader, "X-User-Id", std::nullopt}};
  EXPECT_EQ(buildForwardAuthRequest(config, makeRequest("/check"), "192.0.2.4", "d").client_id, "");
}

TEST(BuildForwardAuthRequestTest, BuildsDescriptorsFromRequestAttributes) {
  auto config = parseYaml(R"(
forward_auth:
  trusted_proxies: [127.0.0.1]
  descriptors:
    - [{key: path, from: path}, {key: method, from: method}]
    - entries: [{key: plan, from: header, name: X-Plan}, {key: tenant, from: cookie, name: t}]
    - [{key: remote_address, from: client_ip}, {key: kind, value: api}]
    - [{key: page, from: query, name: page, default: "1"}]
)");
  ASSERT_TRUE(config.ok()) << config.error().message;
  auto request = makeRequest("/check", {{"X-Original-URI", "/api//items?sort=asc"},
                                        {"X-Original-Method", "POST"},
                                        {"X-Plan", "free"},
                                        {"Cookie", "t=acme"},
                                        {"X-Forwarded-For", "203.0.113.9"}});
  auto decision = buildForwardAuthRequest(*config, request, "127.0.0.1", "d");
  ASSERT_EQ(decision.descriptors.size(), 4U);
  EXPECT_EQ(decision.descriptors[0][0].value, "/api/items");
  EXPECT_EQ(decision.descriptors[0][1].value, "POST");
  EXPECT_EQ(decision.descriptors[1][0].key, "plan");
  EXPECT_EQ(decision.descriptors[1][0].value, "free");
  EXPECT_EQ(decision.descriptors[1][1].value, "acme");
  EXPECT_EQ(decision.descriptors[2][0].value, "203.0.113.9");
  EXPECT_EQ(decision.descriptors[2][1].value, "api");
  EXPECT_EQ(decision.descriptors[3][0].value, "1");
}

TEST(BuildForwardAuthRequestTest, LeavesOutADescriptorWithAMissingAttribute) {
  auto config = parseYaml(R"(
forward_auth:
  descriptors:
    - [{key: path, from: path}, {key: plan, from: header, name: X-Plan}]
    - [{key: path, from: path}]
)");
  ASSERT_TRUE(config.ok()) << config.error().message;
  auto decision = buildForwardAuthRequest(*config, makeRequest("/check/x"), "192.0.2.1", "d");
  ASSERT_EQ(decision.descriptors.size(), 1U);
  ASSERT_EQ(decision.descriptors[0].size(), 1U);
  EXPECT_EQ(decision.descriptors[0][0].value, "/x");
}

// --- Configuration ----------------------------------------------------------------------

TEST(ForwardAuthConfigTest, AbsentSectionGivesTheDefaults) {
  auto config = parseForwardAuthConfig(YAML::Node(), "server.yaml");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->deny_status, 429);
  ASSERT_EQ(config->client.size(), 1U);
  EXPECT_EQ(config->client[0].source, AttributeSource::kClientIp);
}

TEST(ForwardAuthConfigTest, ParsesEveryKey) {
  auto config = parseYaml(R"(
forward_auth:
  domain: web
  domain_header: X-Sluice-Domain
  deny_status: 403
  uri_headers: [X-Uri]
  method_headers: [X-Method]
  normalize_path: false
  client: [{from: header, name: X-User-Id}, {from: cookie, name: sid}, {from: client_ip}]
  trusted_proxies: [10.0.0.0/8, "2001:db8::/32"]
  client_ip_header: X-Real-IP
  descriptors: [[{key: path, from: path}]]
)");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->domain, "web");
  EXPECT_EQ(config->domain_header, "X-Sluice-Domain");
  EXPECT_EQ(config->deny_status, 403);
  EXPECT_EQ(config->uri_headers, std::vector<std::string>{"X-Uri"});
  EXPECT_EQ(config->method_headers, std::vector<std::string>{"X-Method"});
  EXPECT_FALSE(config->normalize_path);
  ASSERT_EQ(config->client.size(), 3U);
  EXPECT_EQ(config->client[1].source, AttributeSource::kCookie);
  EXPECT_EQ(config->client[1].name, "sid");
  ASSERT_EQ(config->trusted_proxies.size(), 2U);
  EXPECT_FALSE(config->trusted_proxies[1].base.v4);
  EXPECT_EQ(config->client_ip_header, "X-Real-IP");
  ASSERT_EQ(config->descriptors.size(), 1U);
}

void expectConfigError(const std::string& yaml, const std::string& expected) {
  auto config = parseYaml(yaml);
  ASSERT_FALSE(config.ok()) << yaml;
  EXPECT_EQ(config.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_NE(config.error().message.find(expected), std::string::npos)
      << "message: " << config.error().message << "\nexpected: " << expected;
}

TEST(ForwardAuthConfigTest, UnknownKeyNamesItsLocation) {
  expectConfigError("forward_auth:\n  domain: a\n  deny_stauts: 403\n",
                    "server.yaml:3:3: forward_auth.deny_stauts: unknown key");
}

TEST(ForwardAuthConfigTest, DenyStatusMustBeAnErrorStatus) {
  expectConfigError("forward_auth:\n  deny_status: 200\n",
                    "server.yaml:2:16: forward_auth.deny_status: must be an HTTP error status");
  expectConfigError("forward_auth:\n  deny_status: often\n",
                    "forward_auth.deny_status: must be an integer");
}

TEST(ForwardAuthConfigTest, RejectsBadSources) {
  expectConfigError("forward_auth:\n  client: [{from: header}]\n",
                    "forward_auth.client[0]: `from: header` needs a `name`");
  expectConfigError("forward_auth:\n  client: [{from: path}]\n",
                    "forward_auth.client[0].from: unknown source 'path'");
  expectConfigError("forward_auth:\n  client: {from: header}\n",
                    "forward_auth.client: must be a list");
  expectConfigError("forward_auth:\n  descriptors: [[{key: a, from: method, name: x}]]\n",
                    "forward_auth.descriptors[0][0].name: `from: method` takes no name");
  expectConfigError("forward_auth:\n  descriptors: [[{key: a}]]\n",
                    "forward_auth.descriptors[0][0]: missing `from` or `value`");
  expectConfigError("forward_auth:\n  descriptors: [[{from: path}]]\n",
                    "forward_auth.descriptors[0][0]: missing `key`");
  expectConfigError("forward_auth:\n  descriptors: [[]]\n",
                    "forward_auth.descriptors[0]: must be a non-empty list of entries");
  expectConfigError("forward_auth:\n  descriptors: [[{key: a, value: x, from: path}]]\n",
                    "excludes from, name and default");
}

TEST(ForwardAuthConfigTest, BadTrustedProxyNamesTheItem) {
  expectConfigError("forward_auth:\n  trusted_proxies: [10.0.0.0/8, 10.0.0.0/40]\n",
                    "server.yaml:2:33: forward_auth.trusted_proxies[1]: '10.0.0.0/40'");
}

TEST(ForwardAuthConfigTest, ShippedExamplesParse) {
  // docker/sluice/*.yaml configure the compose demo's sidecars.
  for (const char* name : {"nginx.yaml", "edge.yaml"}) {
    const std::string path = std::string(SLUICE_SOURCE_DIR) + "/docker/sluice/" + name;
    YAML::Node root = YAML::LoadFile(path);
    auto config = parseForwardAuthConfig(root["forward_auth"], path);
    ASSERT_TRUE(config.ok()) << config.error().message;
    EXPECT_FALSE(config->trusted_proxies.empty()) << name;
    EXPECT_FALSE(config->descriptors.empty()) << name;
  }
}

TEST(ForwardAuthOptionTest, SetsOptionsFromFlags) {
  ForwardAuthConfig config;
  ASSERT_TRUE(applyForwardAuthOption(config, "deny-status", "403").ok());
  EXPECT_EQ(config.deny_status, 403);
  ASSERT_TRUE(applyForwardAuthOption(config, "domain", "web").ok());
  EXPECT_EQ(config.domain, "web");
  ASSERT_TRUE(applyForwardAuthOption(config, "trusted-proxies", "10.0.0.0/8, ::1").ok());
  EXPECT_EQ(config.trusted_proxies.size(), 2U);
  ASSERT_TRUE(applyForwardAuthOption(config, "client", "header:X-User-Id,cookie:sid,ip").ok());
  ASSERT_EQ(config.client.size(), 3U);
  EXPECT_EQ(config.client[0].name, "X-User-Id");
  EXPECT_EQ(config.client[2].source, AttributeSource::kClientIp);
}

TEST(ForwardAuthOptionTest, RejectsBadFlagValues) {
  ForwardAuthConfig config;
  EXPECT_FALSE(applyForwardAuthOption(config, "deny-status", "200").ok());
  EXPECT_FALSE(applyForwardAuthOption(config, "deny-status", "4o3").ok());
  EXPECT_FALSE(applyForwardAuthOption(config, "trusted-proxies", "10.0.0.0/99").ok());
  EXPECT_FALSE(applyForwardAuthOption(config, "client", "header").ok());
  EXPECT_FALSE(applyForwardAuthOption(config, "client", "ip:x").ok());
  EXPECT_FALSE(applyForwardAuthOption(config, "client", "path").ok());
  EXPECT_FALSE(applyForwardAuthOption(config, "colour", "blue").ok());
  EXPECT_EQ(config.deny_status, 429);
  EXPECT_TRUE(config.trusted_proxies.empty());
}

// --- Answer -----------------------------------------------------------------------------

Decision deniedDecision() {
  LimitStatus limit;
  limit.name = "per_path";
  limit.limit = 2;
  limit.unit = TimeUnit::kMinute;
  limit.window_us = 60 * kMicrosPerSecond;
  limit.outcome.allowed = false;
  limit.outcome.remaining = 0;
  limit.outcome.reset_after_us = 30 * kMicrosPerSecond;
  limit.outcome.retry_after_us = 29'500'000;
  Decision decision;
  decision.allowed = false;
  decision.descriptors.push_back(DescriptorStatus{true, {limit}});
  return decision;
}

std::string headerValue(const Response& response, std::string_view name) {
  return std::string(response.header(name));
}

TEST(ForwardAuthResponseTest, DenialUsesTheConfiguredStatusWithTheHeaders) {
  ForwardAuthConfig config;
  config.deny_status = 403;
  DecisionRequest request;
  request.descriptors.push_back({Entry{"path", "/x"}});
  auto response = forwardAuthResponse(config, request, deniedDecision());
  EXPECT_EQ(response.status, 403);
  EXPECT_EQ(headerValue(response, "Retry-After"), "30");
  EXPECT_EQ(headerValue(response, "X-Ratelimit-Limit"), "2");
  EXPECT_EQ(headerValue(response, "X-Ratelimit-Remaining"), "0");
}

TEST(ForwardAuthResponseTest, DenialIs429ByDefault) {
  ForwardAuthConfig config;
  DecisionRequest request;
  request.descriptors.push_back({Entry{"path", "/x"}});
  EXPECT_EQ(forwardAuthResponse(config, request, deniedDecision()).status, 429);
}

TEST(ForwardAuthResponseTest, AllowedIs200) {
  ForwardAuthConfig config;
  config.deny_status = 403;
  Decision decision;
  auto response = forwardAuthResponse(config, DecisionRequest{}, decision);
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(headerValue(response, "X-Ratelimit-Limit"), "");
}

}  // namespace
}  // namespace sluice::http
