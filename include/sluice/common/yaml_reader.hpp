#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/located_error.hpp"

/// Typed reads of YAML values for every YAML file Sluice reads (after parseYamlDocument,
/// sluice/common/yaml_document.hpp): each problem is reported with its file, line and column.
namespace sluice {

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

/// The keys a mapping takes, and how errors name the mapping.
struct KeySet {
  std::span<const std::string_view> allowed;
  std::string_view where;  ///< "at the top level", "in a descriptor", ...
  /// The message for an unknown key, e.g. with a did-you-mean; unset: "unknown key 'x'
  /// <where> (expected one of: ...)".
  std::function<std::string(const std::string& key)> unknown_key_message;
};

/// Reads the values of one file and collects its errors (at most kMaxErrors, then one "too
/// many errors" line) instead of stopping at the first one. Not thread-safe: one reader per
/// file being read.
class YamlReader {
 public:
  /// How errors name a value: 'burst' must be ... (rules files), or a path such as
  /// forward_auth.deny_status: must be ... (sections of the server YAML).
  enum class Naming { kQuoted, kPath };

  YamlReader(std::string file, std::vector<LocatedError>& errors, Naming naming = Naming::kQuoted)
      : file_(std::move(file)), errors_(errors), naming_(naming) {}

  const std::string& file() const { return file_; }
  /// How many errors the output holds; a read step compares it before and after.
  std::size_t errorsReported() const { return errors_.size(); }

  void error(SourceLocation location, std::string message);

  SourceLocation at(const YAML::Mark& mark) const;
  SourceLocation at(const YAML::Node& node) const { return at(node.Mark()); }
  /// The value's position, or the key's when the value is empty (yaml-cpp places an empty
  /// value at the start of the next token, often on the next line).
  SourceLocation at(const Field& field) const;

  /// Reads a mapping's fields; reports unknown keys, non-string keys and keys given twice.
  Fields readFields(const YAML::Node& map, const KeySet& keys);

  std::optional<std::string> readString(const Field& field, std::string_view name);
  std::optional<bool> readBool(const Field& field, std::string_view name);
  std::optional<std::int64_t> readInteger(const Field& field, std::string_view name,
                                          std::int64_t min, std::int64_t max);
  /// A whole number and a unit (us, ms, s, m, h, d) of at most `max` (`max_text` says it
  /// in errors, e.g. "10 years").
  std::optional<Micros> readDuration(const Field& field, std::string_view name, Micros max,
                                     std::string_view max_text);

  /// "mapping", "list", "null" or "string": how errors name a node's kind.
  static std::string kindOf(const YAML::Node& node);
  /// A node as errors show it: its quoted text, or its kind.
  static std::string describe(const YAML::Node& node);

  /// Counts one element (a descriptor, a limit) against the file's budget; reports (once)
  /// and returns false when it is spent. Aliases can repeat a subtree exponentially: this
  /// keeps a small file from taking the reading thread's time and memory.
  bool spendNode(const YAML::Node& node, std::string_view elements);

 private:
  static constexpr std::size_t kMaxNodes = 100'000;
  static constexpr std::size_t kMaxErrors = 1'000;
  std::size_t nodes_ = 0;
  std::size_t error_count_ = 0;

  /// A value's name as messages start with it: "'name' " or "path: ".
  std::string subject(std::string_view name) const;

  std::string file_;
  std::vector<LocatedError>& errors_;
  Naming naming_;
};

}  // namespace sluice
