#include "sluice/rules/rate_limit_config.hpp"

#include <cctype>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

namespace sluice {
namespace {

/// A YAML double-quoted scalar: JSON's string escaping is a subset of YAML's.
std::string yamlQuoted(std::string_view text) {
  return nlohmann::json(std::string(text))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// Renders one resource as a rules document, one field per line, remembering for each line
/// the path of the proto field it came from, so that the loader's errors (file:line:column)
/// can be told in the resource's own terms.
class Renderer {
 public:
  std::string render(const RateLimitConfigResource& resource) {
    line("name: " + yamlQuoted(resource.name), "name");
    line("domain: " + yamlQuoted(resource.domain), "domain");
    descriptors(resource.descriptors, "", 0);
    return std::move(text_);
  }

  /// The proto path of a 1-based line of the rendered document.
  const std::string& pathOf(int line) const {
    static const std::string kNone;
    if (line < 1 || static_cast<std::size_t>(line) > paths_.size()) {
      return kNone;
    }
    return paths_[static_cast<std::size_t>(line) - 1];
  }

 private:
  void line(const std::string& content, std::string path) {
    text_ += content;
    text_ += '\n';
    paths_.push_back(std::move(path));
  }

  void descriptors(const std::vector<RateLimitDescriptorConfig>& list, const std::string& parent,
                   int depth) {
    const std::string indent(static_cast<std::size_t>(depth) * 4, ' ');
    if (list.empty()) {
      return;
    }
    line(indent + "descriptors:", parent + (parent.empty() ? "" : ".") + "descriptors");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const RateLimitDescriptorConfig& d = list[i];
      const std::string path =
          parent + (parent.empty() ? "" : ".") + "descriptors[" + std::to_string(i) + "]";
      const std::string in = indent + "    ";
      line(indent + "  - key: " + yamlQuoted(d.key), path + ".key");
      line(in + "value: " + yamlQuoted(d.value), path + ".value");
      if (d.rate_limit) {
        const RateLimitPolicyConfig& p = *d.rate_limit;
        const std::string at = path + ".rate_limit";
        line(in + "rate_limit:", at);
        const std::string unit = rateLimitUnitName(p.unit);
        line(in + "  unit: " +
                 yamlQuoted(unit.empty() ? "RateLimitUnit " + std::to_string(p.unit) : unit),
             at + ".unit");
        line(in + "  requests_per_unit: " + std::to_string(p.requests_per_unit),
             at + ".requests_per_unit");
        line(in + "  unlimited: " + std::string(p.unlimited ? "true" : "false"), at + ".unlimited");
        line(in + "  name: " + yamlQuoted(p.name), at + ".name");
        if (!p.replaces.empty()) {
          line(in + "  replaces:", at + ".replaces");
          for (std::size_t r = 0; r < p.replaces.size(); ++r) {
            line(in + "    - name: " + yamlQuoted(p.replaces[r]),
                 at + ".replaces[" + std::to_string(r) + "].name");
          }
        }
      }
      line(in + "shadow_mode: " + std::string(d.shadow_mode ? "true" : "false"),
           path + ".shadow_mode");
      line(in + "detailed_metric: " + std::string(d.detailed_metric ? "true" : "false"),
           path + ".detailed_metric");
      line(in + "quota_mode: " + std::string(d.quota_mode ? "true" : "false"),
           path + ".quota_mode");
      if (!d.metadata_json.empty()) {
        // JSON is YAML's flow style; a Struct's JSON is one line.
        line(in + "metadata: " + d.metadata_json, path + ".metadata");
      }
      descriptors(d.descriptors, path, depth + 1);
    }
  }

  std::string text_;
  std::vector<std::string> paths_;
};

/// The loader's bound on descriptors and limits in one document, checked before rendering:
/// a resource far beyond it would cost seconds of YAML parsing before being refused.
constexpr std::size_t kMaxNodesPerResource = 100'000;

std::size_t countNodes(const std::vector<RateLimitDescriptorConfig>& list, std::size_t limit) {
  std::size_t n = 0;
  for (const RateLimitDescriptorConfig& d : list) {
    n += 1 + (d.rate_limit ? 1 : 0);
    if (n > limit) {
      return n;
    }
    n += countNodes(d.descriptors, limit - n);
  }
  return n;
}

}  // namespace

std::string rateLimitUnitName(int unit) {
  switch (unit) {
    case 0:
      return "UNKNOWN";
    case 1:
      return "SECOND";
    case 2:
      return "MINUTE";
    case 3:
      return "HOUR";
    case 4:
      return "DAY";
    case 5:
      return "MONTH";
    case 6:
      return "YEAR";
    case 7:
      return "WEEK";
    default:
      return "";
  }
}

LoadResult loadRateLimitConfigs(const std::vector<RateLimitConfigResource>& resources,
                                std::int64_t loaded_at_ms, const LoadOptions& options) {
  LoadResult refused;
  for (const RateLimitConfigResource& resource : resources) {
    if (countNodes(resource.descriptors, kMaxNodesPerResource) > kMaxNodesPerResource) {
      refused.errors.push_back(
          RuleError{{"RateLimitConfig " + yamlQuoted(resource.name) + " descriptors", 0, 0},
                    "more than " + std::to_string(kMaxNodesPerResource) +
                        " descriptors and limits in one resource"});
    }
  }
  if (!refused.errors.empty()) {
    return refused;
  }
  std::vector<std::pair<std::string, std::string>> files;
  std::vector<Renderer> renderers(resources.size());
  files.reserve(resources.size());
  for (std::size_t i = 0; i < resources.size(); ++i) {
    // Named by position too: two resources may share a name, and a file name is an identity.
    char prefix[32];
    std::snprintf(prefix, sizeof(prefix), "xds:%06zu:", i);
    files.emplace_back(prefix + resources[i].name, renderers[i].render(resources[i]));
  }
  LoadResult loaded = loadRulesFromStrings(files, loaded_at_ms, options);
  for (RuleError& error : loaded.errors) {
    for (std::size_t i = 0; i < files.size(); ++i) {
      if (error.location.file != files[i].first) {
        continue;
      }
      std::string where = "RateLimitConfig " + yamlQuoted(resources[i].name);
      if (const std::string& path = renderers[i].pathOf(error.location.line); !path.empty()) {
        where += " " + path;
      }
      error.location = SourceLocation{std::move(where), 0, 0};
      break;
    }
    // A message naming another resource's position ("duplicate domain ... already defined
    // at <file>:1:1") names that resource instead.
    for (std::size_t i = 0; i < files.size(); ++i) {
      for (auto at = error.message.find(files[i].first); at != std::string::npos;
           at = error.message.find(files[i].first, at + 1)) {
        std::size_t end = at + files[i].first.size();
        while (end < error.message.size() &&
               (error.message[end] == ':' ||
                std::isdigit(static_cast<unsigned char>(error.message[end])))) {
          ++end;
        }
        error.message.replace(at, end - at, "RateLimitConfig " + yamlQuoted(resources[i].name));
      }
    }
  }
  if (loaded.rules) {
    auto rules = std::make_shared<RuleSet>(*loaded.rules);
    for (std::string& file : rules->files) {
      file = "xds:" + file.substr(file.find(':', 4) + 1);
    }
    loaded.rules = std::move(rules);
  }
  return loaded;
}

}  // namespace sluice
