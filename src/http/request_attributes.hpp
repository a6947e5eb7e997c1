#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "sluice/decision/decision.hpp"
#include "sluice/http/forward_auth_config.hpp"
#include "sluice/http/message.hpp"

/// The request attributes forward auth decides from: the original method, path (normalized)
/// and query, headers, cookies and the client address, and the decision request built from
/// them. All are pure functions of the request and the configuration.
namespace sluice::http {

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
/// does not parse. A unix-socket peer (kUnixSocketPeer) counts as a trusted proxy: the
/// address comes from the header, and is empty (the request has no client address) when
/// the header has none.
std::string clientIp(const ForwardAuthConfig& config, const Request& request,
                     std::string_view peer);

/// The decision request for `request` received from `peer`.
DecisionRequest buildForwardAuthRequest(const ForwardAuthConfig& config, const Request& request,
                                        std::string_view peer, std::string_view default_domain);

}  // namespace sluice::http
