#include "rules/limit_parser.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <string>
#include <utility>

#include "rules/ban_rules.hpp"
#include "rules/calendar_rules.hpp"
#include "rules/sketch_rules.hpp"
#include "rules/suggest.hpp"
#include "sluice/rules/consistency.hpp"

namespace sluice::rules_detail {
namespace {

/// envoyproxy/ratelimit stores requests_per_unit as uint32; Sluice keeps the same range.
constexpr std::int64_t kMaxCount = std::numeric_limits<std::uint32_t>::max();

constexpr std::array<std::string_view, 7> kUnitNames{"second", "minute", "hour", "day",
                                                     "week",   "month",  "year"};
constexpr const char* kAlgorithmList =
    "fixed_window, sliding_window_log, sliding_window_counter, token_bucket, leaky_bucket, "
    "sketch, concurrency";
constexpr std::array<std::string_view, 7> kAlgorithmNames{
    "fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket", "leaky_bucket",
    "sketch",       "concurrency"};

/// A concurrency limit's leases live in one bucket's state (a list the stores read and
/// write whole on every decision): its size is bounded.
constexpr std::int64_t kMaxInFlight = 10'000;
/// The shortest lease: shorter ones expire before a request's answer reaches its caller.
constexpr Micros kMinLeaseMicros = 1'000;

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
       {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
        Algorithm::kSketch}},
      {"sketch", {Algorithm::kSketch}},
      {"bloom", {Algorithm::kSketch}},
      {"expected_clients", {Algorithm::kSketch}},
      {"shape", {Algorithm::kLeakyBucket}},
      {"warmup", {Algorithm::kTokenBucket}},
      {"max_in_flight", {Algorithm::kConcurrency}},
      {"lease", {Algorithm::kConcurrency}},
      {"calendar", {Algorithm::kFixedWindow}},
  };
  return kRules;
}

const Field* find(const Fields& fields, std::string_view key) {
  const auto it = fields.find(key);
  return it == fields.end() ? nullptr : &it->second;
}

bool isBucket(Algorithm algorithm) {
  return algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kLeakyBucket;
}

}  // namespace

std::optional<RateLimit> LimitParser::parse(const YAML::Node& map,
                                            const std::string& generated_name, std::size_t index,
                                            bool shadow, bool candidate) {
  if (!reader_.spendNode(map)) {
    return std::nullopt;
  }
  const std::size_t errors_before = reader_.errorsReported();
  const Fields fields = reader_.readFields(map, Section::kLimit);
  RateLimit limit;
  limit.location = reader_.at(map);
  limit.shadow_mode = shadow;
  if (isConcurrency(fields)) {
    readConcurrency(fields, map, limit);
  } else {
    readWindow(fields, map, limit);
    readMultiplier(fields, limit);
  }
  readName(fields, limit);
  // After `name`, wherever the keys are in the file, so a self-reference is caught.
  if (const Field* field = find(fields, "replaces")) {
    readReplaces(*field, limit);
  }
  const bool algorithm_known = readAlgorithm(fields, limit);
  const std::optional<std::int64_t> burst = readParams(fields, algorithm_known, limit);
  checkBurstSpan(fields, limit, burst);
  checkExactArithmetic(fields, limit, burst);
  std::optional<SketchParams> sketch;
  if (algorithm_known && limit.params.algorithm == Algorithm::kSketch && !limit.unlimited) {
    sketch = readSketch(fields, map, limit.requests_per_unit);
  }
  if (const Field* field = find(fields, "overridable")) {
    limit.overridable = reader_.readBool(*field, "overridable").value_or(true);
  }
  if (const Field* field = find(fields, "consistency")) {
    if (const auto text = reader_.readString(*field, "consistency")) {
      if (std::string problem = applyConsistency(*text, limit.params); !problem.empty()) {
        reader_.error(reader_.at(*field), problem);
      } else if (problem = checkConsistency(limit.params); !problem.empty()) {
        reader_.error(reader_.at(*field), problem);
      }
    }
  }
  limit.candidate = candidate;
  if (const Field* field = find(fields, "ban")) {
    readBan(reader_, *field, limit);
  }
  if (reader_.errorsReported() != errors_before) {
    return std::nullopt;
  }
  if (!limit.explicit_name) {
    limit.name = generated_name;
  }
  limit.candidate = candidate;
  limit.limit_id = BucketKey::limitId(limit.explicit_name, limit.name, index, candidate);
  limit.params.limit = limit.requests_per_unit;
  limit.params.window_us = unitMicros(limit.unit) * limit.unit_multiplier;
  if (limit.params.algorithm == Algorithm::kConcurrency) {
    limit.params.window_us = lease_us_;
  }
  limit.params.burst =
      isBucket(limit.params.algorithm) ? burst.value_or(limit.requests_per_unit) : 0;
  if (sketch) {
    limit.params.sketch = std::move(*sketch);
    limit.params.sketch.identity = makeSketchIdentity(domain_, generated_name, limit.limit_id,
                                                      limit.name, limit.params.sketch);
  }
  return limit;
}

// The `sketch` algorithm's options (src/rules/sketch_rules.cpp).
std::optional<SketchParams> LimitParser::readSketch(const Fields& fields, const YAML::Node& map,
                                                    std::int64_t limit) {
  SketchOptions options;
  const auto take = [&](std::string_view key, SketchOption& option) {
    if (const Field* field = find(fields, key)) {
      option.key = field->key;
      option.value = field->value;
    }
  };
  take("sketch", options.sketch);
  take("bloom", options.bloom);
  take("expected_clients", options.expected_clients);
  return parseSketchOptions(options, map, limit,
                            [this](const YAML::Node& node, const std::string& message) {
                              reader_.error(reader_.at(node), message);
                            });
}

bool LimitParser::isConcurrency(const Fields& fields) {
  const Field* field = find(fields, "algorithm");
  return field != nullptr && field->value.IsScalar() && field->value.Scalar() == "concurrency";
}

// A concurrency limit counts leases, not requests per window: `max_in_flight` and `lease`
// take the place of `requests_per_unit` and `unit`.
void LimitParser::readConcurrency(const Fields& fields, const YAML::Node& map, RateLimit& limit) {
  for (const std::string_view key : {"unit", "requests_per_unit", "unit_multiplier", "unlimited"}) {
    if (const Field* field = find(fields, key)) {
      reader_.error(reader_.at(field->key),
                    inQuotes(key) +
                        " does not apply to algorithm 'concurrency' (it limits the requests in "
                        "progress: use 'max_in_flight' and 'lease')");
    }
  }
  lease_us_ = 0;
  if (const Field* field = find(fields, "max_in_flight")) {
    limit.requests_per_unit =
        reader_.readInteger(*field, "max_in_flight", 0, kMaxInFlight).value_or(0);
  } else {
    reader_.error(reader_.at(map),
                  "a concurrency limit is missing 'max_in_flight' (the requests that may be in "
                  "progress at once)");
  }
  if (const Field* field = find(fields, "lease")) {
    if (const auto lease = reader_.readDuration(*field, "lease")) {
      if (*lease < kMinLeaseMicros) {
        reader_.error(reader_.at(*field), "'lease' must be at least 1ms");
      } else {
        lease_us_ = *lease;
      }
    }
  } else {
    reader_.error(reader_.at(map),
                  "a concurrency limit is missing 'lease' (how long a lease is held unless "
                  "released or renewed, e.g. 'lease: 30s')");
  }
}

// `unlimited`, `unit` and `requests_per_unit`: the ones an unlimited limit does without.
void LimitParser::readWindow(const Fields& fields, const YAML::Node& map, RateLimit& limit) {
  if (const Field* field = find(fields, "unlimited")) {
    limit.unlimited = reader_.readBool(*field, "unlimited").value_or(false);
  }
  if (const Field* field = find(fields, "unit")) {
    // UNKNOWN is proto3's default unit (RateLimitUnit 0), which is what an unlimited limit
    // arrives with over xDS: envoyproxy/ratelimit takes it as "no unit", and so does Sluice.
    std::string spelled = field->value.IsScalar() ? field->value.Scalar() : std::string();
    std::transform(spelled.begin(), spelled.end(), spelled.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const bool unknown_unit = spelled == "unknown";
    if (limit.unlimited) {
      if (!unknown_unit) {
        reader_.error(reader_.at(field->key), "should not specify 'unit' when 'unlimited' is true");
      }
    } else if (unknown_unit) {
      reader_.error(reader_.at(*field),
                    "invalid unit " + inQuotes(field->value.Scalar()) +
                        " (expected second, minute, hour, day, week, month or year)");
    } else if (const auto text = reader_.readString(*field, "unit")) {
      if (const auto unit = parseUnit(*text)) {
        limit.unit = *unit;
      } else {
        std::string message = "invalid unit " + inQuotes(*text) +
                              " (expected second, minute, hour, day, week, month or year)";
        if (const auto suggestion = closestMatch(*text, kUnitNames)) {
          message += "; did you mean " + inQuotes(*suggestion) + "?";
        }
        reader_.error(reader_.at(*field), message);
      }
    }
  } else if (!limit.unlimited) {
    reader_.error(reader_.at(map), "rate limit is missing 'unit'");
  }
  if (const Field* field = find(fields, "requests_per_unit")) {
    limit.requests_per_unit =
        reader_.readInteger(*field, "requests_per_unit", 0, kMaxCount).value_or(0);
  } else if (!limit.unlimited) {
    reader_.error(
        reader_.at(map),
        "rate limit is missing 'requests_per_unit' (envoyproxy/ratelimit would read it as 0 "
        "and block all traffic; write 'requests_per_unit: 0' if that is intended)");
  }
}

void LimitParser::readMultiplier(const Fields& fields, RateLimit& limit) {
  const Field* field = find(fields, "unit_multiplier");
  if (field == nullptr) {
    return;
  }
  if (const auto multiplier = reader_.readInteger(*field, "unit_multiplier", 1, kMaxCount)) {
    if (*multiplier > kMaxRuleSpanMicros / unitMicros(limit.unit)) {
      reader_.error(reader_.at(*field), "'unit_multiplier' " + std::to_string(*multiplier) +
                                            " makes the window too long (at most 10 years)");
    } else {
      limit.unit_multiplier = *multiplier;
    }
  }
}

void LimitParser::readName(const Fields& fields, RateLimit& limit) {
  const Field* field = find(fields, "name");
  if (field == nullptr) {
    return;
  }
  if (auto name = reader_.readString(*field, "name")) {
    // An empty name is proto3's default for "no name" (envoyproxy/ratelimit reads it so):
    // the limit keeps its generated name.
    if (!name->empty()) {
      limit.name = std::move(*name);
      limit.explicit_name = true;
      names_.insert(limit.name);
    }
  }
}

void LimitParser::readReplaces(const Field& field, RateLimit& limit) {
  if (!field.value.IsSequence()) {
    reader_.error(reader_.at(field), "'replaces' must be a list of mappings with 'name', not a " +
                                         YamlReader::kindOf(field.value));
    return;
  }
  for (const auto& item : field.value) {
    if (!item.IsMap()) {
      reader_.error(
          reader_.at(item),
          "each 'replaces' entry must be a mapping with 'name', not a " + YamlReader::kindOf(item));
      continue;
    }
    const Fields entry = reader_.readFields(item, Section::kReplaces);
    const auto it = entry.find("name");
    std::optional<std::string> name;
    if (it != entry.end()) {
      name = reader_.readString(it->second, "name");
      if (!name) {
        continue;
      }
    }
    if (!name || name->empty()) {
      reader_.error(reader_.at(item),
                    "should not have an empty 'replaces' entry: it needs a 'name'");
      continue;
    }
    if (limit.explicit_name && *name == limit.name) {
      reader_.error(reader_.at(it->second),
                    "a rate limit cannot replace itself (" + inQuotes(*name) + ")");
      continue;
    }
    limit.replaces.push_back(*name);
    replaces_refs_.push_back(ReplacesRef{*name, reader_.at(it->second)});
  }
}

bool LimitParser::readAlgorithm(const Fields& fields, RateLimit& limit) {
  const Field* field = find(fields, "algorithm");
  if (field == nullptr) {
    return true;
  }
  const auto text = reader_.readString(*field, "algorithm");
  if (!text) {
    return false;
  }
  if (const auto algorithm = parseAlgorithm(*text)) {
    limit.params.algorithm = *algorithm;
    return true;
  }
  std::string message =
      "unknown algorithm " + inQuotes(*text) + " (expected one of " + kAlgorithmList + ")";
  if (const auto suggestion = closestMatch(*text, kAlgorithmNames)) {
    message += "; did you mean " + inQuotes(*suggestion) + "?";
  }
  reader_.error(reader_.at(*field), message);
  return false;
}

std::optional<std::int64_t> LimitParser::readParams(const Fields& fields, bool algorithm_known,
                                                    RateLimit& limit) {
  const Algorithm algorithm = limit.params.algorithm;
  std::optional<std::int64_t> burst;
  for (const ParamRule& rule : paramRules()) {
    const Field* field = find(fields, rule.key);
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
      reader_.error(reader_.at(field->key), inQuotes(rule.key) + " does not apply to algorithm " +
                                                inQuotes(algorithmName(algorithm)) + " (only to " +
                                                applies + ")");
      continue;
    }
    if (rule.key == "burst") {
      burst = reader_.readInteger(*field, "burst", 1, kMaxCount);
    } else if (rule.key == "min_interval") {
      limit.params.min_interval_us = reader_.readDuration(*field, "min_interval").value_or(0);
    } else if (rule.key == "count_rejected") {
      limit.params.count_rejected = reader_.readBool(*field, "count_rejected").value_or(false);
    } else if (rule.key == "shape") {
      limit.params.shape = reader_.readBool(*field, "shape").value_or(false);
    } else if (rule.key == "warmup") {
      limit.params.warmup_us = reader_.readDuration(*field, "warmup").value_or(0);
    } else if (rule.key == "calendar") {
      readCalendar(reader_, *field, limit);
    }
  }
  return burst;
}

// A full bucket takes burst x W / L to drain; the algorithms add it to the current time.
void LimitParser::checkBurstSpan(const Fields& fields, const RateLimit& limit,
                                 std::optional<std::int64_t> burst) {
  if (const Field* field = find(fields, "burst");
      field != nullptr && burst && limit.requests_per_unit > 0 &&
      static_cast<double>(*burst) * static_cast<double>(unitMicros(limit.unit)) *
              static_cast<double>(limit.unit_multiplier) /
              static_cast<double>(limit.requests_per_unit) >
          static_cast<double>(kMaxRuleSpanMicros)) {
    reader_.error(reader_.at(*field), "'burst' " + std::to_string(*burst) +
                                          " makes a full bucket last too long (burst x window / "
                                          "requests_per_unit must be at most 10 years)");
  }
}

// GCRA keeps time in 1/L microsecond steps; the Redis scripts reproduce it exactly only
// while every intermediate (at most burst x requests_per_unit) fits a double's 53 bits.
void LimitParser::checkExactArithmetic(const Fields& fields, const RateLimit& limit,
                                       std::optional<std::int64_t> burst) {
  const Algorithm algorithm = limit.params.algorithm;
  if (!isBucket(algorithm)) {
    return;
  }
  const std::int64_t capacity = burst.value_or(limit.requests_per_unit);
  const Field* field = find(fields, "burst");
  if (field == nullptr) {
    field = find(fields, "requests_per_unit");
  }
  if (field != nullptr && capacity > 0 && limit.requests_per_unit > 0 &&
      capacity > ((std::int64_t{1} << 53) - 1) / limit.requests_per_unit) {
    reader_.error(reader_.at(*field), "burst x requests_per_unit (" + std::to_string(capacity) +
                                          " x " + std::to_string(limit.requests_per_unit) +
                                          ") must stay below 2^53 for " +
                                          std::string(algorithmName(algorithm)) +
                                          " (exact arithmetic in the Redis store)");
  }
}

void LimitParser::checkReplaces(std::string_view domain) {
  for (const ReplacesRef& ref : replaces_refs_) {
    if (names_.count(ref.name) == 0) {
      reader_.error(ref.location, "replaces " + inQuotes(ref.name) +
                                      ", but no rate limit in domain " + inQuotes(domain) +
                                      " has that name");
    }
  }
}

}  // namespace sluice::rules_detail
