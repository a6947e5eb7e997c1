#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <sstream>
#include <system_error>
#include <tuple>
#include <utility>
#include <variant>

#include "rules/domain_merge.hpp"
#include "rules/suggest.hpp"
#include "sluice/rules/rules.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using rules_detail::closestMatch;

/// A rules file larger than this is refused: rules are hand-written, and the cap keeps a
/// mistaken path (a log file, a binary) from being read into memory.
constexpr std::uintmax_t kMaxFileBytes = 16U * 1024U * 1024U;
/// envoyproxy/ratelimit stores requests_per_unit as uint32; Sluice keeps the same range.
constexpr std::int64_t kMaxCount = std::numeric_limits<std::uint32_t>::max();

constexpr std::array<std::string_view, 4> kRootKeys{"domain", "descriptors", "rate_limit",
                                                    "rate_limits"};
constexpr std::array<std::string_view, 11> kDescriptorKeys{
    "key",         "value",           "rate_limit",      "rate_limits",     "descriptors",
    "shadow_mode", "detailed_metric", "value_to_metric", "share_threshold", "metadata",
    "quota_mode"};
constexpr std::array<std::string_view, 12> kLimitKeys{
    "unit",  "requests_per_unit", "unlimited",      "name",         "replaces", "algorithm",
    "burst", "unit_multiplier",   "count_rejected", "min_interval", "shape",    "warmup"};
constexpr std::array<std::string_view, 1> kReplacesKeys{"name"};
/// Where in a rules file a mapping is: which keys it takes and how errors name it.
enum class Section { kRoot, kDescriptor, kLimit, kReplaces };

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

constexpr std::array<std::string_view, 7> kUnitNames{"second", "minute", "hour", "day",
                                                     "week",   "month",  "year"};
constexpr const char* kAlgorithmList =
    "fixed_window, sliding_window_log, sliding_window_counter, token_bucket, leaky_bucket";
constexpr std::array<std::string_view, 5> kAlgorithmNames{
    "fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket", "leaky_bucket"};

/// Which algorithms each optional algorithm parameter applies to.
struct ParamRule {
  std::string_view key;
  std::vector<Algorithm> algorithms;
};

const std::vector<ParamRule>& paramRules() {
  static const std::vector<ParamRule> kRules{
      {"burst", {Algorithm::kTokenBucket, Algorithm::kLeakyBucket}},
      {"min_interval", {Algorithm::kSlidingWindowLog}},
      {"count_rejected",
       {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter}},
      {"shape", {Algorithm::kLeakyBucket}},
      {"warmup", {Algorithm::kTokenBucket}},
  };
  return kRules;
}

bool contains(std::span<const std::string_view> list, std::string_view word) {
  return std::find(list.begin(), list.end(), word) != list.end();
}

std::string inQuotes(std::string_view text) {
  std::string out = "'";
  out += text;
  out += '\'';
  return out;
}

/// One `key: value` pair of a YAML mapping, with both nodes for their positions.
struct Field {
  YAML::Node key;
  YAML::Node value;
};
using Fields = std::map<std::string, Field, std::less<>>;

/// A `replaces` reference, checked once the whole domain is known.
struct ReplacesRef {
  std::string name;
  SourceLocation location;
};

/// Bounds on `metadata`: YAML aliases can make a node refer to itself or repeat a subtree
/// exponentially, so the conversion stops at this depth or number of nodes.
constexpr int kMaxMetadataDepth = 32;
constexpr std::size_t kMaxMetadataNodes = 10'000;

/// Converts `metadata` (any YAML) to JSON: plain scalars keep their YAML type, quoted ones
/// stay strings. nullopt when it exceeds the bounds above; `budget` counts nodes down.
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
    case YAML::NodeType::Scalar: {
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
      const auto [int_end, int_ec] =
          std::from_chars(text.data(), text.data() + text.size(), integer);
      if (int_ec == std::errc{} && int_end == text.data() + text.size()) {
        return integer;
      }
      double real = 0;
      const auto [real_end, real_ec] =
          std::from_chars(text.data(), text.data() + text.size(), real);
      if (real_ec == std::errc{} && real_end == text.data() + text.size()) {
        return real;
      }
      return text;
    }
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return nullptr;
}

/// Parses and validates one rules document, collecting every error instead of stopping at
/// the first one.
class FileParser {
 public:
  FileParser(std::string file, std::vector<RuleError>& errors)
      : file_(std::move(file)), errors_(errors) {}

  std::optional<DomainConfig> parseDocument(const YAML::Node& root) {
    const std::size_t errors_before = errors_.size();
    if (!root.IsDefined() || root.IsNull()) {
      error(SourceLocation{file_, 1, 1},
            "the file is empty: expected a mapping with 'domain' and 'descriptors'");
      return std::nullopt;
    }
    if (!root.IsMap()) {
      error(at(root), "the file must be a mapping with 'domain' and 'descriptors'");
      return std::nullopt;
    }
    const Fields fields = readFields(root, Section::kRoot);
    DomainConfig domain;
    domain.location = at(root);
    if (const auto it = fields.find("domain"); it == fields.end()) {
      error(at(root), "missing 'domain'");
    } else if (auto name = readString(it->second, "domain")) {
      if (name->empty()) {
        error(at(it->second), "'domain' must not be empty");
      }
      domain.domain = std::move(*name);
      domain.location = at(it->second);
    }
    domain_ = domain.domain;
    domain.domain_limits = parseNodeLimits(fields, domain.domain, false);
    if (const auto it = fields.find("descriptors"); it != fields.end()) {
      parseDescriptors(it->second, domain.domain, domain.descriptors, domain.descriptors_index);
    }
    checkReplaces();
    if (errors_.size() != errors_before) {
      return std::nullopt;
    }
    return domain;
  }

 private:
  void error(SourceLocation location, std::string message) {
    ++error_count_;
    if (error_count_ <= kMaxErrors) {
      errors_.push_back(RuleError{std::move(location), std::move(message)});
    } else if (error_count_ == kMaxErrors + 1) {
      // Line 0: printed as "file: message" and sorted after the file's other errors.
      errors_.push_back(RuleError{
          SourceLocation{file_, 0, 0},
          "too many errors; only the first " + std::to_string(kMaxErrors) + " are shown"});
    }
  }

  SourceLocation at(const YAML::Mark& mark) const {
    if (mark.is_null() || mark.line < 0) {
      return SourceLocation{file_, 1, 1};
    }
    return SourceLocation{file_, mark.line + 1, mark.column + 1};
  }
  SourceLocation at(const YAML::Node& node) const { return at(node.Mark()); }
  /// The value's position, or the key's when the value is empty (yaml-cpp places an empty
  /// value at the start of the next token, often on the next line).
  SourceLocation at(const Field& field) const {
    if (!field.value.IsDefined() || field.value.IsNull() || field.value.Mark().is_null()) {
      return at(field.key);
    }
    return at(field.value);
  }

  /// Reads a mapping's fields; reports unknown keys (with a did-you-mean), non-string keys
  /// and keys given twice.
  Fields readFields(const YAML::Node& map, Section section) {
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

  static std::string unknownKeyMessage(const std::string& name, Section section) {
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
      return message + " (" + inQuotes(name) +
             " belongs to the descriptor, not inside a rate limit)";
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

  std::optional<std::string> readString(const Field& field, std::string_view name) {
    if (field.value.IsNull()) {
      return std::string();
    }
    if (!field.value.IsScalar()) {
      error(at(field), inQuotes(name) + " must be a string, not a " + kindOf(field.value));
      return std::nullopt;
    }
    return field.value.Scalar();
  }

  std::optional<bool> readBool(const Field& field, std::string_view name) {
    if (field.value.IsScalar() && field.value.Tag() != "!") {
      std::string text = field.value.Scalar();
      std::transform(text.begin(), text.end(), text.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (text == "true" || text == "yes" || text == "on") {
        return true;
      }
      if (text == "false" || text == "no" || text == "off") {
        return false;
      }
    }
    error(at(field), inQuotes(name) + " must be true or false, got " + describe(field.value));
    return std::nullopt;
  }

  std::optional<std::int64_t> readInteger(const Field& field, std::string_view name,
                                          std::int64_t min, std::int64_t max) {
    const std::string requirement =
        min == 0 ? "a non-negative integer" : "an integer >= " + std::to_string(min);
    if (!field.value.IsScalar() || field.value.Tag() == "!") {
      error(at(field),
            inQuotes(name) + " must be " + requirement + ", got " + describe(field.value));
      return std::nullopt;
    }
    const std::string& text = field.value.Scalar();
    std::string_view digits = text;
    if (!digits.empty() && digits.front() == '+') {
      digits.remove_prefix(1);
    }
    const bool all_digits =
        !digits.empty() &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
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

  std::optional<Micros> readDuration(const Field& field, std::string_view name) {
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

  static std::string kindOf(const YAML::Node& node) {
    if (node.IsMap()) {
      return "mapping";
    }
    if (node.IsSequence()) {
      return "list";
    }
    return node.IsNull() ? "null" : "string";
  }

  static std::string describe(const YAML::Node& node) {
    if (node.IsScalar()) {
      return node.Tag() == "!" ? "the string \"" + node.Scalar() + "\"" : inQuotes(node.Scalar());
    }
    return "a " + kindOf(node);
  }

  /// Parses a `descriptors:` list into `out` and indexes it; reports duplicates.
  void parseDescriptors(const Field& field, const std::string& parent_name,
                        std::vector<DescriptorNode>& out, DescriptorLevelIndex& index) {
    if (field.value.IsNull()) {
      return;
    }
    if (!field.value.IsSequence()) {
      error(at(field),
            "'descriptors' must be a list of mappings with 'key', not a " + kindOf(field.value));
      return;
    }
    // Composite key (key, value) -> line, to report duplicates at one level.
    std::map<std::pair<std::string, std::string>, int> seen;
    for (const auto& item : field.value) {
      if (!item.IsMap()) {
        error(at(item),
              "each item of 'descriptors' must be a mapping with 'key', not a " + kindOf(item));
        continue;
      }
      if (!spendNode(item)) {
        return;
      }
      auto node = parseDescriptor(item, parent_name);
      if (!node) {
        continue;
      }
      const std::string value_part = node->value ? "_" + *node->value : "";
      const auto [it, inserted] =
          seen.emplace(std::make_pair(node->key, node->value.value_or("")), node->location.line);
      if (!inserted) {
        error(node->location, "duplicate descriptor composite key " +
                                  inQuotes(parent_name + "." + node->key + value_part) +
                                  " (first defined at line " + std::to_string(it->second) + ")");
        continue;
      }
      const std::size_t position = out.size();
      auto& for_key = index.by_key[node->key];
      if (!node->value) {
        for_key.key_only = position;
      } else {
        // A wildcard node is also found by its literal text, as envoyproxy/ratelimit's map
        // lookup of "key_value" finds it before trying the patterns.
        for_key.exact.emplace(*node->value, position);
        if (node->wildcard) {
          for_key.wildcards.push_back(position);
        }
      }
      out.push_back(std::move(*node));
    }
  }

  std::optional<DescriptorNode> parseDescriptor(const YAML::Node& map,
                                                const std::string& parent_name) {
    const std::size_t errors_before = errors_.size();
    const Fields fields = readFields(map, Section::kDescriptor);
    DescriptorNode node;
    node.location = at(map);
    if (const auto it = fields.find("key"); it == fields.end()) {
      error(at(map), "descriptor is missing 'key'");
    } else if (auto key = readString(it->second, "key")) {
      if (key->empty()) {
        error(at(it->second), "descriptor has an empty 'key'");
      }
      node.key = std::move(*key);
    }
    if (const auto it = fields.find("value"); it != fields.end()) {
      if (auto value = readString(it->second, "value"); value && !value->empty()) {
        // As in envoyproxy/ratelimit, an empty value means a key-only node.
        node.wildcard = value->find('*') != std::string::npos;
        node.value = std::move(*value);
      }
    }
    const auto flag = [&](std::string_view name, bool& out) {
      if (const auto it = fields.find(name); it != fields.end()) {
        if (const auto value = readBool(it->second, name)) {
          out = *value;
        }
      }
    };
    flag("shadow_mode", node.shadow_mode);
    flag("quota_mode", node.quota_mode);
    flag("detailed_metric", node.detailed_metric);
    flag("value_to_metric", node.value_to_metric);
    flag("share_threshold", node.share_threshold);
    if (node.share_threshold && !node.wildcard) {
      error(at(fields.find("share_threshold")->second),
            "'share_threshold' needs a wildcard 'value' (one containing '*')");
    }
    if (const auto it = fields.find("metadata"); it != fields.end()) {
      std::size_t budget = kMaxMetadataNodes;
      if (auto json = yamlToJson(it->second.value, 1, budget)) {
        node.metadata_json = json->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      } else {
        error(at(it->second), "'metadata' must be plain data with string keys, at most " +
                                  std::to_string(kMaxMetadataDepth) + " levels deep and " +
                                  std::to_string(kMaxMetadataNodes) +
                                  " values (is an alias referring to itself?)");
      }
    }
    const std::string name =
        parent_name + "." + node.key + (node.value ? "_" + *node.value : std::string());
    node.limits = parseNodeLimits(fields, name, node.shadow_mode);
    for (RateLimit& limit : node.limits) {
      limit.quota_mode = node.quota_mode;
    }
    if (const auto it = fields.find("descriptors"); it != fields.end()) {
      if (depth_ >= kMaxDepth) {
        error(at(it->second.key),
              "descriptors are nested deeper than " + std::to_string(kMaxDepth) + " levels");
      } else {
        ++depth_;
        parseDescriptors(it->second, name, node.children, node.children_index);
        --depth_;
      }
    }
    if (errors_.size() != errors_before) {
      return std::nullopt;
    }
    return node;
  }

  /// The limits of one node (or of the domain): `rate_limit:` or `rate_limits:`.
  std::vector<RateLimit> parseNodeLimits(const Fields& fields, const std::string& base_name,
                                         bool shadow) {
    std::vector<RateLimit> limits;
    const auto single = fields.find("rate_limit");
    const auto list = fields.find("rate_limits");
    if (single != fields.end() && list != fields.end()) {
      error(at(list->second.key), "use either 'rate_limit' or 'rate_limits' on one node, not both");
      return limits;
    }
    if (single != fields.end()) {
      if (!single->second.value.IsMap()) {
        error(at(single->second),
              "'rate_limit' must be a mapping with 'unit' and "
              "'requests_per_unit', not a " +
                  kindOf(single->second.value));
      } else if (auto limit = parseLimit(single->second.value, base_name, 0, shadow)) {
        limits.push_back(std::move(*limit));
      }
    }
    if (list != fields.end()) {
      const YAML::Node& items = list->second.value;
      if (!items.IsSequence() || items.size() == 0) {
        error(at(list->second), "'rate_limits' must be a non-empty list of rate limits");
        return limits;
      }
      std::map<std::string, int> names;
      std::size_t index = 0;
      for (const auto& item : items) {
        if (!item.IsMap()) {
          error(at(item),
                "each item of 'rate_limits' must be a mapping with 'unit' and "
                "'requests_per_unit', not a " +
                    kindOf(item));
        } else if (auto limit = parseLimit(item, base_name + "[" + std::to_string(index) + "]",
                                           index, shadow)) {
          if (limit->explicit_name) {
            const auto [it, inserted] = names.emplace(limit->name, limit->location.line);
            if (!inserted) {
              error(limit->location, "duplicate rate limit name " + inQuotes(limit->name) +
                                         " on one node (first at line " +
                                         std::to_string(it->second) + ")");
            }
          }
          limits.push_back(std::move(*limit));
        }
        ++index;
      }
    }
    return limits;
  }

  std::optional<RateLimit> parseLimit(const YAML::Node& map, const std::string& generated_name,
                                      std::size_t index, bool shadow) {
    if (!spendNode(map)) {
      return std::nullopt;
    }
    const std::size_t errors_before = errors_.size();
    const Fields fields = readFields(map, Section::kLimit);
    const auto find = [&](std::string_view key) -> const Field* {
      const auto it = fields.find(key);
      return it == fields.end() ? nullptr : &it->second;
    };
    RateLimit limit;
    limit.location = at(map);
    limit.shadow_mode = shadow;
    if (const Field* field = find("unlimited")) {
      limit.unlimited = readBool(*field, "unlimited").value_or(false);
    }
    if (const Field* field = find("unit")) {
      if (limit.unlimited) {
        error(at(field->key), "should not specify 'unit' when 'unlimited' is true");
      } else if (const auto text = readString(*field, "unit")) {
        if (const auto unit = parseUnit(*text)) {
          limit.unit = *unit;
        } else {
          std::string message = "invalid unit " + inQuotes(*text) +
                                " (expected second, minute, hour, day, week, month or year)";
          if (const auto suggestion = closestMatch(*text, kUnitNames)) {
            message += "; did you mean " + inQuotes(*suggestion) + "?";
          }
          error(at(*field), message);
        }
      }
    } else if (!limit.unlimited) {
      error(at(map), "rate limit is missing 'unit'");
    }
    if (const Field* field = find("requests_per_unit")) {
      limit.requests_per_unit = readInteger(*field, "requests_per_unit", 0, kMaxCount).value_or(0);
    } else if (!limit.unlimited) {
      error(at(map),
            "rate limit is missing 'requests_per_unit' (envoyproxy/ratelimit would read it as 0 "
            "and block all traffic; write 'requests_per_unit: 0' if that is intended)");
    }
    if (const Field* field = find("unit_multiplier")) {
      if (const auto multiplier = readInteger(*field, "unit_multiplier", 1, kMaxCount)) {
        if (*multiplier > kMaxRuleSpanMicros / unitMicros(limit.unit)) {
          error(at(*field), "'unit_multiplier' " + std::to_string(*multiplier) +
                                " makes the window too long (at most 10 years)");
        } else {
          limit.unit_multiplier = *multiplier;
        }
      }
    }
    if (const Field* field = find("name")) {
      if (auto name = readString(*field, "name")) {
        if (name->empty()) {
          error(at(*field), "'name' must not be empty");
        } else {
          limit.name = std::move(*name);
          limit.explicit_name = true;
          names_.insert(limit.name);
        }
      }
    }
    // After `name`, wherever the keys are in the file, so a self-reference is caught.
    if (const Field* field = find("replaces")) {
      parseReplaces(*field, limit);
    }
    bool algorithm_known = true;
    if (const Field* field = find("algorithm")) {
      if (const auto text = readString(*field, "algorithm")) {
        if (const auto algorithm = parseAlgorithm(*text)) {
          limit.params.algorithm = *algorithm;
        } else {
          algorithm_known = false;
          std::string message =
              "unknown algorithm " + inQuotes(*text) + " (expected one of " + kAlgorithmList + ")";
          if (const auto suggestion = closestMatch(*text, kAlgorithmNames)) {
            message += "; did you mean " + inQuotes(*suggestion) + "?";
          }
          error(at(*field), message);
        }
      } else {
        algorithm_known = false;
      }
    }
    const Algorithm algorithm = limit.params.algorithm;
    std::optional<std::int64_t> burst;
    for (const ParamRule& rule : paramRules()) {
      const Field* field = find(rule.key);
      if (field == nullptr) {
        continue;
      }
      if (algorithm_known && std::find(rule.algorithms.begin(), rule.algorithms.end(), algorithm) ==
                                 rule.algorithms.end()) {
        std::string applies;
        for (const Algorithm a : rule.algorithms) {
          applies += applies.empty() ? "" : ", ";
          applies += algorithmName(a);
        }
        error(at(field->key), inQuotes(rule.key) + " does not apply to algorithm " +
                                  inQuotes(algorithmName(algorithm)) + " (only to " + applies +
                                  ")");
        continue;
      }
      if (rule.key == "burst") {
        burst = readInteger(*field, "burst", 1, kMaxCount);
      } else if (rule.key == "min_interval") {
        limit.params.min_interval_us = readDuration(*field, "min_interval").value_or(0);
      } else if (rule.key == "count_rejected") {
        limit.params.count_rejected = readBool(*field, "count_rejected").value_or(false);
      } else if (rule.key == "shape") {
        limit.params.shape = readBool(*field, "shape").value_or(false);
      } else if (rule.key == "warmup") {
        limit.params.warmup_us = readDuration(*field, "warmup").value_or(0);
      }
    }
    // A full bucket takes burst x W / L to drain; the algorithms add it to the current time.
    if (const Field* field = find("burst");
        field != nullptr && burst && limit.requests_per_unit > 0 &&
        static_cast<double>(*burst) * static_cast<double>(unitMicros(limit.unit)) *
                static_cast<double>(limit.unit_multiplier) /
                static_cast<double>(limit.requests_per_unit) >
            static_cast<double>(kMaxRuleSpanMicros)) {
      error(at(*field), "'burst' " + std::to_string(*burst) +
                            " makes a full bucket last too long (burst x window / "
                            "requests_per_unit must be at most 10 years)");
    }
    // GCRA keeps time in 1/L microsecond steps; the Redis scripts reproduce it exactly only
    // while every intermediate (at most burst x requests_per_unit) fits a double's 53 bits.
    if (algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kLeakyBucket) {
      const std::int64_t capacity = burst.value_or(limit.requests_per_unit);
      const Field* field = find("burst");
      if (field == nullptr) {
        field = find("requests_per_unit");
      }
      if (field != nullptr && capacity > 0 && limit.requests_per_unit > 0 &&
          capacity > ((std::int64_t{1} << 53) - 1) / limit.requests_per_unit) {
        error(at(*field),
              "burst x requests_per_unit (" + std::to_string(capacity) + " x " +
                  std::to_string(limit.requests_per_unit) + ") must stay below 2^53 for " +
                  std::string(algorithmName(algorithm)) + " (exact arithmetic in the Redis store)");
      }
    }
    if (errors_.size() != errors_before) {
      return std::nullopt;
    }
    if (!limit.explicit_name) {
      limit.name = generated_name;
    }
    limit.slot =
        limit.explicit_name ? "n" + escapeKeyPart(limit.name) : "i" + std::to_string(index);
    limit.params.limit = limit.requests_per_unit;
    limit.params.window_us = unitMicros(limit.unit) * limit.unit_multiplier;
    const bool bucket =
        algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kLeakyBucket;
    limit.params.burst = bucket ? burst.value_or(limit.requests_per_unit) : 0;
    return limit;
  }

  void parseReplaces(const Field& field, RateLimit& limit) {
    if (!field.value.IsSequence()) {
      error(at(field),
            "'replaces' must be a list of mappings with 'name', not a " + kindOf(field.value));
      return;
    }
    for (const auto& item : field.value) {
      if (!item.IsMap()) {
        error(at(item),
              "each 'replaces' entry must be a mapping with 'name', not a " + kindOf(item));
        continue;
      }
      const Fields entry = readFields(item, Section::kReplaces);
      const auto it = entry.find("name");
      std::optional<std::string> name;
      if (it != entry.end()) {
        name = readString(it->second, "name");
        if (!name) {
          continue;
        }
      }
      if (!name || name->empty()) {
        error(at(item), "should not have an empty 'replaces' entry: it needs a 'name'");
        continue;
      }
      if (limit.explicit_name && *name == limit.name) {
        error(at(it->second), "a rate limit cannot replace itself (" + inQuotes(*name) + ")");
        continue;
      }
      limit.replaces.push_back(*name);
      replaces_refs_.push_back(ReplacesRef{*name, at(it->second)});
    }
  }

  /// Runs after the whole domain is read: no limit replaces itself, every replaced name exists.
  void checkReplaces() {
    for (const ReplacesRef& ref : replaces_refs_) {
      if (names_.count(ref.name) == 0) {
        error(ref.location, "replaces " + inQuotes(ref.name) + ", but no rate limit in domain " +
                                inQuotes(domain_) + " has that name");
      }
    }
  }

  /// Counts one descriptor or limit against the file's budget; reports (once) and returns
  /// false when it is spent. Aliases can repeat a subtree exponentially: this keeps a small
  /// file from taking the reload thread's time and memory.
  bool spendNode(const YAML::Node& node) {
    if (++nodes_ <= kMaxNodes) {
      return true;
    }
    if (nodes_ == kMaxNodes + 1) {
      error(at(node), "more than " + std::to_string(kMaxNodes) +
                          " descriptors and limits in one file (is an alias repeated?)");
    }
    return false;
  }

  /// Bounds the recursion (and the stack of the thread that reloads); real trees are a few
  /// levels deep.
  static constexpr int kMaxDepth = 64;
  static constexpr std::size_t kMaxNodes = 100'000;
  static constexpr std::size_t kMaxErrors = 1'000;
  std::size_t nodes_ = 0;
  std::size_t error_count_ = 0;

  std::string file_;
  std::vector<RuleError>& errors_;
  int depth_ = 1;
  std::string domain_;
  std::set<std::string> names_;
  std::vector<ReplacesRef> replaces_refs_;
};

std::uint64_t fnv1a(std::uint64_t hash, std::string_view bytes) {
  for (const char ch : bytes) {
    hash ^= static_cast<unsigned char>(ch);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

/// FNV-1a 64 over the files sorted by name: each name and content, length-prefixed so that
/// moving bytes between name and content changes the hash.
std::string contentHash(std::vector<std::pair<std::string, std::string>> files) {
  std::sort(files.begin(), files.end());
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const auto& [name, content] : files) {
    const std::string base = fs::path(name).filename().string();
    hash = fnv1a(hash, std::to_string(base.size()) + ":" + base);
    hash = fnv1a(hash, std::to_string(content.size()) + ":" + content);
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace

bool isRulesFileName(std::string_view name) {
  if (name.empty() || name.front() == '.') {
    return false;
  }
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto ends_with = [&](std::string_view suffix) {
    return lower.size() > suffix.size() &&
           lower.compare(lower.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".yaml") || ends_with(".yml");
}

namespace {

std::optional<std::string> readWholeFile(const fs::path& path, std::vector<RuleError>& errors) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) {
    errors.push_back(RuleError{{path.string(), 0, 0}, "cannot read the file: " + ec.message()});
    return std::nullopt;
  }
  if (size > kMaxFileBytes) {
    errors.push_back(RuleError{{path.string(), 0, 0},
                               "the file is too large (" + std::to_string(size) +
                                   " bytes; rules files are limited to 16 MiB)"});
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    errors.push_back(RuleError{{path.string(), 0, 0}, "cannot open the file"});
    return std::nullopt;
  }
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) {
    errors.push_back(RuleError{{path.string(), 0, 0}, "cannot read the file"});
    return std::nullopt;
  }
  return content.str();
}

/// Sees where each document of a stream starts, and nothing else.
class DocumentProbe final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& /*mark*/, YAML::anchor_t /*anchor*/) override {}
  void OnAlias(const YAML::Mark& /*mark*/, YAML::anchor_t /*anchor*/) override {}
  void OnScalar(const YAML::Mark& /*mark*/, const std::string& /*tag*/, YAML::anchor_t /*anchor*/,
                const std::string& /*value*/) override {}
  void OnSequenceStart(const YAML::Mark& /*mark*/, const std::string& /*tag*/,
                       YAML::anchor_t /*anchor*/, YAML::EmitterStyle::value /*style*/) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& /*mark*/, const std::string& /*tag*/, YAML::anchor_t /*anchor*/,
                  YAML::EmitterStyle::value /*style*/) override {}
  void OnMapEnd() override {}

  YAML::Mark start;
};

SourceLocation locationOf(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0) {
    return SourceLocation{file, 1, 1};
  }
  return SourceLocation{file, mark.line + 1, mark.column + 1};
}

/// The first document of a file, or an error. Not YAML::LoadAll: yaml-cpp 0.7 loops forever,
/// allocating, on a stray ',' outside a flow collection (jbeder/yaml-cpp#1040, fixed upstream
/// in 0.8.0). A probe pass looks at most at two documents and notices when the parser stops
/// making progress. Throws YAML::Exception on syntax errors.
std::variant<YAML::Node, RuleError> firstDocument(const std::string& file,
                                                  const std::string& content) {
  std::istringstream stream(content);
  YAML::Parser parser(stream);
  DocumentProbe probe;
  if (!parser.HandleNextDocument(probe)) {
    return YAML::Node();
  }
  const YAML::Mark first = probe.start;
  if (parser.HandleNextDocument(probe)) {
    if (probe.start.pos == first.pos) {
      const char found = first.pos >= 0 && static_cast<std::size_t>(first.pos) < content.size()
                             ? content[static_cast<std::size_t>(first.pos)]
                             : '?';
      return RuleError{locationOf(file, first),
                       std::string("YAML syntax error: unexpected '") + found + "'"};
    }
    return RuleError{locationOf(file, probe.start), "only one YAML document (one domain) per file"};
  }
  return YAML::Load(content);
}

/// Parses one file into `rules`; reports into `errors`. yaml-cpp's exceptions stop here.
void loadFile(const std::string& name, const std::string& content, RuleSet& rules,
              std::map<std::string, SourceLocation, std::less<>>& domain_origin,
              std::vector<RuleError>& errors, const LoadOptions& options) {
  YAML::Node document;
  try {
    auto first = firstDocument(name, content);
    if (auto* error = std::get_if<RuleError>(&first)) {
      errors.push_back(std::move(*error));
      return;
    }
    document = std::get<YAML::Node>(std::move(first));
  } catch (const YAML::ParserException& e) {
    SourceLocation location = locationOf(name, e.mark);
    errors.push_back(RuleError{std::move(location), "YAML syntax error: " + e.msg});
    return;
  } catch (const YAML::Exception& e) {
    errors.push_back(RuleError{{name, 1, 1}, "YAML error: " + e.msg});
    return;
  }
  FileParser parser(name, errors);
  auto domain = parser.parseDocument(document);
  if (!domain) {
    return;
  }
  if (const auto it = domain_origin.find(domain->domain); it != domain_origin.end()) {
    if (options.merge_domain_config) {
      rules_detail::mergeDomain(rules.domains.find(domain->domain)->second, std::move(*domain),
                                errors);
      return;
    }
    errors.push_back(RuleError{domain->location, "duplicate domain " + inQuotes(domain->domain) +
                                                     " (already defined at " + it->second.file +
                                                     ":" + std::to_string(it->second.line) + ":" +
                                                     std::to_string(it->second.column) + ")"});
    return;
  }
  domain_origin.emplace(domain->domain, domain->location);
  std::string key = domain->domain;
  rules.domains.emplace(std::move(key), std::move(*domain));
}

/// Parses and validates every file as one set; stamps the result with `loaded_at_ms`.
LoadResult loadStrings(const std::vector<std::pair<std::string, std::string>>& files,
                       std::int64_t loaded_at_ms, const LoadOptions& options) {
  LoadResult result;
  auto rules = std::make_shared<RuleSet>();
  std::map<std::string, SourceLocation, std::less<>> domain_origin;
  for (const auto& [name, content] : files) {
    rules->files.push_back(name);
    const std::size_t first_error = result.errors.size();
    loadFile(name, content, *rules, domain_origin, result.errors, options);
    // Checks run per section, not per line: present one file's errors in file order.
    std::stable_sort(result.errors.begin() + static_cast<std::ptrdiff_t>(first_error),
                     result.errors.end(), [](const RuleError& a, const RuleError& b) {
                       // Errors without a position (line 0) go last.
                       const auto key = [](const RuleError& e) {
                         return std::make_pair(e.location.line == 0 ? INT_MAX : e.location.line,
                                               e.location.column);
                       };
                       return key(a) < key(b);
                     });
  }
  if (!result.errors.empty()) {
    return result;
  }
  rules->hash = contentHash(files);
  rules->loaded_at_ms = loaded_at_ms;
  result.rules = std::move(rules);
  return result;
}

}  // namespace

LoadResult loadRulesFromStrings(const std::vector<std::pair<std::string, std::string>>& files) {
  return loadStrings(files, 0, LoadOptions{});
}

LoadResult loadRulesFromStrings(const std::vector<std::pair<std::string, std::string>>& files,
                                const LoadOptions& options) {
  return loadStrings(files, 0, options);
}

LoadResult loadRules(const std::string& path, std::int64_t loaded_at_ms) {
  return loadRules(path, loaded_at_ms, LoadOptions{});
}

LoadResult loadRules(const std::string& path, std::int64_t loaded_at_ms,
                     const LoadOptions& options) {
  LoadResult result;
  std::error_code ec;
  const fs::path root(path);
  const auto status = fs::status(root, ec);
  if (ec || !fs::exists(status)) {
    result.errors.push_back(RuleError{{path, 0, 0}, "the rules path does not exist"});
    return result;
  }
  std::vector<fs::path> paths;
  if (fs::is_directory(status)) {
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      std::error_code type_ec;
      if (isRulesFileName(name) && it->is_regular_file(type_ec)) {
        paths.push_back(it->path());
      }
    }
    if (ec) {
      result.errors.push_back(
          RuleError{{path, 0, 0}, "cannot list the rules directory: " + ec.message()});
      return result;
    }
    std::sort(paths.begin(), paths.end());
  } else {
    paths.push_back(root);
  }
  std::vector<std::pair<std::string, std::string>> files;
  for (const fs::path& file : paths) {
    if (auto content = readWholeFile(file, result.errors)) {
      files.emplace_back(file.string(), std::move(*content));
    }
  }
  LoadResult loaded = loadStrings(files, loaded_at_ms, options);
  if (!result.errors.empty()) {
    result.errors.insert(result.errors.end(), loaded.errors.begin(), loaded.errors.end());
    return result;
  }
  return loaded;
}

LoadResult loadRules(const std::string& path) { return loadRules(path, 0); }

}  // namespace sluice
