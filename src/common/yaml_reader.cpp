#include "sluice/common/yaml_reader.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <system_error>
#include <utility>

#include "sluice/common/value_parsers.hpp"

namespace sluice {
namespace {

std::string unknownKeyMessage(const std::string& name, const KeySet& keys) {
  if (keys.unknown_key_message) {
    return keys.unknown_key_message(name);
  }
  std::string expected;
  for (const std::string_view key : keys.allowed) {
    expected += expected.empty() ? "" : ", ";
    expected += key;
  }
  return "unknown key " + inQuotes(name) + " " + std::string(keys.where) +
         " (expected one of: " + expected + ")";
}

}  // namespace

std::string inQuotes(std::string_view text) {
  std::string out = "'";
  out += text;
  out += '\'';
  return out;
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

void YamlReader::error(SourceLocation location, std::string message) {
  ++error_count_;
  if (error_count_ <= kMaxErrors) {
    errors_.push_back(LocatedError{std::move(location), std::move(message)});
  } else if (error_count_ == kMaxErrors + 1) {
    // Line 0: printed as "file: message" and sorted after the file's other errors.
    errors_.push_back(LocatedError{
        SourceLocation{file_, 0, 0},
        "too many errors; only the first " + std::to_string(kMaxErrors) + " are shown"});
  }
}

std::string YamlReader::subject(std::string_view name) const {
  return naming_ == Naming::kQuoted ? inQuotes(name) + " " : std::string(name) + ": ";
}

SourceLocation YamlReader::at(const YAML::Mark& mark) const {
  if (mark.is_null() || mark.line < 0) {
    return SourceLocation{file_, 1, 1};
  }
  return SourceLocation{file_, mark.line + 1, mark.column + 1};
}

SourceLocation YamlReader::at(const Field& field) const {
  if (!field.value.IsDefined() || field.value.IsNull() || field.value.Mark().is_null()) {
    return at(field.key);
  }
  return at(field.value);
}

Fields YamlReader::readFields(const YAML::Node& map, const KeySet& keys) {
  Fields fields;
  for (const auto& item : map) {
    const YAML::Node& key = item.first;
    if (!key.IsScalar()) {
      error(at(key), "a key must be a plain string " + std::string(keys.where));
      continue;
    }
    const std::string& name = key.Scalar();
    if (std::find(keys.allowed.begin(), keys.allowed.end(), name) == keys.allowed.end()) {
      error(at(key), unknownKeyMessage(name, keys));
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

std::optional<std::string> YamlReader::readString(const Field& field, std::string_view name) {
  if (field.value.IsNull()) {
    return std::string();
  }
  if (!field.value.IsScalar()) {
    error(at(field), subject(name) + "must be a string, not a " + kindOf(field.value));
    return std::nullopt;
  }
  return field.value.Scalar();
}

std::optional<bool> YamlReader::readBool(const Field& field, std::string_view name) {
  if (auto value = yamlBool(field.value)) {
    return value;
  }
  error(at(field), subject(name) + "must be true or false, got " + describe(field.value));
  return std::nullopt;
}

std::optional<std::int64_t> YamlReader::readInteger(const Field& field, std::string_view name,
                                                    std::int64_t min, std::int64_t max) {
  const std::string requirement =
      min == 0 ? "a non-negative integer" : "an integer >= " + std::to_string(min);
  if (!field.value.IsScalar() || field.value.Tag() == "!") {
    error(at(field), subject(name) + "must be " + requirement + ", got " + describe(field.value));
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
            subject(name) + "is too large: " + text + " (at most " + std::to_string(max) + ")");
      return std::nullopt;
    }
    if (ec == std::errc{} && end == digits.data() + digits.size() && value >= min) {
      return value;
    }
  }
  error(at(field), subject(name) + "must be " + requirement + ", got " + inQuotes(text));
  return std::nullopt;
}

std::optional<Micros> YamlReader::readDuration(const Field& field, std::string_view name,
                                               Micros max, std::string_view max_text) {
  if (field.value.IsScalar()) {
    if (const auto duration = parseDurationMicros(field.value.Scalar())) {
      if (*duration > max) {
        error(at(field), subject(name) + "is too long: " + inQuotes(field.value.Scalar()) +
                             " (at most " + std::string(max_text) + ")");
        return std::nullopt;
      }
      return duration;
    }
  }
  const std::string what =
      naming_ == Naming::kQuoted
          ? "malformed duration " + describe(field.value) + " for " + inQuotes(name)
          : subject(name) + "malformed duration " + describe(field.value);
  error(at(field), what +
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

bool YamlReader::spendNode(const YAML::Node& node, std::string_view elements) {
  if (++nodes_ <= kMaxNodes) {
    return true;
  }
  if (nodes_ == kMaxNodes + 1) {
    error(at(node), "more than " + std::to_string(kMaxNodes) + " " + std::string(elements) +
                        " in one file (is an alias repeated?)");
  }
  return false;
}

}  // namespace sluice
