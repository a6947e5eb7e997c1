// The forward-auth request a proxy sends to /check (src/http/request_attributes.cpp and
// ip_network.cpp): addresses (peer, X-Forwarded-For), CIDR blocks, the original URI and
// method headers, path normalization, cookies, query parameters, and the descriptors built
// from all of them.
//
// Input: line 1 the peer, line 2 the request target, line 3 the method, every further line
// a header "Name: value".
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "http/forward_auth.hpp"

namespace {

using sluice::http::Attribute;
using sluice::http::AttributeSource;

sluice::http::ForwardAuthConfig makeConfig() {
  sluice::http::ForwardAuthConfig config;
  config.domain_header = "X-Ratelimit-Domain";
  for (std::string_view cidr :
       {"10.0.0.0/8", "127.0.0.1", "::1/128", "2001:db8::/33", "192.168.0.0/17"}) {
    auto network = sluice::http::parseIpNetwork(cidr);
    SLUICE_FUZZ_CHECK(network.ok());
    config.trusted_proxies.push_back(*network);
  }
  config.client = {Attribute{AttributeSource::kHeader, "X-User-Id", std::nullopt},
                   Attribute{AttributeSource::kCookie, "session", std::nullopt},
                   Attribute{AttributeSource::kClientIp, "", std::nullopt}};
  config.descriptors = {
      {{{"path", Attribute{AttributeSource::kPath, "", std::nullopt}},
        {"method", Attribute{AttributeSource::kMethod, "", std::nullopt}}}},
      {{{"tenant", Attribute{AttributeSource::kQuery, "tenant", std::string("none")}}}},
      {{{"plan", Attribute{AttributeSource::kCookie, "plan", std::nullopt}},
        {"agent", Attribute{AttributeSource::kHeader, "User-Agent", std::nullopt}}}},
      {{{"ip", Attribute{AttributeSource::kClientIp, "", std::nullopt}},
        {"kind", Attribute{AttributeSource::kLiteral, "generic", std::nullopt}}}},
  };
  return config;
}

std::string_view nextLine(std::string_view& rest) {
  const std::size_t newline = rest.find('\n');
  std::string_view line = rest.substr(0, newline);
  rest = newline == std::string_view::npos ? std::string_view{} : rest.substr(newline + 1);
  return line;
}

void checkAddress(std::string_view text) {
  if (auto address = sluice::http::parseIpAddress(text)) {
    // The canonical spelling parses back to the same address.
    auto again = sluice::http::parseIpAddress(address->toString());
    SLUICE_FUZZ_CHECK(again.has_value() && *again == *address);
  }
  if (auto network = sluice::http::parseIpNetwork(text); network.ok()) {
    SLUICE_FUZZ_CHECK(network->prefix_length >= 0 &&
                      network->prefix_length <= (network->base.v4 ? 32 : 128));
    SLUICE_FUZZ_CHECK(network->contains(network->base));
  }
}

void checkPath(std::string_view text) {
  const std::string path = sluice::http::normalizePath(text);
  SLUICE_FUZZ_CHECK(!path.empty() && path.front() == '/');
  SLUICE_FUZZ_CHECK(path.find("//") == std::string::npos);
  SLUICE_FUZZ_CHECK(path.find("/./") == std::string::npos);
  SLUICE_FUZZ_CHECK(path.find("/../") == std::string::npos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const sluice::http::ForwardAuthConfig config = makeConfig();
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  const std::string_view peer = nextLine(rest);
  sluice::http::Request request;
  request.target = std::string(nextLine(rest));
  request.path = request.target.substr(0, request.target.find('?'));
  request.method = std::string(nextLine(rest));
  request.peer = std::string(peer);
  while (!rest.empty()) {
    const std::string_view line = nextLine(rest);
    const std::size_t colon = line.find(':');
    std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
    if (value.starts_with(' ')) {
      value.remove_prefix(1);
    }
    request.addHeader(line.substr(0, colon), value);
  }

  checkAddress(peer);
  checkPath(request.target);
  const sluice::http::OriginalRequest original = sluice::http::originalRequest(config, request);
  SLUICE_FUZZ_CHECK(!original.path.empty() && original.path.front() == '/');
  (void)sluice::http::queryValue(original.query, "tenant");
  (void)sluice::http::cookieValue(request, "session");
  const std::string client = sluice::http::clientIp(config, request, peer);
  for (const auto& header : request.headers) {
    checkAddress(header.value);
  }
  const sluice::DecisionRequest decision =
      sluice::http::buildForwardAuthRequest(config, request, peer, "default");
  SLUICE_FUZZ_CHECK(!decision.domain.empty());
  SLUICE_FUZZ_CHECK(!decision.descriptors.empty());  // "tenant" has a fallback
  for (const auto& descriptor : decision.descriptors) {
    SLUICE_FUZZ_CHECK(!descriptor.empty());
  }
  (void)client;
  return 0;
}
