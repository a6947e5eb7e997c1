#include "sluice/http/ip_network.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "http/header_text.hpp"

namespace sluice::http {
namespace {

std::optional<IpAddress> parseBareAddress(std::string_view text) {
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) {
    return std::nullopt;
  }
  char buffer[INET6_ADDRSTRLEN] = {};
  std::memcpy(buffer, text.data(), text.size());
  IpAddress address;
  if (text.find(':') == std::string_view::npos) {
    if (inet_pton(AF_INET, buffer, address.bytes.data()) != 1) {
      return std::nullopt;
    }
    return address;
  }
  if (inet_pton(AF_INET6, buffer, address.bytes.data()) != 1) {
    return std::nullopt;
  }
  static constexpr std::array<std::uint8_t, 12> kMappedPrefix{0, 0, 0, 0, 0,    0,
                                                              0, 0, 0, 0, 0xff, 0xff};
  if (std::equal(kMappedPrefix.begin(), kMappedPrefix.end(), address.bytes.begin())) {
    std::copy(address.bytes.begin() + 12, address.bytes.end(), address.bytes.begin());
    std::fill(address.bytes.begin() + 4, address.bytes.end(), 0);
    return address;
  }
  address.v4 = false;
  return address;
}

Error invalid(std::string message) {
  return makeError(ErrorKind::kInvalidArgument, std::move(message));
}

}  // namespace

std::string IpAddress::toString() const {
  char buffer[INET6_ADDRSTRLEN] = {};
  inet_ntop(v4 ? AF_INET : AF_INET6, bytes.data(), buffer, sizeof(buffer));
  return buffer;
}

std::optional<IpAddress> parseIpAddress(std::string_view text) {
  text = trim(text);
  if (text.starts_with('[')) {
    std::size_t close = text.find(']');
    if (close == std::string_view::npos) {
      return std::nullopt;
    }
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(':')) {
      return std::nullopt;
    }
    return parseBareAddress(text.substr(1, close - 1));
  }
  std::size_t colon = text.find(':');
  if (colon != std::string_view::npos && text.find(':', colon + 1) == std::string_view::npos) {
    // One colon: an IPv4 address with a port.
    return parseBareAddress(text.substr(0, colon));
  }
  return parseBareAddress(text);
}

bool IpNetwork::contains(const IpAddress& address) const {
  if (address.v4 != base.v4) {
    return false;
  }
  int full_bytes = prefix_length / 8;
  if (!std::equal(base.bytes.begin(), base.bytes.begin() + full_bytes, address.bytes.begin())) {
    return false;
  }
  int rest_bits = prefix_length % 8;
  if (rest_bits == 0) {
    return true;
  }
  auto mask = static_cast<std::uint8_t>(0xff << (8 - rest_bits));
  return (base.bytes[full_bytes] & mask) == (address.bytes[full_bytes] & mask);
}

Result<IpNetwork> parseIpNetwork(std::string_view text) {
  std::string_view trimmed = trim(text);
  std::size_t slash = trimmed.find('/');
  std::string_view address_text = trimmed.substr(0, slash);
  // Only a bare address here: a port or brackets in a CIDR would be a typo.
  std::optional<IpAddress> address;
  if (address_text.find('[') == std::string_view::npos &&
      (address_text.find(':') == std::string_view::npos ||
       address_text.find(':') != address_text.rfind(':'))) {
    address = parseBareAddress(address_text);
  }
  if (!address) {
    return invalid("'" + std::string(text) + "' is not an IP address or CIDR block");
  }
  IpNetwork network{*address, address->v4 ? 32 : 128};
  if (slash != std::string_view::npos) {
    std::string_view length = trimmed.substr(slash + 1);
    int value = 0;
    bool digits =
        !length.empty() && length.size() <= 3 &&
        std::all_of(length.begin(), length.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (digits) {
      for (char ch : length) {
        value = value * 10 + (ch - '0');
      }
    }
    if (!digits || value > network.prefix_length) {
      return invalid("'" + std::string(text) + "': the prefix length must be 0.." +
                     std::to_string(network.prefix_length));
    }
    network.prefix_length = value;
  }
  return network;
}

}  // namespace sluice::http
