#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>
#include <utility>
#include <variant>

#include "rules/calendar_rules.hpp"
#include "rules/domain_merge.hpp"
#include "rules/limit_parser.hpp"
#include "rules/yaml_reader.hpp"
#include "sluice/common/yaml_document.hpp"
#include "sluice/rules/rules.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using rules_detail::Field;
using rules_detail::Fields;
using rules_detail::inQuotes;
using rules_detail::kMaxMetadataDepth;
using rules_detail::kMaxMetadataNodes;
using rules_detail::LimitParser;
using rules_detail::Section;
using rules_detail::YamlReader;
using rules_detail::yamlToJson;

/// A rules file larger than this is refused: rules are hand-written, and the cap keeps a
/// mistaken path (a log file, a binary) from being read into memory.
constexpr std::uintmax_t kMaxFileBytes = 16U * 1024U * 1024U;

/// Parses and validates one rules document, collecting every error instead of stopping at
/// the first one.
class FileParser {
 public:
  FileParser(std::string file, std::vector<RuleError>& errors)
      : reader_(std::move(file), errors), limits_(reader_) {}

  std::optional<DomainConfig> parseDocument(const YAML::Node& root) {
    const std::size_t errors_before = reader_.errorsReported();
    if (!root.IsDefined() || root.IsNull()) {
      reader_.error(SourceLocation{reader_.file(), 1, 1},
                    "the file is empty: expected a mapping with 'domain' and 'descriptors'");
      return std::nullopt;
    }
    if (!root.IsMap()) {
      reader_.error(reader_.at(root), "the file must be a mapping with 'domain' and 'descriptors'");
      return std::nullopt;
    }
    const Fields fields = reader_.readFields(root, Section::kRoot);
    DomainConfig domain;
    domain.location = reader_.at(root);
    if (const auto it = fields.find("domain"); it == fields.end()) {
      reader_.error(reader_.at(root), "missing 'domain'");
    } else if (auto name = reader_.readString(it->second, "domain")) {
      if (name->empty()) {
        reader_.error(reader_.at(it->second), "'domain' must not be empty");
      }
      domain.domain = std::move(*name);
      domain.location = reader_.at(it->second);
    }
    if (const auto it = fields.find("name"); it != fields.end()) {
      reader_.readString(it->second, "name");  // RateLimitConfig's name: a string, not used
    }
    domain_ = domain.domain;
    limits_.setDomain(domain.domain);
    domain.domain_limits = parseNodeLimits(fields, domain.domain, false);
    parseCandidate(fields, domain.domain, domain.domain_limits);
    if (const auto it = fields.find("descriptors"); it != fields.end()) {
      parseDescriptors(it->second, domain.domain, domain.descriptors, domain.descriptors_index);
    }
    limits_.checkReplaces(domain_);
    if (reader_.errorsReported() != errors_before) {
      return std::nullopt;
    }
    return domain;
  }

 private:
  /// Parses a `descriptors:` list into `out` and indexes it; reports duplicates.
  void parseDescriptors(const Field& field, const std::string& parent_name,
                        std::vector<DescriptorNode>& out, DescriptorLevelIndex& index) {
    if (field.value.IsNull()) {
      return;
    }
    if (!field.value.IsSequence()) {
      reader_.error(reader_.at(field),
                    "'descriptors' must be a list of mappings with 'key', not a " +
                        YamlReader::kindOf(field.value));
      return;
    }
    // Composite key (key, value) -> line, to report duplicates at one level.
    std::map<std::pair<std::string, std::string>, int> seen;
    for (const auto& item : field.value) {
      if (!item.IsMap()) {
        reader_.error(reader_.at(item),
                      "each item of 'descriptors' must be a mapping with 'key', not a " +
                          YamlReader::kindOf(item));
        continue;
      }
      if (!reader_.spendNode(item)) {
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
        reader_.error(node->location, "duplicate descriptor composite key " +
                                          inQuotes(parent_name + "." + node->key + value_part) +
                                          " (first defined at line " + std::to_string(it->second) +
                                          ")");
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
    const std::size_t errors_before = reader_.errorsReported();
    const Fields fields = reader_.readFields(map, Section::kDescriptor);
    DescriptorNode node;
    node.location = reader_.at(map);
    if (const auto it = fields.find("key"); it == fields.end()) {
      reader_.error(reader_.at(map), "descriptor is missing 'key'");
    } else if (auto key = reader_.readString(it->second, "key")) {
      if (key->empty()) {
        reader_.error(reader_.at(it->second), "descriptor has an empty 'key'");
      }
      node.key = std::move(*key);
    }
    if (const auto it = fields.find("value"); it != fields.end()) {
      if (auto value = reader_.readString(it->second, "value"); value && !value->empty()) {
        // As in envoyproxy/ratelimit, an empty value means a key-only node.
        node.wildcard = value->find('*') != std::string::npos;
        node.value = std::move(*value);
      }
    }
    const auto flag = [&](std::string_view name, bool& out) {
      if (const auto it = fields.find(name); it != fields.end()) {
        if (const auto value = reader_.readBool(it->second, name)) {
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
      reader_.error(reader_.at(fields.find("share_threshold")->second),
                    "'share_threshold' needs a wildcard 'value' (one containing '*')");
    }
    readMetadata(fields, node);
    const std::string name =
        parent_name + "." + node.key + (node.value ? "_" + *node.value : std::string());
    path_keys_.push_back(node.key);
    node.limits = parseNodeLimits(fields, name, node.shadow_mode);
    for (RateLimit& limit : node.limits) {
      limit.quota_mode = node.quota_mode;
    }
    parseCandidate(fields, name, node.limits);
    if (const auto it = fields.find("descriptors"); it != fields.end()) {
      if (depth_ >= kMaxDepth) {
        reader_.error(reader_.at(it->second.key), "descriptors are nested deeper than " +
                                                      std::to_string(kMaxDepth) + " levels");
      } else {
        ++depth_;
        parseDescriptors(it->second, name, node.children, node.children_index);
        --depth_;
      }
    }
    path_keys_.pop_back();
    if (reader_.errorsReported() != errors_before) {
      return std::nullopt;
    }
    return node;
  }

  /// `metadata:` as compact JSON, within the bounds of rules_detail::yamlToJson.
  void readMetadata(const Fields& fields, DescriptorNode& node) {
    const auto it = fields.find("metadata");
    if (it == fields.end()) {
      return;
    }
    std::size_t budget = kMaxMetadataNodes;
    if (auto json = yamlToJson(it->second.value, 1, budget)) {
      node.metadata_json = json->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } else {
      reader_.error(reader_.at(it->second),
                    "'metadata' must be plain data with string keys, at most " +
                        std::to_string(kMaxMetadataDepth) + " levels deep and " +
                        std::to_string(kMaxMetadataNodes) +
                        " values (is an alias referring to itself?)");
    }
  }

  /// The limits of one node (or of the domain): `rate_limit:` or `rate_limits:`.
  std::vector<RateLimit> parseNodeLimits(const Fields& fields, const std::string& base_name,
                                         bool shadow) {
    std::vector<RateLimit> limits;
    const auto single = fields.find("rate_limit");
    const auto list = fields.find("rate_limits");
    if (single != fields.end() && list != fields.end()) {
      reader_.error(reader_.at(list->second.key),
                    "use either 'rate_limit' or 'rate_limits' on one node, not both");
      return limits;
    }
    if (single != fields.end() && single->second.value.IsNull()) {
      // `rate_limit: null` (or empty): no limit at this node, as envoyproxy/ratelimit reads
      // an absent policy; Envoy Gateway writes it for every intermediate node.
    } else if (single != fields.end()) {
      if (!single->second.value.IsMap()) {
        reader_.error(reader_.at(single->second),
                      "'rate_limit' must be a mapping with 'unit' and "
                      "'requests_per_unit', not a " +
                          YamlReader::kindOf(single->second.value));
      } else if (auto limit = limits_.parse(single->second.value, base_name, 0, shadow)) {
        rules_detail::checkCalendarZoneKey(reader_, *limit, path_keys_);
        limits.push_back(std::move(*limit));
      }
    }
    if (list != fields.end()) {
      const YAML::Node& items = list->second.value;
      if (!items.IsSequence() || items.size() == 0) {
        reader_.error(reader_.at(list->second),
                      "'rate_limits' must be a non-empty list of rate limits");
        return limits;
      }
      std::map<std::string, int> names;
      std::size_t index = 0;
      for (const auto& item : items) {
        if (!item.IsMap()) {
          reader_.error(reader_.at(item),
                        "each item of 'rate_limits' must be a mapping with 'unit' and "
                        "'requests_per_unit', not a " +
                            YamlReader::kindOf(item));
        } else if (auto limit = limits_.parse(item, base_name + "[" + std::to_string(index) + "]",
                                              index, shadow)) {
          if (limit->explicit_name) {
            const auto [it, inserted] = names.emplace(limit->name, limit->location.line);
            if (!inserted) {
              reader_.error(limit->location, "duplicate rate limit name " + inQuotes(limit->name) +
                                                 " on one node (first at line " +
                                                 std::to_string(it->second) + ")");
            }
          }
          rules_detail::checkCalendarZoneKey(reader_, *limit, path_keys_);
          limits.push_back(std::move(*limit));
        }
        ++index;
      }
    }
    return limits;
  }

  /// `candidate:` (a rate limit's fields, any algorithm) appended to the node's limits: it
  /// never denies (docs/what-if.md), so neither shadow nor quota mode applies to it.
  void parseCandidate(const Fields& fields, const std::string& base_name,
                      std::vector<RateLimit>& limits) {
    const auto it = fields.find("candidate");
    if (it == fields.end()) {
      return;
    }
    if (!it->second.value.IsMap()) {
      reader_.error(reader_.at(it->second),
                    "'candidate' must be a mapping with 'unit' and 'requests_per_unit' (a rate "
                    "limit's fields), not a " +
                        YamlReader::kindOf(it->second.value));
      return;
    }
    if (auto limit = limits_.parse(it->second.value, base_name + ".candidate", 0, false, true)) {
      if (!limit->replaces.empty()) {
        reader_.error(limit->location, "a candidate cannot 'replaces' other limits");
        return;
      }
      limits.push_back(std::move(*limit));
    }
  }

  /// Bounds the recursion (and the stack of the thread that reloads); real trees are a few
  /// levels deep.
  static constexpr int kMaxDepth = 64;

  YamlReader reader_;
  LimitParser limits_;
  /// The keys of the descriptors from the top to the node being read (a calendar limit's
  /// `time_zone_from` must be one of them).
  std::vector<std::string> path_keys_;
  int depth_ = 1;
  std::string domain_;
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

/// Parses one file into `rules`; reports into `errors`. yaml-cpp's exceptions stop here.
void loadFile(const std::string& name, const std::string& content, RuleSet& rules,
              std::map<std::string, SourceLocation, std::less<>>& domain_origin,
              std::vector<RuleError>& errors, const LoadOptions& options) {
  // Strict: what YAML forbids but yaml-cpp 0.7 accepts is an error too.
  YamlDocument document =
      parseYamlDocument(name, content, "only one YAML document (one domain) per file");
  if (document.error) {
    errors.push_back(std::move(*document.error));
    return;
  }
  FileParser parser(name, errors);
  auto domain = parser.parseDocument(document.root);
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

/// Fills DescriptorNode::exact_prefix and RateLimit::exact_bucket_key under `level`, whose
/// parent's prefix is `prefix`: the bucket keys of requests that meet the rules' own values,
/// built once here rather than per request by the matcher.
void prepareExactBucketKeys(std::vector<DescriptorNode>& level, const std::string& prefix) {
  for (DescriptorNode& node : level) {
    if (!node.value) {
      continue;  // key-only: the request's value is part of the key, here and below
    }
    node.exact_prefix = prefix;
    if (node.share_threshold) {
      BucketKey::appendSharedEntry(node.exact_prefix, node.key, *node.value);
    } else {
      BucketKey::appendEntry(node.exact_prefix, node.key, *node.value);
    }
    for (RateLimit& limit : node.limits) {
      limit.exact_bucket_key = node.exact_prefix;
      BucketKey::appendLimit(limit.exact_bucket_key, limit.limit_id, limit.params.algorithm);
    }
    prepareExactBucketKeys(node.children, node.exact_prefix);
  }
}

void prepareExactBucketKeys(DomainConfig& domain) {
  std::string prefix;
  BucketKey::appendDomain(prefix, domain.domain);
  for (RateLimit& limit : domain.domain_limits) {
    limit.exact_bucket_key = prefix;
    BucketKey::appendLimit(limit.exact_bucket_key, limit.limit_id, limit.params.algorithm);
  }
  prepareExactBucketKeys(domain.descriptors, prefix);
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
  for (auto& [name, domain] : rules->domains) {
    prepareExactBucketKeys(domain);
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

LoadResult loadRulesFromStrings(const std::vector<std::pair<std::string, std::string>>& files,
                                std::int64_t loaded_at_ms, const LoadOptions& options) {
  return loadStrings(files, loaded_at_ms, options);
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
