#include <nlohmann/json.hpp>
#include <ostream>

#include "sluice/limiter/sketch.hpp"
#include "sluice/rules/consistency.hpp"
#include "sluice/rules/rules.hpp"

namespace sluice {
namespace {

using nlohmann::json;

std::string locationText(const SourceLocation& location) {
  return location.file + ":" + std::to_string(location.line) + ":" +
         std::to_string(location.column);
}

json limitToJson(const RateLimit& limit) {
  json out = {
      {"name", limit.name},           {"explicit_name", limit.explicit_name},
      {"unlimited", limit.unlimited}, {"shadow_mode", limit.shadow_mode},
      {"slot", limit.limit_id},       {"location", locationText(limit.location)},
  };
  if (limit.candidate) {
    out["candidate"] = true;
  }
  if (!limit.unlimited) {
    const LimitParams& params = limit.params;
    out["unit"] = unitName(limit.unit);
    out["unit_multiplier"] = limit.unit_multiplier;
    out["requests_per_unit"] = limit.requests_per_unit;
    out["window_ms"] = params.window_us / kMicrosPerMilli;
    out["algorithm"] = algorithmName(params.algorithm);
    out["consistency"] = rules_detail::consistencyName(params.consistency);
    if (!limit.overridable) {
      out["overridable"] = false;
    }
    if (params.algorithm == Algorithm::kTokenBucket ||
        params.algorithm == Algorithm::kLeakyBucket) {
      out["burst"] = params.burst;
    }
    if (params.algorithm == Algorithm::kLeakyBucket) {
      out["shape"] = params.shape;
    }
    if (params.algorithm == Algorithm::kSlidingWindowLog) {
      out["min_interval_ms"] = static_cast<double>(params.min_interval_us) / kMicrosPerMilli;
    }
    if (params.algorithm == Algorithm::kTokenBucket) {
      out["warmup_ms"] = static_cast<double>(params.warmup_us) / kMicrosPerMilli;
    }
    if (params.algorithm == Algorithm::kConcurrency) {
      out["max_in_flight"] = params.limit;
      out["lease_ms"] = static_cast<double>(params.window_us) / kMicrosPerMilli;
    } else if (params.algorithm != Algorithm::kTokenBucket &&
               params.algorithm != Algorithm::kLeakyBucket) {
      out["count_rejected"] = params.count_rejected;
    }
    if (params.ban.enabled()) {
      out["ban"] = {{"after", params.ban.after},
                    {"duration_ms", params.ban.duration_us / kMicrosPerMilli},
                    {"backoff", static_cast<double>(params.ban.backoff_milli) / 1000},
                    {"max_ms", params.ban.max_us / kMicrosPerMilli},
                    {"forgive_after_ms", params.ban.forgive_us / kMicrosPerMilli}};
    }
    if (params.calendar.enabled()) {
      json calendar = {{"unit", calendarUnitName(params.calendar.unit)}};
      if (!limit.calendar_zone_from.empty()) {
        calendar["time_zone_from"] = limit.calendar_zone_from;
      }
      if (params.calendar.zone != nullptr) {
        calendar["time_zone"] = timeZoneName(*params.calendar.zone);
      } else if (limit.calendar_zone_from.empty()) {
        calendar["time_zone"] = "UTC";
      }
      out["calendar"] = std::move(calendar);
    }
    if (params.algorithm == Algorithm::kSketch) {
      const SketchParams& sketch = params.sketch;
      out["sketch"] = {{"width", sketch.width},
                       {"depth", sketch.depth},
                       {"counter_bits", sketch.counter_bits},
                       {"bloom", sketch.bloom_bits > 0},
                       {"bloom_bits", sketch.bloom_bits},
                       {"memory_bytes", sketchStateBytes(sketch)}};
    }
  }
  if (!limit.replaces.empty()) {
    json replaces = json::array();
    for (const std::string& name : limit.replaces) {
      replaces.push_back({{"name", name}});
    }
    out["replaces"] = std::move(replaces);
  }
  return out;
}

json limitsToJson(const std::vector<RateLimit>& limits) {
  json out = json::array();
  for (const RateLimit& limit : limits) {
    out.push_back(limitToJson(limit));
  }
  return out;
}

json nodesToJson(const std::vector<DescriptorNode>& nodes) {
  json out = json::array();
  for (const DescriptorNode& node : nodes) {
    json item = {{"key", node.key}};
    if (node.value) {
      item["value"] = *node.value;
    }
    item["wildcard"] = node.wildcard;
    item["share_threshold"] = node.share_threshold;
    item["shadow_mode"] = node.shadow_mode;
    if (node.quota_mode) {
      item["quota_mode"] = true;
    }
    item["detailed_metric"] = node.detailed_metric;
    item["value_to_metric"] = node.value_to_metric;
    if (!node.metadata_json.empty()) {
      item["metadata"] = json::parse(node.metadata_json, nullptr, false);
    }
    item["rate_limits"] = limitsToJson(node.limits);
    item["descriptors"] = nodesToJson(node.children);
    item["location"] = locationText(node.location);
    out.push_back(std::move(item));
  }
  return out;
}

}  // namespace

std::string rulesToJson(const RuleSet& rules) {
  json domains = json::object();
  for (const auto& [name, domain] : rules.domains) {
    domains[name] = {
        {"file", domain.location.file},
        {"line", domain.location.line},
        {"rate_limits", limitsToJson(domain.domain_limits)},
        {"descriptors", nodesToJson(domain.descriptors)},
    };
  }
  json out = {
      {"hash", rules.hash},
      {"loaded_at_ms", rules.loaded_at_ms},
      {"files", rules.files},
      {"limit_count", rules.limitCount()},
      {"domains", std::move(domains)},
  };
  if (!rules.version.empty()) {
    out["version"] = rules.version;  // the xDS version_info in force
  }
  // Replace invalid UTF-8 instead of throwing: rule text comes from files.
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

int validateRulesCommand(const std::string& path, std::ostream& out) {
  return validateRulesCommand(path, out, LoadOptions{});
}

int validateRulesCommand(const std::string& path, std::ostream& out, const LoadOptions& options) {
  const LoadResult result = loadRules(path, 0, options);
  if (!result.errors.empty()) {
    for (const RuleError& error : result.errors) {
      out << error.toString() << '\n';
    }
    out << result.errors.size() << (result.errors.size() == 1 ? " error" : " errors") << " in "
        << path << '\n';
    return 1;
  }
  out << path << ": OK (" << result.rules->domains.size() << " domains, "
      << result.rules->limitCount() << " limits, " << result.rules->files.size() << " files, hash "
      << result.rules->hash << ")\n";
  return 0;
}

}  // namespace sluice
