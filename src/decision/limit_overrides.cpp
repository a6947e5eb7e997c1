#include "sluice/decision/limit_overrides.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <charconv>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "sluice/rules/bucket_key.hpp"

namespace sluice {
namespace {

using nlohmann::ordered_json;

/// The keys of a rule's `rate_limit` an override may set; the rest (name, replaces,
/// unlimited, consistency, sketch options, overridable) belong to the rule alone.
constexpr std::array<std::string_view, 8> kOverrideKeys{
    "unit",  "requests_per_unit", "unit_multiplier", "algorithm",
    "burst", "min_interval",      "count_rejected",  "warmup"};

Error invalid(std::string message) {
  return makeError(ErrorKind::kInvalidArgument, std::move(message));
}

void collectNamed(const std::vector<RateLimit>& limits, std::string_view name,
                  std::vector<const RateLimit*>& out) {
  for (const RateLimit& limit : limits) {
    if (limit.name == name) {
      out.push_back(&limit);
    }
  }
}

void collectNamed(const std::vector<DescriptorNode>& nodes, std::string_view name,
                  std::vector<const RateLimit*>& out) {
  for (const DescriptorNode& node : nodes) {
    collectNamed(node.limits, name, out);
    collectNamed(node.children, name, out);
  }
}

/// Every limit of `domain` named `name` (names are usually unique; an override of a name
/// replaces all of them).
std::vector<const RateLimit*> limitsNamed(const DomainConfig& domain, std::string_view name) {
  std::vector<const RateLimit*> out;
  collectNamed(domain.domain_limits, name, out);
  collectNamed(domain.descriptors, name, out);
  return out;
}

/// Why `rule` takes no override, or "".
std::string refusalOf(const RateLimit& rule) {
  const std::string where = "rule \"" + rule.name + "\" (" + rule.location.file + ":" +
                            std::to_string(rule.location.line) + ")";
  if (!rule.overridable) {
    return where + " says overridable: false";
  }
  if (rule.unlimited) {
    return where + " is unlimited: there is no limit to override";
  }
  if (rule.params.algorithm == Algorithm::kSketch) {
    return where + " is a sketch, one shared table per rule: it takes no per-client override";
  }
  if (rule.params.consistency == Consistency::kEventual) {
    return where + " is eventual, decided from local views: it takes no override";
  }
  if (rule.params.algorithm == Algorithm::kConcurrency) {
    return where +
           " is a concurrency limit, whose bucket holds its leases: it takes no override "
           "(change max_in_flight in the rules)";
  }
  return {};
}

/// Parses an RFC 3339 instant (`2026-12-01T00:00:00Z`, `...T01:00:00.5+01:00`) into
/// microseconds since the epoch.
std::optional<Micros> parseInstant(std::string_view text) {
  auto number = [&](std::size_t pos, std::size_t count, int& out) {
    if (pos + count > text.size()) {
      return false;
    }
    auto [end, ec] = std::from_chars(text.data() + pos, text.data() + pos + count, out);
    return ec == std::errc() && end == text.data() + pos + count;
  };
  std::tm tm{};
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (text.size() < 20 || !number(0, 4, year) || text[4] != '-' || !number(5, 2, month) ||
      text[7] != '-' || !number(8, 2, day) || (text[10] != 'T' && text[10] != 't') ||
      !number(11, 2, hour) || text[13] != ':' || !number(14, 2, minute) || text[16] != ':' ||
      !number(17, 2, second) || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 ||
      minute > 59 || second > 60) {
    return std::nullopt;
  }
  std::size_t pos = 19;
  Micros fraction = 0;
  if (text[pos] == '.') {
    Micros scale = 100'000;
    ++pos;
    const std::size_t start = pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])) != 0) {
      fraction += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) {
      return std::nullopt;
    }
  }
  Micros offset = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z') && pos + 1 == text.size()) {
    offset = 0;
  } else if (pos + 6 == text.size() && (text[pos] == '+' || text[pos] == '-') &&
             text[pos + 3] == ':') {
    int oh = 0, om = 0;
    if (!number(pos + 1, 2, oh) || !number(pos + 4, 2, om) || oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset = (oh * 3600LL + om * 60LL) * kMicrosPerSecond * (text[pos] == '+' ? 1 : -1);
  } else {
    return std::nullopt;
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const std::time_t seconds = ::timegm(&tm);
  return static_cast<Micros>(seconds) * kMicrosPerSecond + fraction - offset;
}

std::string formatInstant(Micros at_us) {
  const std::time_t seconds = static_cast<std::time_t>(at_us / kMicrosPerSecond);
  std::tm tm{};
  ::gmtime_r(&seconds, &tm);
  std::array<char, 32> text{};
  const std::size_t n = std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(text.data(), n);
}

/// The override's limit, validated by the rules loader as a rule of `domain` would be: the
/// same messages, prefixed with `rate_limit: `. The algorithm defaults to the rule's.
Result<RateLimit> parseOverrideLimit(const std::string& domain, const std::string& json_text,
                                     const RateLimit& rule) {
  ordered_json object;
  try {
    object = ordered_json::parse(json_text);
  } catch (const nlohmann::json::exception&) {
    return invalid("rate_limit: must be an object");
  }
  if (!object.is_object()) {
    return invalid("rate_limit: must be an object");
  }
  for (const auto& [key, value] : object.items()) {
    if (std::find(kOverrideKeys.begin(), kOverrideKeys.end(), key) == kOverrideKeys.end()) {
      std::string allowed;
      for (const std::string_view k : kOverrideKeys) {
        allowed += (allowed.empty() ? "" : ", ") + std::string(k);
      }
      return invalid("rate_limit." + key + ": an override cannot set it (it takes " + allowed +
                     ")");
    }
  }
  if (!object.contains("algorithm")) {
    object["algorithm"] = std::string(algorithmName(rule.params.algorithm));
  }
  // JSON is YAML: the loader reads the object as the rate_limit of a one-node domain.
  const std::string yaml = "domain: " + ordered_json(domain).dump() +
                           "\ndescriptors:\n  - key: override\n    rate_limit: " + object.dump() +
                           "\n";
  LoadResult loaded = loadRulesFromStrings({{"rate_limit", yaml}});
  if (!loaded.rules) {
    std::string message;
    for (const RuleError& error : loaded.errors) {
      message += (message.empty() ? "rate_limit: " : "; ") + error.message;
    }
    return invalid(message);
  }
  const DomainConfig& parsed = loaded.rules->domains.begin()->second;
  if (parsed.descriptors.empty() || parsed.descriptors.front().limits.empty()) {
    return invalid("rate_limit: no limit was read");
  }
  RateLimit limit = parsed.descriptors.front().limits.front();
  if (limit.unlimited) {
    return invalid("rate_limit: an override cannot be unlimited");
  }
  if (limit.params.algorithm != rule.params.algorithm) {
    return invalid("rate_limit.algorithm: an override keeps the rule's algorithm (" +
                   std::string(algorithmName(rule.params.algorithm)) + "), so that the bucket " +
                   "keeps its state");
  }
  return limit;
}

/// Where an override goes and the rule(s) it replaces.
struct Placement {
  OverrideSlot slot;
  std::vector<const RateLimit*> rules;
  ordered_json descriptor;  ///< the descriptor form's entries, else null
};

std::string tagFor(std::string_view client, std::string_view domain) {
  std::string bucket;
  BucketKey::appendDomain(bucket, domain);
  return std::string(BucketKey::hashTag(BucketKey::storeKey(client, bucket + ";")));
}

Result<Placement> place(const RuleSet& rules, const OverrideRequest& request) {
  const DomainConfig* domain = rules.findDomain(request.domain);
  if (domain == nullptr) {
    return makeError(ErrorKind::kNotFound, "domain: unknown domain \"" + request.domain + "\"");
  }
  Placement out;
  if (!request.descriptor) {
    if (request.rule.empty()) {
      return invalid("rule or descriptors: name the rule, or the descriptor whose bucket it is");
    }
    out.rules = limitsNamed(*domain, request.rule);
    if (out.rules.empty()) {
      return makeError(ErrorKind::kNotFound, "rule: no rate limit named \"" + request.rule +
                                                 "\" in domain \"" + request.domain + "\"");
    }
    out.slot = {tagFor(request.client_id, request.domain), overrideRuleField(request.rule)};
    return out;
  }
  RequestMatch match = matchRequest(*domain, {*request.descriptor});
  std::vector<const MatchedLimit*> candidates;
  for (const DescriptorMatch& descriptor : match.descriptors) {
    for (const MatchedLimit& limit : descriptor.limits) {
      if (request.rule.empty() || limit.limit->name == request.rule) {
        candidates.push_back(&limit);
      }
    }
  }
  if (candidates.empty()) {
    return invalid("descriptors: no rule " +
                   (request.rule.empty() ? std::string() : "named \"" + request.rule + "\" ") +
                   "matches them in domain \"" + request.domain + "\"");
  }
  if (candidates.size() > 1) {
    return invalid("descriptors: they match " + std::to_string(candidates.size()) +
                   " limits; name the one to override with \"rule\"");
  }
  const MatchedLimit& matched = *candidates.front();
  const std::string store_key = BucketKey::storeKey(request.client_id, matched.bucket_key);
  out.slot = {std::string(overrideTagOf(store_key)),
              overrideBucketField(overrideBucketOf(store_key))};
  out.rules = {matched.limit};
  out.descriptor = ordered_json::array();
  for (const Entry& entry : *request.descriptor) {
    out.descriptor.push_back({{"key", entry.key}, {"value", entry.value}});
  }
  return out;
}

class LimitOverridesImpl final : public LimitOverrides {
 public:
  LimitOverridesImpl(RulesProvider rules, std::vector<ResetTarget> targets, const Clock& clock,
                     Metrics& metrics, std::size_t max_overrides)
      : rules_(std::move(rules)),
        target_(targets.front()),
        targets_(std::move(targets)),
        clock_(clock),
        max_overrides_(max_overrides),
        set_(metrics.counter("override_changes_total", {{"action", "set"}})),
        replaced_(metrics.counter("override_changes_total", {{"action", "replace"}})),
        deleted_(metrics.counter("override_changes_total", {{"action", "delete"}})) {
    metrics.describe("override_changes_total", Metrics::Type::kCounter,
                     "Runtime overrides set, replaced and deleted through the admin port.");
  }

  Status set(const OverrideRequest& request, SetDone done) const override {
    RuleSetPtr rules = rules_();
    if (!rules) {
      return makeError(ErrorKind::kUnavailable, "rules: not loaded");
    }
    auto placement = place(*rules, request);
    if (!placement) {
      return placement.error();
    }
    auto value = build(request, *placement);
    if (!value) {
      return value.error();
    }
    target_.post([this, store = target_.store, slot = placement->slot, value = std::move(*value),
                  done = std::move(done)]() mutable {
      store->setOverride(
          slot, value, max_overrides_,
          [this, value, done = std::move(done)](Result<bool> replaced) {
            if (!replaced) {
              done(replaced.error());
              return;
            }
            (*replaced ? replaced_ : set_).inc();
            tellEveryThread([done, change = OverrideChange{value, *replaced}] { done(change); });
          });
    });
    return {};
  }

  Status remove(const OverrideRequest& request, RemoveDone done) const override {
    RuleSetPtr rules = rules_();
    if (!rules) {
      return makeError(ErrorKind::kUnavailable, "rules: not loaded");
    }
    auto placement = place(*rules, request);
    if (!placement) {
      return placement.error();
    }
    target_.post(
        [this, store = target_.store, slot = placement->slot, done = std::move(done)]() mutable {
          store->removeOverride(slot, [this, done = std::move(done)](Result<bool> removed) {
            if (removed && *removed) {
              deleted_.inc();
              tellEveryThread([done] { done(true); });
              return;
            }
            done(std::move(removed));
          });
        });
    return {};
  }

  void list(const OverrideFilter& filter, ListDone done) const override {
    target_.post([this, store = target_.store, filter, done = std::move(done)]() mutable {
      store->listOverrides(
          [this, filter, done = std::move(done)](Result<std::vector<OverrideEntry>> entries) {
            if (!entries) {
              done(entries.error());
              return;
            }
            done(select(*entries, filter));
          });
    });
  }

 private:
  Result<StoredOverridePtr> build(const OverrideRequest& request,
                                  const Placement& placement) const {
    for (const RateLimit* rule : placement.rules) {
      if (std::string refused = refusalOf(*rule); !refused.empty()) {
        return invalid("rule: " + refused);
      }
    }
    const RateLimit& rule = *placement.rules.front();
    auto limit = parseOverrideLimit(request.domain, request.rate_limit_json, rule);
    if (!limit) {
      return limit.error();
    }
    for (const RateLimit* other : placement.rules) {
      if (other->params.algorithm != rule.params.algorithm) {
        return invalid("rule: the limits named \"" + rule.name +
                       "\" differ in algorithm; name one by its descriptors");
      }
    }
    if (request.reason.empty()) {
      return invalid("reason: required (say why, for the log and the answers)");
    }
    if (request.reason.size() > kMaxOverrideReasonBytes) {
      return invalid("reason: must be at most " + std::to_string(kMaxOverrideReasonBytes) +
                     " bytes, got " + std::to_string(request.reason.size()));
    }
    const Micros now = clock_.nowMicros();
    auto value = std::make_shared<StoredOverride>();
    if (request.expires) {
      std::optional<Micros> at;
      if (auto span = parseDuration(*request.expires)) {
        at = now + *span;
      } else {
        at = parseInstant(*request.expires);
      }
      if (!at) {
        return invalid(
            "expires: must be a duration (90s, 30m, 12h, 7d) or an RFC 3339 time "
            "(2026-12-01T00:00:00Z), got \"" +
            *request.expires + "\"");
      }
      if (*at <= now) {
        return invalid("expires: " + *request.expires + " is already past");
      }
      value->expires_at_us = *at;
    }
    value->params = limit->params;
    value->requests_per_unit = limit->requests_per_unit;
    value->unit = limit->unit;
    value->unit_multiplier = limit->unit_multiplier;
    value->reason = request.reason;
    value->record_json = record(request, placement, *limit, *value, now);
    return StoredOverridePtr(std::move(value));
  }

  static std::string record(const OverrideRequest& request, const Placement& placement,
                            const RateLimit& limit, const StoredOverride& value, Micros now) {
    ordered_json r = {{"domain", request.domain}, {"rule", placement.rules.front()->name}};
    if (!placement.descriptor.is_null()) {
      r["descriptors"] = ordered_json::array({placement.descriptor});
    }
    r["clientId"] = request.client_id;
    r["rate_limit"] = ordered_json::parse(request.rate_limit_json);
    r["limit"] = {{"requests_per_unit", limit.requests_per_unit},
                  {"unit", unitName(limit.unit)},
                  {"unit_multiplier", limit.unit_multiplier},
                  {"algorithm", algorithmName(limit.params.algorithm)}};
    if (value.expires_at_us != 0) {
      r["expires"] = formatInstant(value.expires_at_us);
      r["expires_at_ms"] = value.expires_at_us / kMicrosPerMilli;
    }
    r["reason"] = request.reason;
    r["set_by"] = request.set_by;
    r["set_at"] = formatInstant(now);
    return r.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  }

  std::vector<StoredOverridePtr> select(const std::vector<OverrideEntry>& entries,
                                        const OverrideFilter& filter) const {
    const Micros now = clock_.nowMicros();
    std::vector<std::pair<OverrideRecordView, StoredOverridePtr>> kept;
    for (const OverrideEntry& entry : entries) {
      if (!entry.value || entry.value->expired(now)) {
        continue;
      }
      auto view = viewOverrideRecord(*entry.value);
      if (!view || (!filter.domain.empty() && view->domain != filter.domain) ||
          (!filter.client.empty() && view->client_id != filter.client) ||
          (!filter.rule.empty() && view->rule != filter.rule)) {
        continue;
      }
      kept.emplace_back(std::move(*view), entry.value);
    }
    std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
      return std::tie(a.first.domain, a.first.rule, a.first.client_id, a.second->record_json) <
             std::tie(b.first.domain, b.first.rule, b.first.client_id, b.second->record_json);
    });
    std::vector<StoredOverridePtr> out;
    out.reserve(kept.size());
    for (auto& [view, value] : kept) {
      out.push_back(std::move(value));
    }
    return out;
  }

  /// Runs every target's Store::overridesChanged() on its thread, then `then` (on the thread
  /// of the last one).
  void tellEveryThread(std::function<void()> then) const {
    auto pending = std::make_shared<std::atomic<std::size_t>>(targets_.size());
    auto shared_then = std::make_shared<std::function<void()>>(std::move(then));
    for (const ResetTarget& target : targets_) {
      target.post([store = target.store, pending, shared_then] {
        store->overridesChanged();
        if (pending->fetch_sub(1) == 1) {
          (*shared_then)();
        }
      });
    }
  }

  RulesProvider rules_;
  ResetTarget target_;
  std::vector<ResetTarget> targets_;
  const Clock& clock_;
  const std::size_t max_overrides_;
  Counter& set_;
  Counter& replaced_;
  Counter& deleted_;
};

}  // namespace

std::optional<OverrideRecordView> viewOverrideRecord(const StoredOverride& value) {
  try {
    const nlohmann::json r = nlohmann::json::parse(value.record_json);
    OverrideRecordView view;
    view.domain = r.value("domain", "");
    view.rule = r.value("rule", "");
    view.client_id = r.value("clientId", "");
    view.per_bucket = r.contains("descriptors");
    return view;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

std::unique_ptr<LimitOverrides> makeLimitOverrides(RulesProvider rules,
                                                   std::vector<ResetTarget> targets,
                                                   const Clock& clock, Metrics& metrics,
                                                   std::size_t max_overrides) {
  return std::make_unique<LimitOverridesImpl>(std::move(rules), std::move(targets), clock, metrics,
                                              max_overrides);
}

}  // namespace sluice
