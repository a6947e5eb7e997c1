#pragma once

#include <yaml-cpp/yaml.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/rules/rules.hpp"

/// Reading helpers for rules files: typed reads of YAML values that report every problem
/// with its file, line and column, and the per-file budgets that bound what a file costs.
namespace sluice::rules_detail {

/// `name` is RateLimitConfig's own name (envoyproxy/ratelimit's xDS resource; Envoy Gateway
/// writes it into its YAML too): accepted and not used.
inline constexpr std::array<std::string_view, 5> kRootKeys{"domain", "descriptors", "rate_limit",
                                                           "rate_limits", "name"};
inline constexpr std::array<std::string_view, 11> kDescriptorKeys{
    "key",         "value",           "rate_limit",      "rate_limits",     "descriptors",
    "shadow_mode", "detailed_metric", "value_to_metric", "share_threshold", "metadata",
    "quota_mode"};
inline constexpr std::array<std::string_view, 16> kLimitKeys{"unit",
                                                             "requests_per_unit",
                                                             "unlimited",
                                                             "name",
                                                             "replaces",
                                                             "algorithm",
                                                             "burst",
                                                             "unit_multiplier",
                                                             "count_rejected",
                                                             "min_interval",
                                                             "shape",
                                                             "warmup",
                                                             "sketch",
                                                             "bloom",
                                                             "expected_clients",
                                                             "consistency"};
inline constexpr std::array<std::string_view, 1> kReplacesKeys{"name"};
/// Where in a rules file a mapping is: which keys it takes and how errors name it.
enum class Section { kRoot, kDescriptor, kLimit, kReplaces };

bool contains(std::span<const std::string_view> list, std::string_view word);

/// `text` between single quotes, as error messages quote names and values.
std::string inQuotes(std::string_view text);

/// A YAML boolean (true/false, yes/no, on/off, any case; not a quoted "!" scalar), or
/// nullopt for anything else.
std::optional<bool> yamlBool(const YAML::Node& node);

/// One `key: value` pair of a YAML mapping, with both nodes for their positions.
struct Field {
  YAML::Node key;
  YAML::Node value;
};
using Fields = std::map<std::string, Field, std::less<>>;

/// Bounds on `metadata`: YAML aliases can make a node refer to itself or repeat a subtree
/// exponentially, so the conversion stops at this depth or number of nodes.
inline constexpr int kMaxMetadataDepth = 32;
inline constexpr std::size_t kMaxMetadataNodes = 10'000;

/// Converts `metadata` (any YAML) to JSON: plain scalars keep their YAML type, quoted ones
/// stay strings. nullopt when it exceeds the bounds above; `budget` counts nodes down.
std::optional<nlohmann::json> yamlToJson(const YAML::Node& node, int depth, std::size_t& budget);

/// Reads the values of one rules file and collects its errors (at most kMaxErrors, then one
/// "too many errors" line) instead of stopping at the first one. Not thread-safe: one
/// reader per file being parsed.
class YamlReader {
 public:
  YamlReader(std::string file, std::vector<RuleError>& errors)
      : file_(std::move(file)), errors_(errors) {}

  const std::string& file() const { return file_; }
  /// How many errors the output holds; a parse step compares it before and after.
  std::size_t errorsReported() const { return errors_.size(); }

  void error(SourceLocation location, std::string message);

  SourceLocation at(const YAML::Mark& mark) const;
  SourceLocation at(const YAML::Node& node) const { return at(node.Mark()); }
  /// The value's position, or the key's when the value is empty (yaml-cpp places an empty
  /// value at the start of the next token, often on the next line).
  SourceLocation at(const Field& field) const;

  /// Reads a mapping's fields; reports unknown keys (with a did-you-mean), non-string keys
  /// and keys given twice.
  Fields readFields(const YAML::Node& map, Section section);

  std::optional<std::string> readString(const Field& field, std::string_view name);
  std::optional<bool> readBool(const Field& field, std::string_view name);
  std::optional<std::int64_t> readInteger(const Field& field, std::string_view name,
                                          std::int64_t min, std::int64_t max);
  std::optional<Micros> readDuration(const Field& field, std::string_view name);

  /// "mapping", "list", "null" or "string": how errors name a node's kind.
  static std::string kindOf(const YAML::Node& node);
  /// A node as errors show it: its quoted text, or its kind.
  static std::string describe(const YAML::Node& node);

  /// Counts one descriptor or limit against the file's budget; reports (once) and returns
  /// false when it is spent. Aliases can repeat a subtree exponentially: this keeps a small
  /// file from taking the reload thread's time and memory.
  bool spendNode(const YAML::Node& node);

 private:
  static std::string unknownKeyMessage(const std::string& name, Section section);

  static constexpr std::size_t kMaxNodes = 100'000;
  static constexpr std::size_t kMaxErrors = 1'000;
  std::size_t nodes_ = 0;
  std::size_t error_count_ = 0;

  std::string file_;
  std::vector<RuleError>& errors_;
};

}  // namespace sluice::rules_detail
