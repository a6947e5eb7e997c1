#include "http/decision_codec.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "http/decision_body.hpp"
#include "http/fast_decision_parser.hpp"
#include "sluice/common/json_writer.hpp"
#include "sluice/decision/envoy_response.hpp"
#include "sluice/decision/lease_id.hpp"
#include "sluice/decision/rate_limit_headers.hpp"
#include "sluice/decision/request_shape.hpp"

namespace sluice::http {
namespace {

using Json = nlohmann::json;

Error fieldError(const std::string& path, std::string_view what) {
  return makeError(ErrorKind::kInvalidArgument, path + ": " + std::string(what));
}

std::string indexed(const std::string& path, std::size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; users need the rest.
std::string withoutExceptionTag(std::string_view what) {
  auto pos = what.find("] ");
  return std::string(pos == std::string_view::npos ? what : what.substr(pos + 2));
}

Result<Json> parseBody(std::string_view body) {
  try {
    Json json = Json::parse(body);
    if (!json.is_object()) {
      return makeError(ErrorKind::kInvalidArgument, "body: must be a JSON object");
    }
    return json;
  } catch (const Json::exception& e) {
    return makeError(ErrorKind::kInvalidArgument,
                     "body: invalid JSON: " + withoutExceptionTag(e.what()));
  }
}

/// A string field; `allow_empty` for descriptor values. Its length is checkDecisionRequest()'s.
Result<std::string> stringField(const Json& value, const std::string& path, bool allow_empty) {
  if (!value.is_string()) {
    return fieldError(path, allow_empty ? "must be a string" : "must be a non-empty string");
  }
  const auto& text = value.get_ref<const std::string&>();
  if (text.empty() && !allow_empty) {
    return fieldError(path, "must be a non-empty string");
  }
  return text;
}

/// A count in [0, kMaxHits]; proto3 JSON also spells integers as strings ("3").
Result<std::int64_t> hitsField(const Json& value, const std::string& path, bool allow_string) {
  std::string bounds = "must be an integer from 0 to " + std::to_string(kMaxHits);
  if (value.is_number_unsigned()) {
    auto v = value.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(kMaxHits)) {
      return fieldError(path, bounds);
    }
    return static_cast<std::int64_t>(v);
  }
  if (value.is_number_integer()) {
    return fieldError(path, bounds);  // a negative integer
  }
  if (allow_string && value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    std::int64_t v = -1;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v < 0 || v > kMaxHits) {
      return fieldError(path, bounds);
    }
    return v;
  }
  return fieldError(path, bounds);
}

Result<Entry> parseEntry(const Json& json, const std::string& path) {
  if (!json.is_object()) {
    return fieldError(path, "must be an object {\"key\": ..., \"value\": ...}");
  }
  for (const auto& [name, unused] : json.items()) {
    if (name != "key" && name != "value") {
      return fieldError(path, "unknown field \"" + name + "\" (expected \"key\" and \"value\")");
    }
  }
  auto key_it = json.find("key");
  if (key_it == json.end()) {
    return fieldError(path + ".key", "is required");
  }
  auto key = stringField(*key_it, path + ".key", false);
  if (!key) {
    return key.error();
  }
  auto value_it = json.find("value");
  if (value_it == json.end() || value_it->is_null()) {
    // As envoyproxy/ratelimit: proto3 JSON leaves an empty value out, so none means "".
    return Entry{std::move(*key), std::string()};
  }
  auto value = stringField(*value_it, path + ".value", true);
  if (!value) {
    return value.error();
  }
  return Entry{std::move(*key), std::move(*value)};
}

Result<Descriptor> parseEntries(const Json& json, const std::string& path) {
  if (!json.is_array()) {
    return fieldError(path, "must be an array of {\"key\", \"value\"} objects");
  }
  Descriptor descriptor;
  descriptor.reserve(json.size());
  for (std::size_t i = 0; i < json.size(); ++i) {
    auto entry = parseEntry(json[i], indexed(path, i));
    if (!entry) {
      return entry.error();
    }
    descriptor.push_back(std::move(*entry));
  }
  return descriptor;
}

struct ParsedDescriptor {
  Descriptor entries;
  std::optional<std::int64_t> hits;
  std::optional<LimitOverride> limit;
  bool refund = false;  ///< envoy's descriptor-level is_negative_hits
};

/// A JSON boolean.
Result<bool> boolField(const Json& value, const std::string& path) {
  if (!value.is_boolean()) {
    return fieldError(path, "must be true or false");
  }
  return value.get<bool>();
}

/// envoy's RateLimitResponse.RateLimit.Unit in proto3 JSON: the enum's name or number.
std::optional<TimeUnit> envoyUnitOf(const Json& value) {
  static constexpr std::array<std::pair<std::string_view, TimeUnit>, 7> kUnits{{
      {"SECOND", TimeUnit::kSecond},
      {"MINUTE", TimeUnit::kMinute},
      {"HOUR", TimeUnit::kHour},
      {"DAY", TimeUnit::kDay},
      {"MONTH", TimeUnit::kMonth},
      {"YEAR", TimeUnit::kYear},
      {"WEEK", TimeUnit::kWeek},
  }};
  if (value.is_number_unsigned()) {
    const auto number = value.get<std::uint64_t>();
    if (number >= 1 && number <= kUnits.size()) {
      return kUnits[number - 1].second;  // SECOND = 1 ... YEAR = 6, WEEK = 7
    }
    return std::nullopt;
  }
  if (value.is_string()) {
    for (const auto& [name, unit] : kUnits) {
      if (value.get_ref<const std::string&>() == name) {
        return unit;
      }
    }
  }
  return std::nullopt;
}

/// envoy's descriptor-level `limit` override: {"requestsPerUnit": n, "unit": "DAY"}.
Result<LimitOverride> parseLimitOverride(const Json& json, const std::string& path) {
  if (!json.is_object()) {
    return fieldError(path, "must be an object {\"requestsPerUnit\": n, \"unit\": \"SECOND\"}");
  }
  LimitOverride limit;
  bool has_unit = false;
  for (const auto& [name, value] : json.items()) {
    const std::string field = path + "." + name;
    if (value.is_null()) {
      continue;
    }
    if (name == "requestsPerUnit" || name == "requests_per_unit") {
      constexpr std::int64_t kMaxRequestsPerUnit = 4294967295;  // uint32, as in envoy's proto
      std::int64_t v = -1;
      if (value.is_number_unsigned()) {
        v = value.get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxRequestsPerUnit)
                ? -1
                : static_cast<std::int64_t>(value.get<std::uint64_t>());
      } else if (value.is_string()) {
        const auto& text = value.get_ref<const std::string&>();
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || end != text.data() + text.size()) {
          v = -1;
        }
      }
      if (v < 0 || v > kMaxRequestsPerUnit) {
        return fieldError(field, "must be an integer from 0 to 4294967295");
      }
      limit.requests_per_unit = v;
    } else if (name == "unit") {
      auto unit = envoyUnitOf(value);
      if (!unit) {
        return fieldError(field, "must be SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR");
      }
      limit.unit = *unit;
      has_unit = true;
    } else {
      return fieldError(path, "unknown field \"" + name + "\" (expected requestsPerUnit, unit)");
    }
  }
  if (!has_unit) {
    return fieldError(path + ".unit",
                      "is required (SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR)");
  }
  return limit;
}

/// Both shapes: {"entries": [...], "hits_addend"?} or a bare list of entries.
Result<ParsedDescriptor> parseDescriptor(const Json& json, const std::string& path, bool envoy) {
  if (json.is_array()) {
    if (envoy) {
      return fieldError(path, "must be an object {\"entries\": [...]}");
    }
    auto entries = parseEntries(json, path);
    if (!entries) {
      return entries.error();
    }
    return ParsedDescriptor{std::move(*entries), std::nullopt, std::nullopt};
  }
  if (!json.is_object()) {
    return fieldError(path, "must be an object {\"entries\": [...]} or an array of entries");
  }
  ParsedDescriptor parsed;
  for (const auto& [name, value] : json.items()) {
    std::string field = path + "." + name;
    if (name == "entries") {
      if (value.is_null()) {
        continue;
      }
      auto entries = parseEntries(value, field);
      if (!entries) {
        return entries.error();
      }
      parsed.entries = std::move(*entries);
    } else if (name == "hits_addend" || name == "hitsAddend") {
      if (value.is_null()) {
        continue;
      }
      auto hits = hitsField(value, field, envoy);
      if (!hits) {
        return hits.error();
      }
      parsed.hits = *hits;
    } else if (name == "is_negative_hits" || name == "isNegativeHits") {
      if (!envoy) {
        return fieldError(field,
                          "is an envoy API field (POST /json, gRPC); here a refund is "
                          "\"refund\": true on the request");
      }
      if (value.is_null()) {
        continue;
      }
      auto refund = boolField(value, field);
      if (!refund) {
        return refund.error();
      }
      parsed.refund = *refund;
    } else if (name == "limit") {
      if (!envoy) {
        return fieldError(field, "request-side limits are an envoy API feature (POST /json, gRPC)");
      }
      if (value.is_null()) {
        continue;
      }
      auto limit = parseLimitOverride(value, field);
      if (!limit) {
        return limit.error();
      }
      parsed.limit = *limit;
    } else {
      return fieldError(path, "unknown field \"" + name + "\"");
    }
  }
  // No entries (`{}` or `"entries": []`) is an empty descriptor: it matches no rule.
  return parsed;
}

Status parseDescriptors(const Json& json, bool envoy, DecisionRequest& request) {
  if (!json.is_array()) {
    return fieldError("descriptors", "must be an array");
  }
  bool any_hits = false;
  bool any_limit = false;
  bool any_refund = false;
  for (std::size_t i = 0; i < json.size(); ++i) {
    auto parsed = parseDescriptor(json[i], indexed("descriptors", i), envoy);
    if (!parsed) {
      return parsed.error();
    }
    request.descriptors.push_back(std::move(parsed->entries));
    request.descriptor_hits.push_back(parsed->hits);
    request.descriptor_limits.push_back(parsed->limit);
    request.descriptor_refunds.push_back(parsed->refund);
    any_hits = any_hits || parsed->hits.has_value();
    any_limit = any_limit || parsed->limit.has_value();
    any_refund = any_refund || parsed->refund;
  }
  if (!any_refund) {
    request.descriptor_refunds.clear();
  }
  if (!any_hits) {
    request.descriptor_hits.clear();
  }
  if (!any_limit) {
    request.descriptor_limits.clear();
  }
  return {};
}

void writeLimit(JsonWriter& w, const LimitStatus& limit) {
  w.beginObject();
  if (limit.unlimited) {
    w.field("name", limit.name);
    w.field("unlimited", true);
    w.field("shadow", limit.shadow);
    w.endObject();
    return;
  }
  const PreparedLimitJson& prepared = preparedLimitJson(limit);
  w.key("name");
  w.raw(prepared.name_json);
  const Outcome& o = limit.outcome;
  w.field("allowed", o.allowed);
  w.text(prepared.middle);  // after a value: the next key writes its comma
  w.field("remaining", std::max<std::int64_t>(0, o.remaining));
  w.field("reset_after_ms", ceilMillis(o.reset_after_us));
  w.field("retry_after_ms", ceilMillis(o.retry_after_us));
  if (limit.algorithm == Algorithm::kLeakyBucket) {
    w.field("delay_ms", ceilMillis(o.delay_us));
    w.field("shaped", limit.shape);
  }
  w.field("shadow", limit.shadow);
  if (limit.override_value) {
    // The limit above is a runtime override's, not the rule's: say so, and why.
    w.key("override");
    w.beginObject();
    w.field("reason", limit.override_value->reason);
    if (limit.override_value->expires_at_us != 0) {
      w.field("expires_at_ms", limit.override_value->expires_at_us / kMicrosPerMilli);
    }
    w.endObject();
  }
  if (o.never) {
    w.field("never", true);
  }
  if (o.banned) {
    w.field("banned", true);  // in the penalty box until retry_after_ms (docs/bans.md)
  }
  if (limit.algorithm == Algorithm::kSketch) {
    // remaining is a lower bound, retry_after an upper bound of the exact limiter's.
    w.field("approximate", true);
  }
  w.endObject();
}

bool isUnlimited(const DescriptorStatus& d) {
  return !d.limits.empty() &&
         std::all_of(d.limits.begin(), d.limits.end(), [](const auto& l) { return l.unlimited; });
}

bool digits(std::string_view text, std::size_t pos, std::size_t count, int& out) {
  if (pos + count > text.size()) {
    return false;
  }
  out = 0;
  for (std::size_t i = pos; i < pos + count; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      return false;
    }
    out = out * 10 + (text[i] - '0');
  }
  return true;
}

int daysInMonth(int year, int month) {
  static constexpr std::array<int, 12> kDays{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[static_cast<std::size_t>(month - 1)];
}

}  // namespace

bool isIso8601DateTime(std::string_view s) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!digits(s, 0, 4, year) || s.size() < 19 || s[4] != '-' || !digits(s, 5, 2, month) ||
      s[7] != '-' || !digits(s, 8, 2, day) || (s[10] != 'T' && s[10] != 't') ||
      !digits(s, 11, 2, hour) || s[13] != ':' || !digits(s, 14, 2, minute) || s[16] != ':' ||
      !digits(s, 17, 2, second)) {
    return false;
  }
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month) || hour > 23 ||
      minute > 59 || second > 60) {
    return false;
  }
  std::size_t pos = 19;
  if (pos < s.size() && (s[pos] == '.' || s[pos] == ',')) {
    std::size_t start = ++pos;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
      ++pos;
    }
    if (pos == start) {
      return false;
    }
  }
  if (pos == s.size()) {
    return true;  // local time, allowed by ISO 8601
  }
  if ((s[pos] == 'Z' || s[pos] == 'z') && pos + 1 == s.size()) {
    return true;
  }
  int off_hour = 0, off_minute = 0;
  if ((s[pos] == '+' || s[pos] == '-') && pos + 6 == s.size() && digits(s, pos + 1, 2, off_hour) &&
      s[pos + 3] == ':' && digits(s, pos + 4, 2, off_minute)) {
    return off_hour <= 23 && off_minute <= 59;
  }
  return false;
}

Result<DecisionRequest> parseDecisionRequest(std::string_view body,
                                             std::string_view default_domain) {
  // Parsed in place into the Result that is returned: no move of the request.
  Result<DecisionRequest> result(takeSpareRequest());
  if (parseDecisionRequestFastInto(body, default_domain, *result)) {
    return result;
  }
  return parseDecisionRequestComplete(body, default_domain);
}

Result<DecisionRequest> parseDecisionRequestComplete(std::string_view body,
                                                     std::string_view default_domain) {
  auto parsed = parseBody(body);
  if (!parsed) {
    return parsed.error();
  }
  const Json& json = *parsed;
  DecisionRequest request;
  request.domain = std::string(default_domain);
  for (const auto& [name, value] : json.items()) {
    if (value.is_null()) {
      continue;  // an explicit null means "not given" for every optional field
    }
    if (name == "domain") {
      auto domain = stringField(value, "domain", false);
      if (!domain) {
        return domain.error();
      }
      request.domain = std::move(*domain);
    } else if (name == "clientId") {
      auto client = stringField(value, "clientId", true);
      if (!client) {
        return client.error();
      }
      request.client_id = std::move(*client);
    } else if (name == "descriptors") {
      if (auto status = parseDescriptors(value, false, request); !status) {
        return status.error();
      }
    } else if (name == "hits") {
      auto hits = hitsField(value, "hits", false);
      if (!hits) {
        return hits.error();
      }
      request.hits = *hits;
    } else if (name == "refund" || name == "report") {
      auto flag = boolField(value, name);
      if (!flag) {
        return flag.error();
      }
      if (name == "refund") {
        request.refund = *flag;
      } else if (*flag) {
        request.charge = Charge::kReport;
      }
    } else if (name == "timestamp") {
      if (!value.is_string() || !isIso8601DateTime(value.get_ref<const std::string&>())) {
        return fieldError("timestamp",
                          "must be an ISO-8601 date-time string like 2023-07-13T07:20:50.52Z");
      }
    } else {
      return makeError(ErrorKind::kInvalidArgument,
                       "body: unknown field \"" + name +
                           "\" (expected domain, clientId, descriptors, hits, refund, report, "
                           "timestamp)");
    }
  }
  if (request.refund && request.charge == Charge::kReport) {
    return fieldError("refund",
                      "and \"report\" cannot both be true (a refund gives back, a "
                      "report charges)");
  }
  if (Status shape = checkDecisionRequest(request, RequestApi::kSluice); !shape) {
    return shape.error();
  }
  return request;
}

Result<DecisionRequest> parseEnvoyRequest(std::string_view body) {
  Result<DecisionRequest> result(takeSpareRequest());
  if (parseEnvoyRequestFastInto(body, *result)) {
    result->envoy_api = true;
    return result;
  }
  Result<DecisionRequest> complete = parseEnvoyRequestComplete(body);
  if (complete) {
    complete->envoy_api = true;
  }
  return complete;
}

Result<DecisionRequest> parseEnvoyRequestComplete(std::string_view body) {
  auto parsed = parseBody(body);
  if (!parsed) {
    return parsed.error();
  }
  const Json& json = *parsed;
  DecisionRequest request;
  for (const auto& [name, value] : json.items()) {
    if (value.is_null()) {
      continue;
    }
    if (name == "domain") {
      auto domain = stringField(value, "domain", false);
      if (!domain) {
        return domain.error();
      }
      request.domain = std::move(*domain);
    } else if (name == "descriptors") {
      if (auto status = parseDescriptors(value, true, request); !status) {
        return status.error();
      }
    } else if (name == "hits_addend" || name == "hitsAddend") {
      auto hits = hitsField(value, name, true);
      if (!hits) {
        return hits.error();
      }
      request.hits = std::max<std::int64_t>(1, *hits);
    } else {
      return makeError(
          ErrorKind::kInvalidArgument,
          "body: unknown field \"" + name + "\" (expected domain, descriptors, hits_addend)");
    }
  }
  if (Status shape = checkDecisionRequest(request, RequestApi::kEnvoy); !shape) {
    return shape.error();
  }
  return request;
}

Micros shapingDelay(const Decision& decision) {
  Micros delay = 0;
  if (!decision.allowed) {
    return 0;
  }
  for (const auto& d : decision.descriptors) {
    for (const auto& l : d.limits) {
      if (l.shape && !l.unlimited && l.outcome.allowed) {
        delay = std::max(delay, l.outcome.delay_us);
      }
    }
  }
  return delay;
}

/// True when a limit was decided by the `sketch` algorithm.
static bool anyApproximate(const Decision& decision) {
  for (const auto& d : decision.descriptors) {
    for (const auto& l : d.limits) {
      if (!l.unlimited && l.algorithm == Algorithm::kSketch) {
        return true;
      }
    }
  }
  return false;
}

namespace {

/// s.reserve(bytes) when s is shorter: a spare answer's strings (freshResponse()) have the
/// room already, and reserve() is a call even when it has nothing to do.
void reserveFor(std::string& s, std::size_t bytes) {
  if (s.capacity() < bytes) {
    s.reserve(bytes);
  }
}

}  // namespace

Response decisionResponse(const DecisionRequest& request, const Decision& decision,
                          LeadingFields leading) {
  Response response = freshResponse();
  response.status = decision.allowed ? 200 : 429;
  std::string& body = response.body;
  reserveFor(body, 256 + 224 * decision.descriptors.size());
  if (leading == nullptr && writeUsualDecisionBody(body, request, decision)) {
    // The usual answer (decision_body.hpp): only the binding limit's headers to add.
    if (const LimitStatus* binding = bindingLimit(decision)) {
      reserveFor(response.header_lines, 256);
      appendRateLimitHeaders(response.header_lines, *binding, !decision.allowed);
    }
    response.hold = std::chrono::microseconds(shapingDelay(decision));
    return response;
  }
  JsonWriter w(body);
  w.beginObject();
  if (leading != nullptr) {
    leading(w, decision);
  }
  w.field("allowed", decision.allowed);
  w.field("domain", request.domain);
  if (!request.client_id.empty()) {
    w.field("clientId", request.client_id);
  }
  if (decision.degraded) {
    w.field("degraded", true);
  }
  if (anyApproximate(decision)) {
    w.field("approximate", true);
  }
  if (!decision.domain_known) {
    w.field("reason", "unknown domain");
  }
  w.key("descriptors");
  w.beginArray();
  for (const auto& d : decision.descriptors) {
    w.beginObject();
    w.field("matched", d.matched);
    w.key("limits");
    w.beginArray();
    for (const auto& l : d.limits) {
      writeLimit(w, l);
    }
    w.endArray();
    if (!d.metadata_json.empty()) {
      w.key("metadata");
      writeRulesMetadata(w, d.metadata_json);
    }
    w.endObject();
  }
  w.endArray();
  if (!decision.lease_id.empty()) {
    w.key("lease");
    w.beginObject();
    w.field("id", decision.lease_id);
    w.field("expires_in_ms", decision.lease_us / kMicrosPerMilli);
    w.endObject();
  }
  if (const LimitStatus* binding = bindingLimit(decision)) {
    if (binding->outcome.never) {
      w.field("reason", "the cost exceeds what limit \"" + binding->name + "\" can ever admit");
    }
    if (!decision.allowed && binding->outcome.banned) {
      w.field("banned", true);
    }
    response.header_lines.reserve(256);
    appendRateLimitHeaders(response.header_lines, *binding, !decision.allowed);
  }
  w.endObject();
  w.text("\n");
  w.finish();
  if (decision.degraded) {
    response.headers.push_back({"X-Sluice-Degraded", "true"});
  }
  if (!decision.lease_id.empty()) {
    response.headers.push_back({std::string(kLeaseHeader), decision.lease_id});
  }
  response.hold = std::chrono::microseconds(shapingDelay(decision));
  return response;
}

Response envoyResponse(const Decision& decision) {
  Response response = freshResponse();
  response.status = decision.allowed ? 200 : 429;
  std::string& body = response.body;
  JsonWriter w(body);
  w.beginObject();
  w.field("overallCode", decision.allowed ? "OK" : "OVER_LIMIT");
  w.key("statuses");
  w.beginArray();
  for (const auto& d : decision.descriptors) {
    // One status per descriptor, as envoy has one limit per descriptor: the descriptor's
    // own binding limit (the denying one, else the least remaining).
    const LimitStatus* binding = descriptorBindingLimit(d);
    w.beginObject();
    if (binding == nullptr) {
      w.field("code", "OK");
      if (isUnlimited(d)) {
        // As envoyproxy/ratelimit: an unlimited descriptor has no limit and all of uint32.
        w.field("limitRemaining", kEnvoyUnlimitedRemaining);
      }
      w.endObject();
      continue;
    }
    bool over = !binding->shadow && !binding->outcome.allowed;
    w.field("code", over ? "OVER_LIMIT" : "OK");
    w.key("currentLimit");
    w.beginObject();
    if (binding->explicit_name) {
      w.field("name", binding->name);
    }
    w.field("requestsPerUnit", binding->limit);
    w.field("unit", envoyUnitName(binding->unit));
    w.endObject();
    w.field("limitRemaining", std::max<std::int64_t>(0, binding->outcome.remaining));
    w.field("durationUntilReset",
            std::to_string(ceilSeconds(binding->outcome.reset_after_us)) + "s");
    if (over && binding->outcome.banned) {
      w.field("banned", true);  // Sluice's own: the reset above is the ban's end
    }
    w.endObject();
  }
  w.endArray();
  if (hasEnvoyDynamicMetadata(decision)) {
    w.key("dynamicMetadata");
    writeEnvoyDynamicMetadata(w, decision);
  }
  w.endObject();
  w.text("\n");
  w.finish();
  if (decision.degraded) {
    response.headers.push_back({"X-Sluice-Degraded", "true"});
  }
  return response;
}

}  // namespace sluice::http
