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

}  // namespace

bool contains(std::span<const std::string_view> list, std::string_view word) {
  return std::find(list.begin(), list.end(), word) != list.end();
}

std::string inQuotes(std::string_view text) {
  std::string out = "'";
  out += text;
  out += '\'';
  return out;
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

void YamlReader::error(SourceLocation location, std::string message) {
  ++error_count_;
  if (error_count_ <= kMaxErrors) {
    errors_.push_back(RuleError{std::move(location), std::move(message)});
  } else if (error_count_ == kMaxErrors + 1) {
    // Line 0: printed as "file: message" and sorted after the file's other errors.
    errors_.push_back(
        RuleError{SourceLocation{file_, 0, 0},
                  "too many errors; only the first " + std::to_string(kMaxErrors) + " are shown"});
  }
}

SourceLocation YamlReader::at(const YAML::Mark& mark) const {
  if (mark.is_null() || mark.line < 0) {
    return SourceLocation{file_, 1, 1};
  }
  return SourceLocation{file_, mark.line + 1, mark.column + 1};
}

/// The value's position, or the key's when the value is empty (yaml-cpp places an empty
/// value at the start of the next token, often on the next line).
SourceLocation YamlReader::at(const Field& field) const {
  if (!field.value.IsDefined() || field.value.IsNull() || field.value.Mark().is_null()) {
    return at(field.key);
  }
  return at(field.value);
}

/// Reads a mapping's fields; reports unknown keys (with a did-you-mean), non-string keys
/// and keys given twice.
Fields YamlReader::readFields(const YAML::Node& map, Section section) {
  const std::span<const std::string_view> allowed = keysOf(section);
  Fields fields;
  for (const auto& item : map) {
    const YAML::Node& key = item.first;
    if (!key.IsScalar()) {
      error(at(key), "a key must be a plain string " + std::string(nameOf(section)));
      continue;
    }
    const std::string& name = key.Scalar();
    if (!contains(allowed, name)) {
      error(at(key), unknownKeyMessage(name, section));
      continue;
    }
    if (const auto it = fields.find(name); it != fields.end()) {
      error(at(key), "duplicate key " + inQuotes(name) + " (first given at line " +
                         std::to_string(at(it->second.key).line) + ")");
      continue;
    }
    fields.emplace(name, Field{key, item.second});
  }
  return fields;
}

std::string YamlReader::unknownKeyMessage(const std::string& name, Section section) {
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

std::optional<std::string> YamlReader::readString(const Field& field, std::string_view name) {
  if (field.value.IsNull()) {
    return std::string();
  }
  if (!field.value.IsScalar()) {
    error(at(field), inQuotes(name) + " must be a string, not a " + kindOf(field.value));
    return std::nullopt;
  }
  return field.value.Scalar();
}

std::optional<bool> yamlBool(const YAML::Node& node) {
  if (node.IsScalar() && node.Tag() != "!") {
    std::string text = node.Scalar();
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (text == "true" || text == "yes" || text == "on") {
      return true;
    }
    if (text == "false" || text == "no" || text == "off") {
      return false;
    }
  }
  return std::nullopt;
}

std::optional<bool> YamlReader::readBool(const Field& field, std::string_view name) {
  if (auto value = yamlBool(field.value)) {
    return value;
  }
  error(at(field), inQuotes(name) + " must be true or false, got " + describe(field.value));
  return std::nullopt;
}

std::optional<std::int64_t> YamlReader::readInteger(const Field& field, std::string_view name,
                                                    std::int64_t min, std::int64_t max) {
  const std::string requirement =
      min == 0 ? "a non-negative integer" : "an integer >= " + std::to_string(min);
  if (!field.value.IsScalar() || field.value.Tag() == "!") {
    error(at(field), inQuotes(name) + " must be " + requirement + ", got " + describe(field.value));
    return std::nullopt;
  }
  const std::string& text = field.value.Scalar();
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') {
    digits.remove_prefix(1);
  }
  const bool all_digits = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
  std::int64_t value = 0;
  if (all_digits) {
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec == std::errc::result_out_of_range || (ec == std::errc{} && value > max)) {
      error(at(field),
            inQuotes(name) + " is too large: " + text + " (at most " + std::to_string(max) + ")");
      return std::nullopt;
    }
    if (ec == std::errc{} && end == digits.data() + digits.size() && value >= min) {
      return value;
    }
  }
  error(at(field), inQuotes(name) + " must be " + requirement + ", got " + inQuotes(text));
  return std::nullopt;
}

std::optional<Micros> YamlReader::readDuration(const Field& field, std::string_view name) {
  if (field.value.IsScalar()) {
    if (const auto duration = parseDuration(field.value.Scalar())) {
      if (*duration > kMaxRuleSpanMicros) {
        error(at(field), inQuotes(name) + " is too long: " + inQuotes(field.value.Scalar()) +
                             " (at most 10 years)");
        return std::nullopt;
      }
      return duration;
    }
  }
  error(at(field), "malformed duration " + describe(field.value) + " for " + inQuotes(name) +
                       " (expected a whole number and a unit: us, ms, s, m, h or d, "
                       "e.g. 250ms or 2s)");
  return std::nullopt;
}

std::string YamlReader::kindOf(const YAML::Node& node) {
  if (node.IsMap()) {
    return "mapping";
  }
  if (node.IsSequence()) {
    return "list";
  }
  return node.IsNull() ? "null" : "string";
}

std::string YamlReader::describe(const YAML::Node& node) {
  if (node.IsScalar()) {
    return node.Tag() == "!" ? "the string \"" + node.Scalar() + "\"" : inQuotes(node.Scalar());
  }
  return "a " + kindOf(node);
}

bool YamlReader::spendNode(const YAML::Node& node) {
  if (++nodes_ <= kMaxNodes) {
    return true;
  }
  if (nodes_ == kMaxNodes + 1) {
    error(at(node), "more than " + std::to_string(kMaxNodes) +
                        " descriptors and limits in one file (is an alias repeated?)");
  }
  return false;
}

}  // namespace sluice::rules_detail
