#include "simulate/log_map.hpp"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <vector>

#include "sluice/common/yaml_document.hpp"

namespace sluice::simulate {
namespace {

using nlohmann::json;

enum class TimeFormat { kRfc3339, kEpochSeconds, kEpochMillis, kEpochMicros };

/// A value taken from the line (`field`, a member name or a dotted path into nested
/// objects) or written in the map (`value`).
struct Source {
  std::string field;
  std::optional<std::string> value;
};

struct MappedEntry {
  std::string key;
  Source source;
};

/// The text of a member: strings as they are, numbers and booleans printed; nullopt when
/// absent, null, empty or "-" (how nginx and Envoy write a missing value).
std::optional<std::string> textOf(const json& line, const Source& source) {
  if (source.value) {
    return source.value;
  }
  const json* node = nullptr;
  auto direct = line.find(source.field);
  if (direct != line.end()) {
    node = &*direct;
  } else {
    node = &line;
    std::string_view path = source.field;
    while (node != nullptr && !path.empty()) {
      const std::size_t dot = path.find('.');
      const std::string part(path.substr(0, dot));
      if (!node->is_object()) {
        node = nullptr;
        break;
      }
      auto it = node->find(part);
      node = it == node->end() ? nullptr : &*it;
      path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
    }
  }
  if (node == nullptr || node->is_null()) {
    return std::nullopt;
  }
  std::string text;
  if (node->is_string()) {
    text = node->get<std::string>();
  } else if (node->is_number_integer()) {
    text = std::to_string(node->get<std::int64_t>());
  } else if (node->is_number()) {
    text = node->dump();
  } else if (node->is_boolean()) {
    text = node->get<bool>() ? "true" : "false";
  } else {
    return std::nullopt;
  }
  if (text.empty() || text == "-") {
    return std::nullopt;
  }
  return text;
}

class YamlLogMap final : public LogMap {
 public:
  TimeFormat time_format = TimeFormat::kRfc3339;
  Source time;
  Source domain;
  std::optional<Source> client;
  std::optional<Source> hits;
  std::vector<std::vector<MappedEntry>> descriptors;

  bool parse(std::string_view line, LoggedRequest& out, std::string& error) const override {
    json doc = json::parse(line.begin(), line.end(), nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
      error = "not a JSON object";
      return false;
    }
    auto when = textOf(doc, time);
    if (!when) {
      error = "no time in \"" + time.field + "\"";
      return false;
    }
    if (!parseTime(*when, out.time_us)) {
      error = "\"" + time.field + "\" is not a time: \"" + *when + "\"";
      return false;
    }
    DecisionRequest& request = out.request;
    request.domain = textOf(doc, domain).value_or("");
    if (request.domain.empty()) {
      error = "no domain";
      return false;
    }
    request.client_id = client ? textOf(doc, *client).value_or("") : std::string();
    request.hits = 1;
    if (hits) {
      auto n = textOf(doc, *hits);
      if (n) {
        try {
          request.hits = std::stoll(*n);
        } catch (const std::exception&) {
          error = "hits is not an integer: \"" + *n + "\"";
          return false;
        }
      }
    }
    request.descriptors.clear();
    request.descriptor_hits.clear();
    request.descriptor_limits.clear();
    for (const auto& entries : descriptors) {
      Descriptor descriptor;
      bool complete = true;
      for (const MappedEntry& entry : entries) {
        auto value = textOf(doc, entry.source);
        if (!value) {
          // As Envoy's rate limit actions do: a descriptor whose value is missing is not sent.
          complete = false;
          break;
        }
        descriptor.push_back(Entry{entry.key, std::move(*value)});
      }
      if (complete) {
        request.descriptors.push_back(std::move(descriptor));
      }
    }
    out.decision.clear();
    out.rule.clear();
    out.rules_hash.clear();
    return true;
  }

 private:
  bool parseTime(const std::string& text, Micros& out) const {
    if (time_format == TimeFormat::kRfc3339) {
      return parseRfc3339(text, out);
    }
    char* end = nullptr;
    const double number = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || !std::isfinite(number) || number < 0) {
      return false;
    }
    const double scale = time_format == TimeFormat::kEpochSeconds  ? 1e6
                         : time_format == TimeFormat::kEpochMillis ? 1e3
                                                                   : 1.0;
    out = static_cast<Micros>(std::llround(number * scale));
    return true;
  }
};

Error mapError(const std::string& path, const YAML::Mark& mark, const std::string& message) {
  std::string where = path;
  if (mark.line >= 0) {
    where += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
  }
  return makeError(ErrorKind::kInvalidArgument, where + ": " + message);
}

Result<Source> readSource(const std::string& path, const YAML::Node& node, std::string_view what) {
  Source source;
  if (node.IsScalar()) {
    source.field = node.as<std::string>();
    return source;
  }
  if (node.IsMap()) {
    if (node["field"] && node["field"].IsScalar()) {
      source.field = node["field"].as<std::string>();
      return source;
    }
    if (node["value"] && node["value"].IsScalar()) {
      source.value = node["value"].as<std::string>();
      return source;
    }
  }
  return mapError(path, node.Mark(),
                  std::string(what) + ": a field name, {field: NAME} or {value: TEXT}");
}

/// `time_format:` one of the formats the time field may have.
Status readTimeFormat(const std::string& path, const YAML::Node& value, YamlLogMap& map) {
  const std::string format = value.as<std::string>();
  if (format == "rfc3339") {
    map.time_format = TimeFormat::kRfc3339;
  } else if (format == "epoch_seconds") {
    map.time_format = TimeFormat::kEpochSeconds;
  } else if (format == "epoch_millis") {
    map.time_format = TimeFormat::kEpochMillis;
  } else if (format == "epoch_micros") {
    map.time_format = TimeFormat::kEpochMicros;
  } else {
    return mapError(path, value.Mark(),
                    "time_format: rfc3339, epoch_seconds, epoch_millis or epoch_micros, got \"" +
                        format + "\"");
  }
  return {};
}

/// `descriptors:` a list of mappings, entry key -> where its value is.
Status readDescriptors(const std::string& path, const YAML::Node& value, YamlLogMap& map) {
  if (!value.IsSequence()) {
    return mapError(path, value.Mark(),
                    "descriptors: a list of descriptors, each a mapping entry key: field");
  }
  for (const auto& descriptor : value) {
    if (!descriptor.IsMap() || descriptor.size() == 0) {
      return mapError(path, descriptor.Mark(), "a descriptor is a mapping of entry keys to fields");
    }
    std::vector<MappedEntry> entries;
    for (const auto& entry : descriptor) {
      auto source = readSource(path, entry.second, entry.first.as<std::string>());
      if (!source) {
        return source.error();
      }
      entries.push_back(MappedEntry{entry.first.as<std::string>(), *source});
    }
    map.descriptors.push_back(std::move(entries));
  }
  return {};
}

/// One top-level key of the map file.
Status readMapKey(const std::string& path, const YAML::Node& name, const YAML::Node& value,
                  YamlLogMap& map) {
  const std::string key = name.as<std::string>();
  if (key == "time_format") {
    return readTimeFormat(path, value, map);
  }
  if (key == "descriptors") {
    return readDescriptors(path, value, map);
  }
  if (key != "time" && key != "domain" && key != "client" && key != "hits") {
    return mapError(
        path, name.Mark(),
        "unknown key \"" + key + "\" (time, time_format, domain, client, hits, descriptors)");
  }
  auto source = readSource(path, value, key);
  if (!source) {
    return source.error();
  }
  if (key == "time") {
    map.time = *source;
  } else if (key == "domain") {
    map.domain = *source;
  } else if (key == "client") {
    map.client = *source;
  } else {
    map.hits = *source;
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<LogMap>> LogMap::load(const std::string& path) {
  auto map = std::make_unique<YamlLogMap>();
  std::ifstream file(path, std::ios::binary);
  std::ostringstream content;
  content << file.rdbuf();
  if (!file) {
    return makeError(ErrorKind::kInvalidArgument, path + ": cannot read the map file");
  }
  YamlDocument document =
      parseYamlDocument(path, content.str(), "only one YAML document per map file");
  if (document.error) {
    return makeError(ErrorKind::kInvalidArgument, document.error->toString());
  }
  try {
    const YAML::Node& root = document.root;
    if (!root.IsMap()) {
      return mapError(path, root.Mark(), "a mapping is expected");
    }
    for (const auto& item : root) {
      if (Status status = readMapKey(path, item.first, item.second, *map); !status) {
        return status.error();
      }
    }
  } catch (const YAML::Exception& e) {
    return mapError(path, e.mark, e.msg);
  }
  if (map->time.field.empty() && !map->time.value) {
    return makeError(ErrorKind::kInvalidArgument, path + ": time: which field holds the time");
  }
  if (map->domain.field.empty() && !map->domain.value) {
    return makeError(ErrorKind::kInvalidArgument,
                     path + ": domain: a field, or {value: DOMAIN} for every line");
  }
  return std::unique_ptr<LogMap>(std::move(map));
}

}  // namespace sluice::simulate
