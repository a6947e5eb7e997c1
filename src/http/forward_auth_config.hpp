#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/ip_network.hpp"
#include "sluice/common/flag_registry.hpp"
#include "sluice/common/result.hpp"

namespace YAML {
class Node;
}

/// The configuration of the forward-auth endpoint (`forward_auth:` in the server YAML, and
/// the `--forward-auth-*` options): where the domain, the descriptors and the client come
/// from in the request the proxy asks about.
namespace sluice::http {

/// The endpoint's path; "/check/<original path>" is accepted too (Envoy ext_authz).
inline constexpr std::string_view kCheckPath = "/check";

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
  /// Peers whose `client_ip_header` is believed; empty: the TCP peer is the client. A
  /// unix-socket peer is always believed (see clientIp()).
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

/// Adds the --forward-auth-* and --trusted-proxies flags, bound to `config`.
void addForwardAuthFlags(FlagRegistry& registry, ForwardAuthConfig& config);

/// Sets one of those flags by its name without the "forward-auth-" prefix:
/// `domain`, `deny-status`, `trusted-proxies` (comma-separated CIDRs) or `client`
/// (comma-separated sources: `header:X-User-Id`, `cookie:session`, `ip`).
Status applyForwardAuthOption(ForwardAuthConfig& config, std::string_view option,
                              std::string_view value);

}  // namespace sluice::http
