#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/common/result.hpp"

/// IP addresses and CIDR blocks, as forward auth reads them from peers, X-Forwarded-For and
/// the `trusted_proxies` list.
namespace sluice::http {

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

}  // namespace sluice::http
