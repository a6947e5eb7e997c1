#include "rules/yaml_reader.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <system_error>
#include <utility>

#include "rules/suggest.hpp"

namespace sluice::rules_detail {
namespace {

std::span<const std::string_view> keysOf(Section section) {
  switch (section) {
    case Section::kRoot:
      return kRootKeys;
    case Section::kDescriptor:
      return kDescriptorKeys;
    case Section::kLimit:
      return kLimitKeys;
    case Section::kReplaces:
      return kReplacesKeys;
  }
  return {};
}

std::string_view nameOf(Section section) {
  switch (section) {
    case Section::kRoot:
      return "at the top level";
    case Section::kDescriptor:
      return "in a descriptor";
    case Section::kLimit:
      return "in a rate limit";
    case Section::kReplaces:
      return "in a 'replaces' entry";
  }
  return "";
}

std::string unknownKeyMessage(const std::string& name, Section section) {
  const std::span<const std::string_view> allowed = keysOf(section);
  std::string message = "unknown key " + inQuotes(name) + " " + std::string(nameOf(section));
  if (const auto suggestion = closestMatch(name, allowed)) {
    return message + " (did you mean " + inQuotes(*suggestion) + "?)";
  }
  const bool at_node = section == Section::kRoot || section == Section::kDescriptor;
  if (at_node && contains(kLimitKeys, name)) {
    return message + " (" + inQuotes(name) + " belongs inside 'rate_limit')";
  }
  if (section == Section::kLimit && contains(kDescriptorKeys, name)) {
    return message + " (" + inQuotes(name) + " belongs to the descriptor, not inside a rate limit)";
  }
  if (const auto elsewhere = closestMatch(name, kLimitKeys); elsewhere && at_node) {
    return message + " (did you mean " + inQuotes(*elsewhere) + " inside 'rate_limit'?)";
  }
  std::string expected;
  for (const std::string_view key : allowed) {
    expected += expected.empty() ? "" : ", ";
    expected += key;
  }
  return message + " (expected one of: " + expected + ")";
}

}  // namespace

bool contains(std::span<const std::string_view> list, std::string_view word) {
  return std::find(list.begin(), list.end(), word) != list.end();
}

namespace {

/// A scalar: quoted stays a string; plain true/false, null and numbers keep their YAML type.
nlohmann::json scalarToJson(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") {
    return text;
  }
  if (text == "true" || text == "True" || text == "TRUE") {
    return true;
  }
  if (text == "false" || text == "False" || text == "FALSE") {
    return false;
  }
  if (text == "null" || text == "~" || text == "Null" || text == "NULL") {
    return nullptr;
  }
  const bool numeric_start =
      !text.empty() && (std::isdigit(static_cast<unsigned char>(text.front())) != 0 ||
                        text.front() == '-' || text.front() == '.');
  if (!numeric_start) {
    return text;
  }
  std::int64_t integer = 0;
  const auto [int_end, int_ec] = std::from_chars(text.data(), text.data() + text.size(), integer);
  if (int_ec == std::errc{} && int_end == text.data() + text.size()) {
    return integer;
  }
  double real = 0;
  const auto [real_end, real_ec] = std::from_chars(text.data(), text.data() + text.size(), real);
  if (real_ec == std::errc{} && real_end == text.data() + text.size()) {
    return real;
  }
  return text;
}

}  // namespace

std::optional<nlohmann::json> yamlToJson(const YAML::Node& node, int depth, std::size_t& budget) {
  if (depth > kMaxMetadataDepth || budget == 0) {
    return std::nullopt;
  }
  --budget;
  switch (node.Type()) {
    case YAML::NodeType::Sequence: {
      nlohmann::json array = nlohmann::json::array();
      for (const auto& item : node) {
        auto value = yamlToJson(item, depth + 1, budget);
        if (!value) {
          return std::nullopt;
        }
        array.push_back(std::move(*value));
      }
      return array;
    }
    case YAML::NodeType::Map: {
      nlohmann::json object = nlohmann::json::object();
      for (const auto& item : node) {
        if (!item.first.IsScalar()) {
          return std::nullopt;
        }
        auto value = yamlToJson(item.second, depth + 1, budget);
        if (!value) {
          return std::nullopt;
        }
        object[item.first.Scalar()] = std::move(*value);
      }
      return object;
    }
    case YAML::NodeType::Scalar:
      return scalarToJson(node);
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return nullptr;
}

Fields YamlReader::readFields(const YAML::Node& map, Section section) {
  const KeySet keys{keysOf(section), nameOf(section), [section](const std::string& name) {
                      return unknownKeyMessage(name, section);
                    }};
  return readFields(map, keys);
}

std::optional<Micros> YamlReader::readDuration(const Field& field, std::string_view name) {
  return readDuration(field, name, kMaxRuleSpanMicros, "10 years");
}

}  // namespace sluice::rules_detail
