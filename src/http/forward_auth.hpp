#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/message.hpp"
#include "http/router.hpp"
#include "http/routes.hpp"
#include "sluice/common/result.hpp"
#include "sluice/decision/decision.hpp"

namespace YAML {
class Node;
}

/// The forward-auth endpoint `/check` (DESIGN.md §1): nginx `auth_request`, Envoy
/// `ext_authz` (HTTP service) and Traefik `ForwardAuth` ask it about a request they are
/// holding, and Sluice decides from that request itself. The domain, the descriptors and
/// the client come from configured request attributes (`forward_auth:` in the server
/// YAML); the decision goes through the same DecisionService, rules, store and headers as
/// /shouldAllowRequest. Everything here but the handler is a pure function of the request.
namespace sluice::http {

/// The endpoint's path; "/check/<original path>" is accepted too (Envoy ext_authz).
inline constexpr std::string_view kCheckPath = "/check";

/// An IPv4 or IPv6 address in network byte order. IPv4-mapped IPv6 addresses
/// (::ffff:a.b.c.d) are stored as IPv4, so that one client has one spelling.
struct IpAddress {
  bool v4 = true;
  std::array<std::uint8_t, 16> bytes{};  ///< the first 4 bytes for IPv4

  /// Canonical text: "192.0.2.1", "2001:db8::1".
  std::string toString() const;
  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

/// Parses an address as proxies write them in X-Forwarded-For and peers: "192.0.2.1",
/// "192.0.2.1:443", "2001:db8::1", "[2001:db8::1]:443", with surrounding spaces. nullopt
/// for anything else (e.g. "unknown", obfuscated identifiers).
std::optional<IpAddress> parseIpAddress(std::string_view text);

/// A CIDR block: "10.0.0.0/8", "2001:db8::/32"; a bare address is a /32 or /128.
struct IpNetwork {
  IpAddress base;
  int prefix_length = 32;

  bool contains(const IpAddress& address) const;
};

/// Errors (kInvalidArgument) name the text and what is wrong with it.
Result<IpNetwork> parseIpNetwork(std::string_view text);

/// Where a descriptor entry's value, or the client id, comes from.
enum class AttributeSource : std::uint8_t {
  kPath,      ///< the original path (normalized unless normalize_path is false), no query
  kMethod,    ///< the original method
  kHeader,    ///< a request header (`name`)
  kCookie,    ///< a cookie (`name`) of the Cookie header(s)
  kQuery,     ///< a query parameter (`name`) of the original URI, percent-decoded
  kClientIp,  ///< the client address (see ForwardAuthConfig::trusted_proxies)
  kLiteral,   ///< a fixed value (`name` holds it), like envoy's generic_key action
};

/// "path", "method", "header", ...
std::string_view attributeSourceName(AttributeSource source);

struct Attribute {
  AttributeSource source = AttributeSource::kPath;
  std::string name;                     ///< header/cookie/query name, or the literal value
  std::optional<std::string> fallback;  ///< used when the request lacks the attribute
};

/// One entry of a descriptor built from the request.
struct EntrySpec {
  std::string key;
  Attribute value;
};

/// One descriptor built from the request. It is left out when any entry has no value,
/// as envoy does with rate-limit actions.
struct DescriptorSpec {
  std::vector<EntrySpec> entries;
};

/// The `forward_auth:` section of the server YAML. The defaults serve a proxy that sends
/// nothing special: the server's default domain, per client IP, its domain-level limit.
struct ForwardAuthConfig {
  /// The domain; empty: the server's default domain.
  std::string domain;
  /// When set and the request carries this header, its value is the domain. Proxies must
  /// set (overwrite) it, or clients could pick their own domain.
  std::string domain_header;
  /// The answer for a denied request: 429, or 403 for nginx auth_request (which only
  /// understands 2xx, 401 and 403). 400..599.
  int deny_status = 429;
  /// Headers that carry the original URI (path and query), first present wins. Without
  /// one, the original URI is the request's own target minus kCheckPath (Envoy ext_authz
  /// appends it to its path_prefix: GET /check/orders?id=1 asks about /orders?id=1).
  std::vector<std::string> uri_headers{"X-Original-URI", "X-Forwarded-Uri"};
  /// Headers that carry the original method, first present wins; else the request's own.
  std::vector<std::string> method_headers{"X-Original-Method", "X-Forwarded-Method"};
  /// Decode unreserved %XX, merge slashes and remove dot segments before matching, so
  /// that /api/%6Cogin or /api//login count as /api/login.
  bool normalize_path = true;
  /// The client id: the first source that yields a value (header, cookie or client_ip).
  /// None yields one: the request has no client scope.
  std::vector<Attribute> client{Attribute{AttributeSource::kClientIp, "", std::nullopt}};
  /// Peers whose `client_ip_header` is believed; empty: the TCP peer is the client.
  std::vector<IpNetwork> trusted_proxies;
  /// Walked from the right, skipping trusted proxies: the first other address is the
  /// client (nginx real_ip_recursive). X-Real-IP works too (one element).
  std::string client_ip_header = "X-Forwarded-For";
  /// Empty: the domain-level rate_limit applies.
  std::vector<DescriptorSpec> descriptors;
};

/// Parses the `forward_auth:` mapping. Unknown keys, wrong types and bad values are
/// errors (kInvalidArgument) as "file:line:column: forward_auth.<path>: message".
Result<ForwardAuthConfig> parseForwardAuthConfig(const YAML::Node& node, std::string_view file);

/// Sets one option from a command-line flag or environment variable:
/// `domain`, `deny-status`, `trusted-proxies` (comma-separated CIDRs) or `client`
/// (comma-separated sources: `header:X-User-Id`, `cookie:session`, `ip`).
Status applyForwardAuthOption(ForwardAuthConfig& config, std::string_view option,
                              std::string_view value);

/// The request the proxy is asking about.
struct OriginalRequest {
  std::string method;
  std::string path;   ///< normalized per config
  std::string query;  ///< without '?'
};

OriginalRequest originalRequest(const ForwardAuthConfig& config, const Request& request);

/// RFC 3986 dot-segment removal after decoding unreserved %XX and merging slashes;
/// always starts with '/'. Other escapes (e.g. %2F) are kept, upper-cased.
std::string normalizePath(std::string_view path);

/// The value of cookie `name` across all Cookie headers; nullopt when absent.
std::optional<std::string> cookieValue(const Request& request, std::string_view name);

/// The percent-decoded value ('+' is a space) of the first parameter `name`.
std::optional<std::string> queryValue(std::string_view query, std::string_view name);

/// The client address: the peer, unless the peer is a trusted proxy (see
/// ForwardAuthConfig::client_ip_header). Canonical text; the peer text as given when it
/// does not parse.
std::string clientIp(const ForwardAuthConfig& config, const Request& request,
                     std::string_view peer);

/// The decision request for `request` received from `peer`.
DecisionRequest buildForwardAuthRequest(const ForwardAuthConfig& config, const Request& request,
                                        std::string_view peer, std::string_view default_domain);

/// The /check answer: /shouldAllowRequest's body, headers and shaping hold, with the
/// configured deny status instead of 429.
Response forwardAuthResponse(const ForwardAuthConfig& config, const DecisionRequest& request,
                             const Decision& decision);

/// Registers `/check` and `/check/*` for any method, configured by context.forward_auth
/// (the defaults when null). The decision goes through context.decisions; its errors answer
/// as on /shouldAllowRequest (503 when the store fails with failure mode `closed`).
void addForwardAuthRoutes(Router& router, const HandlerContext& context);

}  // namespace sluice::http
