// The forward-auth endpoint /check over real HTTP against the real binary (docs/deployment.md):
// each client-identification source, X-Forwarded-For from trusted and untrusted peers, the
// configurable deny status, Envoy's path prefix, the domain header.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "support/http_client.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;

// A token bucket of 3 that refills one token per 20 minutes: exactly 3 requests pass within
// a test, whenever it runs (no window edge to wait for).
constexpr const char* kWebRules = R"(domain: web
descriptors:
  - key: path
    value: /login
    rate_limit:
      name: login
      unit: hour
      requests_per_unit: 3
      algorithm: token_bucket
  - key: path
    value: /admin
    rate_limit:
      name: admin
      unit: hour
      requests_per_unit: 3
      algorithm: token_bucket
)";

constexpr const char* kAdminRules = R"(domain: admin
descriptors:
  - key: path
    value: /login
    rate_limit:
      name: admin_login
      unit: hour
      requests_per_unit: 1
      algorithm: token_bucket
)";

constexpr int kLimit = 3;

/// A sluice with the web rules and `forward_auth` YAML written to a server config file.
class ForwardAuthSluice {
 public:
  explicit ForwardAuthSluice(const std::string& forward_auth_yaml,
                             std::vector<std::string> extra_args = {})
      : dir_(makeTempDir("sluice-forward-auth")) {
    std::string config = dir_ + "/server.yaml";
    std::ofstream(config) << "forward_auth:\n" << forward_auth_yaml;
    SluiceOptions options;
    options.rule_files = {
        {"web.yaml", kWebRules}, {"admin.yaml", kAdminRules}, {"default.yaml", kSeedDefaultRules}};
    options.args = {"--threads", "2", "--config", config};
    options.args.insert(options.args.end(), extra_args.begin(), extra_args.end());
    sluice_ = std::make_unique<SluiceProcess>(options);
  }
  ~ForwardAuthSluice() {
    sluice_.reset();
    std::filesystem::remove_all(dir_);
  }
  ForwardAuthSluice(const ForwardAuthSluice&) = delete;
  ForwardAuthSluice& operator=(const ForwardAuthSluice&) = delete;

  HttpResponse check(const Headers& headers, std::string_view target = "/check",
                     std::string_view method = "GET") {
    return client_().request(method, target, {}, headers);
  }
  SluiceProcess& process() { return *sluice_; }

 private:
  HttpClient& client_() {
    if (!client_storage_) {
      client_storage_ = std::make_unique<HttpClient>(sluice_->client());
    }
    return *client_storage_;
  }

  std::string dir_;
  std::unique_ptr<SluiceProcess> sluice_;
  std::unique_ptr<HttpClient> client_storage_;
};

Headers with(Headers headers, std::pair<std::string, std::string> extra) {
  headers.push_back(std::move(extra));
  return headers;
}

// `kLimit` answers 200 with the limit headers, then the deny status with Retry-After.
void expectLimitReached(ForwardAuthSluice& sluice, const Headers& headers, int deny_status = 429,
                        std::string_view target = "/check") {
  for (int i = 0; i < kLimit; ++i) {
    HttpResponse r = sluice.check(headers, target);
    ASSERT_EQ(r.status, 200) << "request " << i + 1 << ": " << r.body;
    EXPECT_EQ(r.header("X-Ratelimit-Limit"), std::to_string(kLimit));
    EXPECT_EQ(r.header("X-Ratelimit-Remaining"), std::to_string(kLimit - 1 - i));
    EXPECT_FALSE(r.hasHeader("Retry-After"));
  }
  HttpResponse denied = sluice.check(headers, target);
  ASSERT_EQ(denied.status, deny_status) << denied.body;
  EXPECT_EQ(denied.header("X-Ratelimit-Remaining"), "0");
  EXPECT_GE(std::stoi(denied.header("Retry-After")), 1);
  EXPECT_EQ(denied.header("Retry-After"), denied.header("X-Ratelimit-Retry-After"));
  EXPECT_NE(denied.body.find(R"("allowed":false)"), std::string::npos) << denied.body;
}

const Headers kLogin{{"X-Original-URI", "/login?next=/home"}};

TEST(ForwardAuthEndpointTest, ClientFromHeader) {
  ForwardAuthSluice sluice(R"(
  domain: web
  client: [{from: header, name: X-User-Id}]
  descriptors: [[{key: path, from: path}]]
)");
  expectLimitReached(sluice, with(kLogin, {"X-User-Id", "alice"}));
  EXPECT_EQ(sluice.check(with(kLogin, {"X-User-Id", "bob"})).status, 200);
}

TEST(ForwardAuthEndpointTest, ClientFromCookie) {
  ForwardAuthSluice sluice(R"(
  domain: web
  client: [{from: cookie, name: session}]
  descriptors: [[{key: path, from: path}]]
)");
  expectLimitReached(sluice, with(kLogin, {"Cookie", "theme=dark; session=s1"}));
  EXPECT_EQ(sluice.check(with(kLogin, {"Cookie", "session=s2; theme=dark"})).status, 200);
}

TEST(ForwardAuthEndpointTest, ClientFallsBackToTheNextSource) {
  ForwardAuthSluice sluice(R"(
  domain: web
  client: [{from: header, name: X-User-Id}, {from: client_ip}]
  descriptors: [[{key: path, from: path}]]
)");
  // Without X-User-Id the client is the peer address: one bucket for these requests.
  expectLimitReached(sluice, kLogin);
  EXPECT_EQ(sluice.check(with(kLogin, {"X-User-Id", "carol"})).status, 200);
}

TEST(ForwardAuthEndpointTest, SpoofedForwardedForFromUntrustedPeerIsIgnored) {
  ForwardAuthSluice sluice(R"(
  domain: web
  client: [{from: client_ip}]
  trusted_proxies: [10.0.0.0/8]
  descriptors: [[{key: path, from: path}]]
)");
  // The peer (127.0.0.1) is not a trusted proxy: each forged address changes nothing.
  for (int i = 0; i < kLimit; ++i) {
    auto headers = with(kLogin, {"X-Forwarded-For", "203.0.113." + std::to_string(i + 1)});
    HttpResponse r = sluice.check(headers);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("X-Ratelimit-Remaining"), std::to_string(kLimit - 1 - i));
  }
  EXPECT_EQ(sluice.check(with(kLogin, {"X-Forwarded-For", "203.0.113.99"})).status, 429);
}

TEST(ForwardAuthEndpointTest, ForwardedForFromTrustedProxyNamesTheClient) {
  ForwardAuthSluice sluice(R"(
  domain: web
  client: [{from: client_ip}]
  trusted_proxies: [127.0.0.1/32]
  descriptors: [[{key: path, from: path}]]
)");
  expectLimitReached(sluice, with(kLogin, {"X-Forwarded-For", "198.51.100.1"}));
  // The same client with a forged hop in front is still the same client ...
  EXPECT_EQ(sluice.check(with(kLogin, {"X-Forwarded-For", "192.0.2.50, 198.51.100.1"})).status,
            429);
  // ... and another client has its own bucket.
  EXPECT_EQ(sluice.check(with(kLogin, {"X-Forwarded-For", "198.51.100.2"})).status, 200);
}

TEST(ForwardAuthEndpointTest, DenyStatusIsConfigurable) {
  ForwardAuthSluice sluice(R"(
  domain: web
  deny_status: 403
  client: [{from: header, name: X-User-Id}]
  descriptors: [[{key: path, from: path}]]
)");
  expectLimitReached(sluice, with(kLogin, {"X-User-Id", "dave"}), 403);
}

TEST(ForwardAuthEndpointTest, DenyStatusFlagOverridesTheFile) {
  ForwardAuthSluice sluice(R"(
  domain: web
  deny_status: 403
  client: [{from: header, name: X-User-Id}]
  descriptors: [[{key: path, from: path}]]
)",
                           {"--forward-auth-deny-status", "401"});
  expectLimitReached(sluice, with(kLogin, {"X-User-Id", "erin"}), 401);
}

TEST(ForwardAuthEndpointTest, EnvoyPathPrefixAndAnyMethod) {
  ForwardAuthSluice sluice(R"(
  domain: web
  client: [{from: header, name: X-User-Id}]
  descriptors: [[{key: path, from: path}]]
)");
  // Envoy ext_authz: the original method, /check + the original path, no URI header.
  const Headers user{{"X-User-Id", "frank"}};
  for (std::string_view method : {"POST", "DELETE", "PATCH"}) {
    HttpResponse r = sluice.check(user, "/check/login?x=1", method);
    ASSERT_EQ(r.status, 200) << method << ": " << r.body;
    EXPECT_EQ(r.header("X-Ratelimit-Limit"), std::to_string(kLimit));
  }
  EXPECT_EQ(sluice.check(user, "/check//login", "PUT").status, 429);
}

TEST(ForwardAuthEndpointTest, UnmatchedRequestIsAllowedWithoutLimitHeaders) {
  ForwardAuthSluice sluice(R"(
  domain: web
  descriptors: [[{key: path, from: path}]]
)");
  for (int i = 0; i < kLimit + 2; ++i) {
    HttpResponse r = sluice.check({{"X-Original-URI", "/public"}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_FALSE(r.hasHeader("X-Ratelimit-Limit"));
  }
}

TEST(ForwardAuthEndpointTest, DomainHeaderPicksTheDomain) {
  ForwardAuthSluice sluice(R"(
  domain: web
  domain_header: X-Sluice-Domain
  client: [{from: header, name: X-User-Id}]
  descriptors: [[{key: path, from: path}]]
)");
  Headers admin = with(with(kLogin, {"X-User-Id", "gina"}), {"X-Sluice-Domain", "admin"});
  HttpResponse first = sluice.check(admin);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.header("X-Ratelimit-Limit"), "1");
  EXPECT_EQ(sluice.check(admin).status, 429);
  // Without the header the configured domain (web, 3 per hour) applies.
  EXPECT_EQ(sluice.check(with(kLogin, {"X-User-Id", "gina"})).header("X-Ratelimit-Limit"), "3");
}

TEST(ForwardAuthEndpointTest, BadForwardAuthConfigStopsStartUp) {
  std::string dir = makeTempDir("sluice-forward-auth-bad");
  std::string config = dir + "/server.yaml";
  std::ofstream(config) << "forward_auth:\n  deny_status: 200\n";
  auto [code, output] = runSluice({"--rules", std::string(SLUICE_SOURCE_DIR) + "/config/rules",
                                   "--config", config, "--listen", "127.0.0.1:0"});
  std::filesystem::remove_all(dir);
  EXPECT_NE(code, 0) << output;
  EXPECT_NE(output.find("server.yaml:2:16: forward_auth.deny_status"), std::string::npos) << output;
}

}  // namespace
}  // namespace sluice::test
