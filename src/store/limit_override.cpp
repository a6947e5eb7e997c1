#include "sluice/store/limit_override.hpp"

#include <charconv>
#include <nlohmann/json.hpp>
#include <string>

namespace sluice {
namespace {

constexpr std::string_view kMagic = "sluice-override 1";
constexpr std::size_t kNumbers = 11;

Error bad(const std::string& why) {
  return makeError(ErrorKind::kInvalidArgument, "override: " + why);
}

}  // namespace

void applyOverride(LimitParams& params, const StoredOverride& value) {
  params.limit = value.params.limit;
  params.window_us = value.params.window_us;
  params.burst = value.params.burst;
  params.min_interval_us = value.params.min_interval_us;
  params.count_rejected = value.params.count_rejected;
  params.warmup_us = value.params.warmup_us;
}

Gauge& overridesGauge(Metrics& metrics) {
  metrics.describe("overrides", Metrics::Type::kGauge,
                   "Runtime overrides kept by the store, as this process last saw them.");
  return metrics.gauge("overrides");
}

std::string overrideRuleField(std::string_view rule_name) {
  std::string field = "r:";
  field += rule_name;
  return field;
}

std::string overrideBucketField(std::string_view bucket) {
  std::string field = "b:";
  field += bucket;
  return field;
}

std::string_view overrideTagOf(std::string_view store_key) { return BucketKey::hashTag(store_key); }

std::string_view overrideBucketOf(std::string_view store_key) {
  const std::size_t bar = store_key.find('|');
  return bar == std::string_view::npos ? std::string_view() : store_key.substr(bar + 1);
}

std::string encodeOverride(const StoredOverride& v) {
  const LimitParams& p = v.params;
  std::string text(kMagic);
  for (const std::int64_t number :
       {static_cast<std::int64_t>(p.algorithm), p.limit, p.window_us, p.burst, p.min_interval_us,
        static_cast<std::int64_t>(p.count_rejected ? 1 : 0), p.warmup_us, v.expires_at_us,
        v.requests_per_unit, static_cast<std::int64_t>(v.unit), v.unit_multiplier}) {
    text += ' ';
    text += std::to_string(number);
  }
  text += '\n';
  text += nlohmann::json(v.reason).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text += '\n';
  text += v.record_json;
  return text;
}

Result<StoredOverride> decodeOverride(std::string_view text) {
  const std::size_t first = text.find('\n');
  const std::size_t second = first == std::string_view::npos ? first : text.find('\n', first + 1);
  if (second == std::string_view::npos) {
    return bad("not an override (three lines expected)");
  }
  std::string_view numbers = text.substr(0, first);
  if (numbers.substr(0, kMagic.size()) != kMagic) {
    return bad("not an override (unknown format)");
  }
  numbers.remove_prefix(kMagic.size());
  std::int64_t n[kNumbers] = {};
  for (std::int64_t& value : n) {
    if (numbers.empty() || numbers.front() != ' ') {
      return bad("too few numbers");
    }
    numbers.remove_prefix(1);
    auto [end, ec] = std::from_chars(numbers.data(), numbers.data() + numbers.size(), value);
    if (ec != std::errc()) {
      return bad("a number is malformed");
    }
    numbers.remove_prefix(static_cast<std::size_t>(end - numbers.data()));
  }
  if (!numbers.empty()) {
    return bad("too many numbers");
  }
  if (n[0] < 0 || n[0] > static_cast<std::int64_t>(Algorithm::kSketch) || n[1] < 0 || n[2] <= 0 ||
      n[9] < 0 || n[9] > static_cast<std::int64_t>(TimeUnit::kYear) || n[10] <= 0) {
    return bad("a number is out of range");
  }
  StoredOverride v;
  v.params.algorithm = static_cast<Algorithm>(n[0]);
  v.params.limit = n[1];
  v.params.window_us = n[2];
  v.params.burst = n[3];
  v.params.min_interval_us = n[4];
  v.params.count_rejected = n[5] != 0;
  v.params.warmup_us = n[6];
  v.expires_at_us = n[7];
  v.requests_per_unit = n[8];
  v.unit = static_cast<TimeUnit>(n[9]);
  v.unit_multiplier = n[10];
  try {
    const nlohmann::json reason = nlohmann::json::parse(text.substr(first + 1, second - first - 1));
    if (!reason.is_string()) {
      return bad("the reason is not a string");
    }
    v.reason = reason.get<std::string>();
  } catch (const nlohmann::json::exception&) {
    return bad("the reason is not JSON");
  }
  v.record_json = std::string(text.substr(second + 1));
  return v;
}

}  // namespace sluice
