#include "rules/ban_rules.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <string>

namespace sluice::rules_detail {
namespace {

constexpr std::array<std::string_view, 5> kBanKeys{"after", "duration", "backoff", "max",
                                                   "forgive_after"};
constexpr std::int64_t kMaxAfter = 1'000'000'000;
constexpr std::int64_t kMaxBackoffMilli = 10'000;
constexpr Micros kDefaultMax = 24LL * 3600 * kMicrosPerSecond;

/// `backoff`: a number from 1 to 10 with at most three decimals, as thousandths.
std::optional<std::int64_t> readBackoff(YamlReader& reader, const Field& field) {
  const std::string text = field.value.IsScalar() ? field.value.Scalar() : std::string();
  std::int64_t whole = 0;
  std::int64_t milli = 0;
  std::size_t i = 0;
  bool ok = !text.empty() && std::isdigit(static_cast<unsigned char>(text[0])) != 0;
  for (; ok && i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0; ++i) {
    whole = std::min<std::int64_t>(whole * 10 + (text[i] - '0'), kMaxBackoffMilli);
  }
  if (ok && i < text.size()) {
    ok = text[i] == '.' && text.size() - i - 1 >= 1 && text.size() - i - 1 <= 3;
    std::int64_t scale = 100;
    for (std::size_t j = i + 1; ok && j < text.size(); ++j, scale /= 10) {
      ok = std::isdigit(static_cast<unsigned char>(text[j])) != 0;
      milli += (text[j] - '0') * scale;
    }
  }
  const std::int64_t value = whole * 1000 + milli;
  if (!ok || value < 1000 || value > kMaxBackoffMilli) {
    reader.error(reader.at(field),
                 "'backoff' must be a number from 1 to 10 (at most three "
                 "decimals; 1 keeps every ban as long as 'duration'), not " +
                     inQuotes(text.empty() ? YamlReader::kindOf(field.value) : text));
    return std::nullopt;
  }
  return value;
}

/// Why `limit` cannot have a ban, or "".
std::string refusal(const RateLimit& limit) {
  if (limit.unlimited) {
    return "'ban' does not apply to an unlimited rate limit (it never denies)";
  }
  if (limit.candidate) {
    return "a candidate cannot 'ban' (it never denies; give the live limit the ban)";
  }
  if (limit.params.algorithm == Algorithm::kSketch) {
    return "'ban' does not apply to algorithm 'sketch' (its counters are shared between "
           "clients; use an exact algorithm for a penalty box)";
  }
  if (limit.params.algorithm == Algorithm::kConcurrency) {
    return "'ban' does not apply to algorithm 'concurrency' (its denial means too many "
           "requests in flight, not abuse: a ban would lock out a client whose own requests "
           "are merely slow)";
  }
  if (limit.params.consistency == Consistency::kEventual) {
    return "'ban' needs 'consistency: strict': an eventual limit is decided from each "
           "sidecar's own view, which cannot keep one exact ban for every sidecar";
  }
  return "";
}

}  // namespace

void readBan(YamlReader& reader, const Field& field, RateLimit& limit) {
  if (!field.value.IsMap()) {
    reader.error(reader.at(field),
                 "'ban' must be a mapping with 'after' and 'duration' (e.g. "
                 "{after: 5, duration: 10m, backoff: 2, max: 24h}), not a " +
                     YamlReader::kindOf(field.value));
    return;
  }
  const std::size_t errors_before = reader.errorsReported();
  const Fields fields = reader.readFields(field.value, KeySet{kBanKeys, "in 'ban'", nullptr});
  BanParams ban;
  const auto after = fields.find("after");
  const auto duration = fields.find("duration");
  if (after == fields.end() || duration == fields.end()) {
    reader.error(reader.at(field),
                 "'ban' needs 'after' (denials within the limit's window, at least 1) and "
                 "'duration' (how long the first ban lasts, e.g. 10m)");
  }
  if (after != fields.end()) {
    ban.after = reader.readInteger(after->second, "after", 1, kMaxAfter).value_or(0);
  }
  if (duration != fields.end()) {
    const std::optional<Micros> length = reader.readDuration(duration->second, "duration");
    ban.duration_us = length.value_or(0);
    if (length && *length == 0) {
      reader.error(reader.at(duration->second), "'duration' must be longer than 0");
    }
  }
  if (const auto it = fields.find("backoff"); it != fields.end()) {
    ban.backoff_milli = readBackoff(reader, it->second).value_or(1000);
  }
  ban.max_us = std::max(ban.duration_us, ban.backoff_milli == 1000 ? 0 : kDefaultMax);
  if (const auto it = fields.find("max"); it != fields.end()) {
    if (const auto max = reader.readDuration(it->second, "max")) {
      ban.max_us = *max;
      if (*max < ban.duration_us) {
        reader.error(reader.at(it->second), "'max' must be at least 'duration' (the first ban)");
      }
    }
  }
  ban.forgive_us = ban.max_us;
  if (const auto it = fields.find("forgive_after"); it != fields.end()) {
    if (const auto forgive = reader.readDuration(it->second, "forgive_after")) {
      ban.forgive_us = *forgive;
      if (*forgive == 0) {
        reader.error(reader.at(it->second), "'forgive_after' must be longer than 0");
      }
    }
  }
  if (std::string problem = refusal(limit); !problem.empty()) {
    reader.error(reader.at(field.key), problem);
  }
  if (reader.errorsReported() != errors_before) {
    return;
  }
  ban.within_us = unitMicros(limit.unit) * limit.unit_multiplier;
  limit.params.ban = ban;
}

}  // namespace sluice::rules_detail
