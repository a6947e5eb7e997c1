#include "http/forward_auth.hpp"

#include <arpa/inet.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <exception>
#include <memory>
#include <utility>

#include "common/hex.hpp"
#include "http/decision_codec.hpp"

namespace sluice::http {
namespace {

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

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

std::optional<AttributeSource> parseSource(std::string_view text) {
  static constexpr std::pair<std::string_view, AttributeSource> kNames[] = {
      {"path", AttributeSource::kPath},     {"method", AttributeSource::kMethod},
      {"header", AttributeSource::kHeader}, {"cookie", AttributeSource::kCookie},
      {"query", AttributeSource::kQuery},   {"client_ip", AttributeSource::kClientIp},
      {"ip", AttributeSource::kClientIp},
  };
  for (const auto& [name, source] : kNames) {
    if (text == name) {
      return source;
    }
  }
  return std::nullopt;
}

bool needsName(AttributeSource source) {
  return source == AttributeSource::kHeader || source == AttributeSource::kCookie ||
         source == AttributeSource::kQuery;
}

bool isClientSource(AttributeSource source) {
  return needsName(source) || source == AttributeSource::kClientIp;
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

// --- YAML ---------------------------------------------------------------------------

// Reads the `forward_auth:` mapping; every error carries its location and key path.
class ConfigReader {
 public:
  explicit ConfigReader(std::string_view file) : file_(file) {}

  Error error(const YAML::Node& node, std::string_view path, std::string_view message) const {
    const YAML::Mark mark = node.Mark();
    std::string where = std::string(file_);
    if (mark.line >= 0) {
      where += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
    }
    return invalid(where + ": forward_auth" + (path.empty() ? "" : ".") + std::string(path) + ": " +
                   std::string(message));
  }

  Status expectKeys(const YAML::Node& node, std::string_view path,
                    std::initializer_list<std::string_view> allowed) const {
    if (!node.IsMap()) {
      return error(node, path, "must be a mapping");
    }
    for (const auto& item : node) {
      const std::string key = item.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string expected;
        for (std::string_view name : allowed) {
          expected += expected.empty() ? "" : ", ";
          expected += name;
        }
        return error(item.first, join(path, key),
                     "unknown key (expected one of: " + expected + ")");
      }
    }
    return {};
  }

  Result<std::string> string(const YAML::Node& node, std::string_view path,
                             bool allow_empty = false) const {
    if (!node.IsScalar()) {
      return error(node, path, "must be a string");
    }
    if (!allow_empty && node.Scalar().empty()) {
      return error(node, path, "must not be empty");
    }
    return node.Scalar();
  }

  Result<bool> boolean(const YAML::Node& node, std::string_view path) const {
    bool value = false;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
      return error(node, path, "must be true or false");
    }
    return value;
  }

  Result<int> integer(const YAML::Node& node, std::string_view path) const {
    int value = 0;
    if (!node.IsScalar() || !YAML::convert<int>::decode(node, value)) {
      return error(node, path, "must be an integer");
    }
    return value;
  }

  Result<std::vector<std::string>> strings(const YAML::Node& node, std::string_view path) const {
    if (!node.IsSequence()) {
      return error(node, path, "must be a list of strings");
    }
    std::vector<std::string> out;
    for (std::size_t i = 0; i < node.size(); ++i) {
      auto item = string(node[i], index(path, i));
      if (!item) {
        return item.error();
      }
      out.push_back(std::move(*item));
    }
    return out;
  }

  // {from: <source>, name: <name>, default: <value>}, or for entries {value: <literal>}.
  Result<Attribute> attribute(const YAML::Node& node, std::string_view path, bool client) const {
    Attribute attribute;
    if (!client && node["value"]) {
      if (node["from"] || node["name"] || node["default"]) {
        return error(node, path, "`value` (a fixed value) excludes from, name and default");
      }
      auto literal = string(node["value"], join(path, "value"));
      if (!literal) {
        return literal.error();
      }
      attribute.source = AttributeSource::kLiteral;
      attribute.name = std::move(*literal);
      return attribute;
    }
    if (!node["from"]) {
      return error(node, path, client ? "missing `from`" : "missing `from` or `value`");
    }
    auto from = string(node["from"], join(path, "from"));
    if (!from) {
      return from.error();
    }
    auto source = parseSource(*from);
    if (!source || (client && !isClientSource(*source))) {
      return error(node["from"], join(path, "from"),
                   "unknown source '" + *from +
                       (client ? "' (expected header, cookie, query or client_ip)"
                               : "' (expected path, method, header, cookie, query or client_ip)"));
    }
    attribute.source = *source;
    if (needsName(*source)) {
      if (!node["name"]) {
        return error(node, path, "`from: " + *from + "` needs a `name`");
      }
      auto name = string(node["name"], join(path, "name"));
      if (!name) {
        return name.error();
      }
      attribute.name = std::move(*name);
    } else if (node["name"]) {
      return error(node["name"], join(path, "name"), "`from: " + *from + "` takes no name");
    }
    if (node["default"]) {
      if (client) {
        return error(node["default"], join(path, "default"),
                     "not allowed for a client source (list another source instead)");
      }
      auto fallback = string(node["default"], join(path, "default"));
      if (!fallback) {
        return fallback.error();
      }
      attribute.fallback = std::move(*fallback);
    }
    return attribute;
  }

  Result<DescriptorSpec> descriptor(const YAML::Node& node, std::string_view path) const {
    YAML::Node entries = node;
    std::string entries_path(path);
    if (node.IsMap()) {
      if (auto keys = expectKeys(node, path, {"entries"}); !keys) {
        return keys.error();
      }
      entries = node["entries"];
      entries_path = join(path, "entries");
    }
    if (!entries.IsSequence() || entries.size() == 0) {
      return error(entries, entries_path, "must be a non-empty list of entries");
    }
    if (entries.size() > kMaxEntries) {
      return error(entries, entries_path,
                   "has more than " + std::to_string(kMaxEntries) + " entries");
    }
    DescriptorSpec spec;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const YAML::Node entry = entries[i];
      const std::string entry_path = index(entries_path, i);
      if (auto keys = expectKeys(entry, entry_path, {"key", "from", "name", "default", "value"});
          !keys) {
        return keys.error();
      }
      if (!entry["key"]) {
        return error(entry, entry_path, "missing `key`");
      }
      auto key = string(entry["key"], join(entry_path, "key"));
      if (!key) {
        return key.error();
      }
      auto value = attribute(entry, entry_path, false);
      if (!value) {
        return value.error();
      }
      spec.entries.push_back(EntrySpec{std::move(*key), std::move(*value)});
    }
    return spec;
  }

  static std::string join(std::string_view path, std::string_view key) {
    return path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
  }
  static std::string index(std::string_view path, std::size_t i) {
    return std::string(path) + "[" + std::to_string(i) + "]";
  }

 private:
  std::string_view file_;
};

Result<ForwardAuthConfig> readConfig(const YAML::Node& node, std::string_view file) {
  const ConfigReader reader(file);
  ForwardAuthConfig config;
  if (!node || node.IsNull()) {
    return config;
  }
  if (auto keys = reader.expectKeys(
          node, "",
          {"domain", "domain_header", "deny_status", "uri_headers", "method_headers",
           "normalize_path", "client", "trusted_proxies", "client_ip_header", "descriptors"});
      !keys) {
    return keys.error();
  }
  if (node["domain"]) {
    auto domain = reader.string(node["domain"], "domain", true);
    if (!domain) {
      return domain.error();
    }
    config.domain = std::move(*domain);
  }
  if (node["domain_header"]) {
    auto header = reader.string(node["domain_header"], "domain_header", true);
    if (!header) {
      return header.error();
    }
    config.domain_header = std::move(*header);
  }
  if (node["deny_status"]) {
    auto status = reader.integer(node["deny_status"], "deny_status");
    if (!status) {
      return status.error();
    }
    if (*status < 400 || *status > 599) {
      return reader.error(node["deny_status"], "deny_status",
                          "must be an HTTP error status, 400..599 (403 for nginx auth_request)");
    }
    config.deny_status = *status;
  }
  for (auto [key, target] : {std::pair{"uri_headers", &config.uri_headers},
                             std::pair{"method_headers", &config.method_headers}}) {
    if (node[key]) {
      auto list = reader.strings(node[key], key);
      if (!list) {
        return list.error();
      }
      *target = std::move(*list);
    }
  }
  if (node["normalize_path"]) {
    auto normalize = reader.boolean(node["normalize_path"], "normalize_path");
    if (!normalize) {
      return normalize.error();
    }
    config.normalize_path = *normalize;
  }
  if (node["client"]) {
    const YAML::Node client = node["client"];
    if (!client.IsSequence()) {
      return reader.error(client, "client",
                          "must be a list of sources, e.g. [{from: header, name: X-User-Id}, "
                          "{from: client_ip}]");
    }
    config.client.clear();
    for (std::size_t i = 0; i < client.size(); ++i) {
      const std::string path = ConfigReader::index("client", i);
      if (auto keys = reader.expectKeys(client[i], path, {"from", "name"}); !keys) {
        return keys.error();
      }
      auto source = reader.attribute(client[i], path, true);
      if (!source) {
        return source.error();
      }
      config.client.push_back(std::move(*source));
    }
  }
  if (node["trusted_proxies"]) {
    auto list = reader.strings(node["trusted_proxies"], "trusted_proxies");
    if (!list) {
      return list.error();
    }
    for (std::size_t i = 0; i < list->size(); ++i) {
      auto network = parseIpNetwork((*list)[i]);
      if (!network) {
        return reader.error(node["trusted_proxies"][i], ConfigReader::index("trusted_proxies", i),
                            network.error().message);
      }
      config.trusted_proxies.push_back(*network);
    }
  }
  if (node["client_ip_header"]) {
    auto header = reader.string(node["client_ip_header"], "client_ip_header");
    if (!header) {
      return header.error();
    }
    config.client_ip_header = std::move(*header);
  }
  if (node["descriptors"]) {
    const YAML::Node descriptors = node["descriptors"];
    if (!descriptors.IsSequence()) {
      return reader.error(descriptors, "descriptors", "must be a list of descriptors");
    }
    if (descriptors.size() > kMaxDescriptors) {
      return reader.error(descriptors, "descriptors",
                          "has more than " + std::to_string(kMaxDescriptors) + " descriptors");
    }
    for (std::size_t i = 0; i < descriptors.size(); ++i) {
      auto spec = reader.descriptor(descriptors[i], ConfigReader::index("descriptors", i));
      if (!spec) {
        return spec.error();
      }
      config.descriptors.push_back(std::move(*spec));
    }
  }
  return config;
}

Result<std::vector<Attribute>> parseClientList(std::string_view text) {
  std::vector<Attribute> sources;
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    std::size_t colon = item.find(':');
    std::string_view kind = item.substr(0, colon);
    auto source = parseSource(kind);
    if (!source || !isClientSource(*source)) {
      return invalid("unknown client source '" + std::string(item) +
                     "' (expected header:<name>, cookie:<name>, query:<name> or ip)");
    }
    Attribute attribute{*source, "", std::nullopt};
    if (needsName(*source)) {
      if (colon == std::string_view::npos || colon + 1 == item.size()) {
        return invalid("client source '" + std::string(item) + "' needs a name, e.g. " +
                       std::string(kind) + ":X-User-Id");
      }
      attribute.name = std::string(item.substr(colon + 1));
    } else if (colon != std::string_view::npos) {
      return invalid("client source '" + std::string(item) + "' takes no name");
    }
    sources.push_back(std::move(attribute));
  }
  if (sources.empty()) {
    return invalid("the client source list is empty");
  }
  return sources;
}

}  // namespace

// --- Addresses ------------------------------------------------------------------------

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

// --- Request attributes ---------------------------------------------------------------

std::string_view attributeSourceName(AttributeSource source) {
  switch (source) {
    case AttributeSource::kPath:
      return "path";
    case AttributeSource::kMethod:
      return "method";
    case AttributeSource::kHeader:
      return "header";
    case AttributeSource::kCookie:
      return "cookie";
    case AttributeSource::kQuery:
      return "query";
    case AttributeSource::kClientIp:
      return "client_ip";
    case AttributeSource::kLiteral:
      return "value";
  }
  return "unknown";
}

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
  if (!peer_address) {
    return std::string(trim(peer));
  }
  auto trusted = [&](const IpAddress& address) {
    return std::any_of(config.trusted_proxies.begin(), config.trusted_proxies.end(),
                       [&](const IpNetwork& network) { return network.contains(address); });
  };
  if (!trusted(*peer_address)) {
    return peer_address->toString();
  }
  std::vector<std::string_view> hops;
  forEachListElement(request, config.client_ip_header,
                     [&](std::string_view hop) { hops.push_back(hop); });
  // From the nearest hop outwards: the first address that is not a trusted proxy is the
  // client; what lies beyond it was written by the client and may be forged.
  IpAddress client = *peer_address;
  for (auto hop = hops.rbegin(); hop != hops.rend(); ++hop) {
    std::optional<IpAddress> address = parseIpAddress(*hop);
    if (!address) {
      break;
    }
    client = *address;
    if (!trusted(client)) {
      break;
    }
  }
  return client.toString();
}

DecisionRequest buildForwardAuthRequest(const ForwardAuthConfig& config, const Request& request,
                                        std::string_view peer, std::string_view default_domain) {
  DecisionRequest decision;
  const OriginalRequest original = originalRequest(config, request);
  const std::string client_ip = clientIp(config, request, peer);

  std::string_view domain_override;
  if (!config.domain_header.empty()) {
    domain_override = request.header(config.domain_header);
  }
  if (!domain_override.empty()) {
    decision.domain = std::string(domain_override);
  } else {
    decision.domain = config.domain.empty() ? std::string(default_domain) : config.domain;
  }

  for (const auto& source : config.client) {
    if (auto value = attributeValue(source, request, original, client_ip)) {
      decision.client_id = std::move(*value);
      break;
    }
  }

  for (const auto& spec : config.descriptors) {
    Descriptor descriptor;
    for (const auto& entry : spec.entries) {
      std::optional<std::string> value = attributeValue(entry.value, request, original, client_ip);
      if (!value) {
        descriptor.clear();
        break;
      }
      descriptor.push_back(Entry{entry.key, std::move(*value)});
    }
    if (!descriptor.empty()) {
      decision.descriptors.push_back(std::move(descriptor));
    }
  }
  return decision;
}

// --- Configuration ----------------------------------------------------------------------

Result<ForwardAuthConfig> parseForwardAuthConfig(const YAML::Node& node, std::string_view file) {
  try {
    return readConfig(node, file);
  } catch (const std::exception& e) {
    // yaml-cpp throws on malformed nodes; report it as a config error, never crash.
    return invalid(std::string(file) + ": forward_auth: " + e.what());
  }
}

Status applyForwardAuthOption(ForwardAuthConfig& config, std::string_view option,
                              std::string_view value) {
  if (option == "domain") {
    config.domain = std::string(trim(value));
    return {};
  }
  if (option == "deny-status") {
    std::string_view digits = trim(value);
    int status = 0;
    bool ok = digits.size() == 3 && std::all_of(digits.begin(), digits.end(),
                                                [](char ch) { return ch >= '0' && ch <= '9'; });
    if (ok) {
      status = std::stoi(std::string(digits));
    }
    if (!ok || status < 400 || status > 599) {
      return invalid("forward-auth deny status '" + std::string(value) +
                     "' must be an HTTP error status, 400..599 (403 for nginx auth_request)");
    }
    config.deny_status = status;
    return {};
  }
  if (option == "trusted-proxies") {
    std::vector<IpNetwork> networks;
    std::string_view rest = value;
    while (!trim(rest).empty()) {
      std::size_t comma = rest.find(',');
      auto network = parseIpNetwork(trim(rest.substr(0, comma)));
      if (!network) {
        return network.error();
      }
      networks.push_back(*network);
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
    config.trusted_proxies = std::move(networks);
    return {};
  }
  if (option == "client") {
    auto sources = parseClientList(value);
    if (!sources) {
      return sources.error();
    }
    config.client = std::move(*sources);
    return {};
  }
  return invalid("unknown forward-auth option '" + std::string(option) + "'");
}

// --- Answer -------------------------------------------------------------------------------

Response forwardAuthResponse(const ForwardAuthConfig& config, const DecisionRequest& request,
                             const Decision& decision) {
  Response response = decisionResponse(request, decision);
  if (!decision.allowed) {
    response.status = config.deny_status;
  }
  return response;
}

// --- Endpoint -----------------------------------------------------------------------------

void addForwardAuthRoutes(Router& router, const HandlerContext& context) {
  auto config =
      context.forward_auth ? context.forward_auth : std::make_shared<const ForwardAuthConfig>();
  Handler check = [context, config](const Request& request, Respond respond) {
    DecisionRequest decision_request =
        buildForwardAuthRequest(*config, request, request.peer, context.default_domain);
    // The request moves into the service and comes back inside the decision: no copy.
    context.decisions->decide(std::move(decision_request),
                              [config, respond = std::move(respond)](Result<Decision> decision) {
                                if (!decision) {
                                  respond(decisionErrorResponse(decision.error()));
                                  return;
                                }
                                respond(forwardAuthResponse(*config, decision->request, *decision));
                              });
  };
  // Any method: proxies ask with the original method (Envoy) or GET (nginx, Traefik).
  router.add("*", std::string(kCheckPath), check);
  router.add("*", std::string(kCheckPath) + "/*", check);
}

}  // namespace sluice::http
