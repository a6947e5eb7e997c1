#include "http/request_attributes.hpp"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "http/header_text.hpp"
#include "sluice/common/hex.hpp"
#include "sluice/http/ip_network.hpp"

namespace sluice::http {
namespace {

// Calls `each` with every comma-separated element of every header named `name`, in order.
template <typename Fn>
void forEachListElement(const Request& request, std::string_view name, Fn each) {
  for (const auto& header : request.headers) {
    if (!equalsIgnoreCase(header.name, name)) {
      continue;
    }
    std::string_view rest = header.value;
    while (true) {
      std::size_t comma = rest.find(',');
      each(trim(rest.substr(0, comma)));
      if (comma == std::string_view::npos) {
        break;
      }
      rest.remove_prefix(comma + 1);
    }
  }
}

bool isUnreserved(unsigned char ch) {
  return std::isalnum(ch) != 0 || ch == '-' || ch == '.' || ch == '_' || ch == '~';
}

std::string percentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (ch == '%' && i + 2 < text.size()) {
      int hi = hexValue(text[i + 1]);
      int lo = hexValue(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += (plus_is_space && ch == '+') ? ' ' : ch;
  }
  return out;
}

// Decodes %XX of unreserved characters, upper-cases the other escapes, merges slashes.
std::string decodeUnreservedAndMergeSlashes(std::string_view path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(path.size() + 1);
  for (std::size_t i = 0; i < path.size(); ++i) {
    char ch = path[i];
    if (ch == '%' && i + 2 < path.size()) {
      int hi = hexValue(path[i + 1]);
      int lo = hexValue(path[i + 2]);
      if (hi >= 0 && lo >= 0) {
        auto decoded = static_cast<unsigned char>(hi * 16 + lo);
        i += 2;
        if (isUnreserved(decoded)) {
          ch = static_cast<char>(decoded);
        } else {
          out += '%';
          out += kHex[hi];
          out += kHex[lo];
          continue;
        }
      }
    }
    if (ch == '/' && !out.empty() && out.back() == '/') {
      continue;
    }
    out += ch;
  }
  return out;
}
// The value of one attribute of the request; nullopt when the request lacks it.
std::optional<std::string> attributeValue(const Attribute& attribute, const Request& request,
                                          const OriginalRequest& original,
                                          const std::string& client_ip) {
  std::optional<std::string> value;
  switch (attribute.source) {
    case AttributeSource::kPath:
      value = original.path;
      break;
    case AttributeSource::kMethod:
      value = original.method;
      break;
    case AttributeSource::kHeader: {
      std::string_view header = request.header(attribute.name);
      if (!header.empty()) {
        value = std::string(header);
      }
      break;
    }
    case AttributeSource::kCookie:
      value = cookieValue(request, attribute.name);
      break;
    case AttributeSource::kQuery:
      value = queryValue(original.query, attribute.name);
      break;
    case AttributeSource::kClientIp:
      value = client_ip;
      break;
    case AttributeSource::kLiteral:
      value = attribute.name;
      break;
  }
  if (value && value->empty()) {
    value.reset();
  }
  return value ? value : attribute.fallback;
}

}  // namespace

std::string normalizePath(std::string_view path) {
  const std::string merged = decodeUnreservedAndMergeSlashes(path);
  std::string_view rest = merged;
  if (rest.starts_with('/')) {
    rest.remove_prefix(1);
  }
  std::vector<std::string_view> segments;
  bool trailing_slash = false;
  while (true) {
    std::size_t slash = rest.find('/');
    std::string_view segment = rest.substr(0, slash);
    bool last = slash == std::string_view::npos;
    if (segment == "..") {
      if (!segments.empty()) {
        segments.pop_back();
      }
      trailing_slash = last;
    } else if (segment == "." || segment.empty()) {
      trailing_slash = last;
    } else {
      segments.push_back(segment);
      trailing_slash = false;
    }
    if (last) {
      break;
    }
    rest.remove_prefix(slash + 1);
  }
  std::string out;
  for (std::string_view segment : segments) {
    out += '/';
    out += segment;
  }
  if (out.empty() || trailing_slash) {
    out += '/';
  }
  return out;
}

OriginalRequest originalRequest(const ForwardAuthConfig& config, const Request& request) {
  OriginalRequest original;
  std::string uri;
  for (const auto& name : config.uri_headers) {
    if (std::string_view value = request.header(name); !value.empty()) {
      uri = std::string(value);
      break;
    }
  }
  if (uri.empty()) {
    std::string_view target = request.target;
    if (target.starts_with(kCheckPath)) {
      target.remove_prefix(kCheckPath.size());
    }
    uri = target.starts_with('/') ? std::string(target) : "/" + std::string(target);
  }
  // An absolute-form URI (Traefik may forward one): keep its path and query.
  if (std::size_t scheme = uri.find("://"); scheme != std::string::npos && !uri.starts_with('/')) {
    std::size_t path_start = uri.find('/', scheme + 3);
    uri = path_start == std::string::npos ? "/" : uri.substr(path_start);
  }
  if (std::size_t fragment = uri.find('#'); fragment != std::string::npos) {
    uri.resize(fragment);
  }
  std::size_t question = uri.find('?');
  std::string_view path = std::string_view(uri).substr(0, question);
  if (question != std::string::npos) {
    original.query = uri.substr(question + 1);
  }
  original.path = config.normalize_path ? normalizePath(path) : std::string(path);
  if (original.path.empty()) {
    original.path = "/";
  }
  for (const auto& name : config.method_headers) {
    if (std::string_view value = request.header(name); !value.empty()) {
      original.method = std::string(value);
      break;
    }
  }
  if (original.method.empty()) {
    original.method = request.method;
  }
  return original;
}

std::optional<std::string> cookieValue(const Request& request, std::string_view name) {
  for (const auto& header : request.headers) {
    if (!equalsIgnoreCase(header.name, "Cookie")) {
      continue;
    }
    std::string_view rest = header.value;
    while (!rest.empty()) {
      std::size_t semicolon = rest.find(';');
      std::string_view pair = trim(rest.substr(0, semicolon));
      rest = semicolon == std::string_view::npos ? std::string_view{} : rest.substr(semicolon + 1);
      std::size_t equals = pair.find('=');
      if (equals == std::string_view::npos || trim(pair.substr(0, equals)) != name) {
        continue;
      }
      std::string_view value = trim(pair.substr(equals + 1));
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
        value = value.substr(1, value.size() - 2);
      }
      return std::string(value);
    }
  }
  return std::nullopt;
}

std::optional<std::string> queryValue(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    std::size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    std::size_t equals = pair.find('=');
    if (percentDecode(pair.substr(0, equals), true) != name) {
      continue;
    }
    return equals == std::string_view::npos ? std::string()
                                            : percentDecode(pair.substr(equals + 1), true);
  }
  return std::nullopt;
}

std::string clientIp(const ForwardAuthConfig& config, const Request& request,
                     std::string_view peer) {
  const std::optional<IpAddress> peer_address = parseIpAddress(peer);
  // A unix-socket peer has no address; whoever may connect (the socket file's mode) is a
  // local proxy, trusted like those in trusted_proxies.
  const bool unix_peer = !peer_address && peer == kUnixSocketPeer;
  if (!peer_address && !unix_peer) {
    return std::string(trim(peer));
  }
  auto trusted = [&](const IpAddress& address) {
    return std::any_of(config.trusted_proxies.begin(), config.trusted_proxies.end(),
                       [&](const IpNetwork& network) { return network.contains(address); });
  };
  if (peer_address && !trusted(*peer_address)) {
    return peer_address->toString();
  }
  std::vector<std::string_view> hops;
  forEachListElement(request, config.client_ip_header,
                     [&](std::string_view hop) { hops.push_back(hop); });
  // From the nearest hop outwards: the first address that is not a trusted proxy is the
  // client; what lies beyond it was written by the client and may be forged.
  std::optional<IpAddress> client = peer_address;
  for (auto hop = hops.rbegin(); hop != hops.rend(); ++hop) {
    std::optional<IpAddress> address = parseIpAddress(*hop);
    if (!address) {
      break;
    }
    client = address;
    if (!trusted(*client)) {
      break;
    }
  }
  // A unix-socket peer without a usable address header: no client address (no value).
  return client ? client->toString() : std::string();
}

DecisionRequest buildForwardAuthRequest(const ForwardAuthConfig& config, const Request& request,
                                        std::string_view peer, std::string_view default_domain) {
  // This thread's spare (decision.hpp): its descriptors and entries are refilled in place,
  // so that a warm /check builds its request without allocating.
  DecisionRequest decision = takeSpareRequest();
  const OriginalRequest original = originalRequest(config, request);
  const std::string client_ip = clientIp(config, request, peer);

  std::string_view domain_override;
  if (!config.domain_header.empty()) {
    domain_override = request.header(config.domain_header);
  }
  if (!domain_override.empty()) {
    decision.domain.assign(domain_override);
  } else {
    decision.domain.assign(config.domain.empty() ? default_domain
                                                 : std::string_view(config.domain));
  }

  for (const auto& source : config.client) {
    if (auto value = attributeValue(source, request, original, client_ip)) {
      decision.client_id = std::move(*value);
      break;
    }
  }

  std::size_t used = 0;  // decision.descriptors filled
  for (const auto& spec : config.descriptors) {
    if (used == decision.descriptors.size()) {
      decision.descriptors.emplace_back();
    }
    Descriptor& descriptor = decision.descriptors[used];
    std::size_t entries = 0;
    bool complete = true;
    for (const auto& entry : spec.entries) {
      std::optional<std::string> value = attributeValue(entry.value, request, original, client_ip);
      if (!value) {
        complete = false;  // a descriptor with a missing value is left out
        break;
      }
      if (entries == descriptor.size()) {
        descriptor.emplace_back();
      }
      Entry& e = descriptor[entries++];
      e.key.assign(entry.key);
      e.value = std::move(*value);
    }
    if (complete && entries > 0) {
      descriptor.resize(entries);
      ++used;
    }
  }
  decision.descriptors.resize(used);
  return decision;
}

}  // namespace sluice::http
