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

#include "sluice/common/yaml_reader.hpp"
#include "sluice/rules/rules.hpp"

/// Reading helpers for rules files: their keys and sections over the common YAML reader
/// (sluice/common/yaml_reader.hpp), and the conversion of `metadata` to JSON.
namespace sluice::rules_detail {

/// `name` is RateLimitConfig's own name (envoyproxy/ratelimit's xDS resource; Envoy Gateway
/// writes it into its YAML too): accepted and not used.
inline constexpr std::array<std::string_view, 6> kRootKeys{
    "domain", "descriptors", "rate_limit", "rate_limits", "name", "candidate"};
inline constexpr std::array<std::string_view, 12> kDescriptorKeys{
    "key",         "value",           "rate_limit",      "rate_limits",     "descriptors",
    "shadow_mode", "detailed_metric", "value_to_metric", "share_threshold", "metadata",
    "quota_mode",  "candidate"};
inline constexpr std::array<std::string_view, 21> kLimitKeys{"unit",
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
                                                             "consistency",
                                                             "max_in_flight",
                                                             "lease",
                                                             "overridable",
                                                             "calendar",
                                                             "ban"};
inline constexpr std::array<std::string_view, 1> kReplacesKeys{"name"};
/// Where in a rules file a mapping is: which keys it takes and how errors name it.
enum class Section { kRoot, kDescriptor, kLimit, kReplaces };

bool contains(std::span<const std::string_view> list, std::string_view word);

using sluice::Field;
using sluice::Fields;
using sluice::inQuotes;
using sluice::yamlBool;

/// Bounds on `metadata`: YAML aliases can make a node refer to itself or repeat a subtree
/// exponentially, so the conversion stops at this depth or number of nodes.
inline constexpr int kMaxMetadataDepth = 32;
inline constexpr std::size_t kMaxMetadataNodes = 10'000;

/// Converts `metadata` (any YAML) to JSON: plain scalars keep their YAML type, quoted ones
/// stay strings. nullopt when it exceeds the bounds above; `budget` counts nodes down.
std::optional<nlohmann::json> yamlToJson(const YAML::Node& node, int depth, std::size_t& budget);

/// The reader of one rules file (sluice/common/yaml_reader.hpp) with the rules' sections:
/// their keys, and did-you-mean hints for a misspelled or misplaced key.
class YamlReader : public sluice::YamlReader {
 public:
  using sluice::YamlReader::readDuration;
  using sluice::YamlReader::readFields;
  using sluice::YamlReader::YamlReader;

  /// Reads a mapping's fields against the keys of `section`.
  Fields readFields(const YAML::Node& map, Section section);
  /// A duration of at most kMaxRuleSpanMicros (10 years).
  std::optional<Micros> readDuration(const Field& field, std::string_view name);
  /// Counts one descriptor or limit against the file's budget.
  bool spendNode(const YAML::Node& node) {
    return sluice::YamlReader::spendNode(node, "descriptors and limits");
  }
};

}  // namespace sluice::rules_detail
