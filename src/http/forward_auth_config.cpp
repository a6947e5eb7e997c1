#include "sluice/http/forward_auth_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <exception>
#include <limits>
#include <span>
#include <utility>

#include "http/decision_codec.hpp"
#include "http/header_text.hpp"
#include "sluice/common/value_parsers.hpp"
#include "sluice/common/yaml_reader.hpp"

namespace sluice::http {
namespace {

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

// --- YAML ---------------------------------------------------------------------------

// Reads the `forward_auth:` mapping with the common YAML reader (its typed reads, key checks
// and locations); stops at the first error, which names its location and key path.
class ConfigReader {
 public:
  explicit ConfigReader(std::string_view file)
      : reader_(std::string(file), errors_, YamlReader::Naming::kPath) {}

  Error error(const YAML::Node& node, std::string_view path, std::string_view message) const {
    return invalid(
        LocatedError{reader_.at(node), qualified(path) + ": " + std::string(message)}.toString());
  }

  Status expectKeys(const YAML::Node& node, std::string_view path,
                    std::initializer_list<std::string_view> allowed) const {
    if (!node.IsMap()) {
      return error(node, path, "must be a mapping");
    }
    std::string expected;
    for (std::string_view name : allowed) {
      expected += expected.empty() ? "" : ", ";
      expected += name;
    }
    const std::string where = "in " + qualified(path);
    const KeySet keys{
        std::span(allowed.begin(), allowed.size()), where, [&](const std::string& key) {
          return qualified(join(path, key)) + ": unknown key (expected one of: " + expected + ")";
        }};
    reader_.readFields(node, keys);
    return firstError();
  }

  Result<std::string> string(const YAML::Node& node, std::string_view path,
                             bool allow_empty = false) const {
    auto text = reader_.readString(Field{node, node}, qualified(path));
    if (!text) {
      return firstError().error();
    }
    if (!allow_empty && text->empty()) {
      return error(node, path, "must not be empty");
    }
    return std::move(*text);
  }

  Result<bool> boolean(const YAML::Node& node, std::string_view path) const {
    auto value = reader_.readBool(Field{node, node}, qualified(path));
    if (!value) {
      return firstError().error();
    }
    return *value;
  }

  Result<int> integer(const YAML::Node& node, std::string_view path) const {
    auto value =
        reader_.readInteger(Field{node, node}, qualified(path), 1, std::numeric_limits<int>::max());
    if (!value) {
      return firstError().error();
    }
    return static_cast<int>(*value);
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
  static std::string qualified(std::string_view path) {
    return path.empty() ? std::string("forward_auth") : "forward_auth." + std::string(path);
  }
  /// The first error the reader reported, as a Status.
  Status firstError() const {
    if (errors_.empty()) {
      return {};
    }
    return invalid(errors_.front().toString());
  }

  // The reader reports into errors_; both are mutable because reading is not a change of
  // the ConfigReader's meaning (its methods are const for its callers).
  mutable std::vector<LocatedError> errors_;
  mutable YamlReader reader_;
};

// The domain, the deny status and where the original request is read from.
Status readRequestKeys(const ConfigReader& reader, const YAML::Node& node,
                       ForwardAuthConfig& config) {
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
  return {};
}

// Who the client is: its sources, and the proxies whose address header is believed.
Status readClientKeys(const ConfigReader& reader, const YAML::Node& node,
                      ForwardAuthConfig& config) {
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
  return {};
}

Status readDescriptorKeys(const ConfigReader& reader, const YAML::Node& node,
                          ForwardAuthConfig& config) {
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
  return {};
}

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
  for (auto* read : {readRequestKeys, readClientKeys, readDescriptorKeys}) {
    if (auto status = read(reader, node, config); !status) {
      return status.error();
    }
  }
  return config;
}

Result<std::vector<Attribute>> parseClientList(std::string_view text) {
  std::vector<Attribute> sources;
  for (std::string_view item : splitList(text)) {
    item = trim(item);
    if (item.empty()) {
      continue;
    }
    const std::size_t colon = item.find(':');
    const std::string_view kind = item.substr(0, colon);
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

Result<std::vector<IpNetwork>> parseNetworkList(std::string_view text) {
  std::vector<IpNetwork> networks;
  for (std::string_view item : splitList(text)) {
    if (trim(item).empty()) {
      continue;
    }
    auto network = parseIpNetwork(trim(item));
    if (!network) {
      return network.error();
    }
    networks.push_back(*network);
  }
  return networks;
}

Result<int> parseDenyStatus(std::string_view text) {
  auto status = parseInteger<int>(trim(text), 400, 599);
  if (!status || trim(text).size() != 3) {
    return invalid("forward-auth deny status '" + std::string(text) +
                   "' must be an HTTP error status, 400..599 (403 for nginx auth_request)");
  }
  return *status;
}

/// A setter that parses with `parse` and stores the value in `target`.
template <typename T, typename Parse>
FlagSetter parsedInto(T& target, Parse parse) {
  return [&target, parse](std::string_view value) -> Status {
    auto parsed = parse(value);
    if (!parsed) {
      return parsed.error();
    }
    target = std::move(*parsed);
    return {};
  };
}

}  // namespace

Result<ForwardAuthConfig> parseForwardAuthConfig(const YAML::Node& node, std::string_view file) {
  try {
    return readConfig(node, file);
  } catch (const std::exception& e) {
    // yaml-cpp throws on malformed nodes; report it as a config error, never crash.
    return invalid(std::string(file) + ": forward_auth: " + e.what());
  }
}

// Declarative table: the flags, one entry each (tests/tools/check_sizes.py).
void addForwardAuthFlags(FlagRegistry& registry, ForwardAuthConfig& config) {
  registry.section("Forward auth (/check; the forward_auth: section of --config has more)");
  registry.add({.name = "forward-auth-domain",
                .metavar = "NAME",
                .help = "/check: the domain (default: forward_auth.domain, else the default "
                        "domain)",
                .set = [&config](std::string_view value) -> Status {
                  config.domain = std::string(trim(value));
                  return {};
                }});
  registry.add({.name = "forward-auth-deny-status",
                .metavar = "STATUS",
                .help = "/check: the answer to a denied request (default 429; 403 for nginx "
                        "auth_request)",
                .set = parsedInto(config.deny_status, parseDenyStatus)});
  registry.add({.name = "forward-auth-client",
                .metavar = "SOURCES",
                .help = "/check: the client id, first source with a value, e.g. "
                        "header:X-User-Id,cookie:sid,ip (default ip)",
                .set = parsedInto(config.client, parseClientList)});
  registry.add({.name = "trusted-proxies",
                .metavar = "CIDRS",
                .help = "/check: peers whose X-Forwarded-For is believed, e.g. "
                        "10.0.0.0/8,127.0.0.1 (default none)",
                .set = parsedInto(config.trusted_proxies, parseNetworkList)});
}

Status applyForwardAuthOption(ForwardAuthConfig& config, std::string_view option,
                              std::string_view value) {
  FlagRegistry registry;
  addForwardAuthFlags(registry, config);
  const std::string name =
      option == "trusted-proxies" ? std::string(option) : "forward-auth-" + std::string(option);
  const Flag* flag = registry.find(name);
  if (flag == nullptr) {
    return invalid("unknown forward-auth option '" + std::string(option) + "'");
  }
  return flag->set(value);
}

}  // namespace sluice::http
