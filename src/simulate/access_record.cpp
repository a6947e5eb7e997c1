#include "sluice/simulate/access_record.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "simulate/json_cursor.hpp"
#include "simulate/written_line.hpp"
#include "sluice/common/logging.hpp"

namespace sluice::simulate {
namespace {

// Howard Hinnant's days_from_civil / civil_from_days: proleptic Gregorian, no time zone
// database and no locale (timegm is neither standard nor fast).
std::int64_t daysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

void civilFromDays(std::int64_t z, std::int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = static_cast<std::int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y += m <= 2 ? 1 : 0;
}

bool digits(std::string_view text, std::size_t pos, std::size_t count, int& out) {
  if (pos + count > text.size()) {
    return false;
  }
  out = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const char c = text[pos + i];
    if (c < '0' || c > '9') {
      return false;
    }
    out = out * 10 + (c - '0');
  }
  return true;
}

void appendQuoted(std::string& out, std::string_view text) {
  out += '"';
  appendJsonEscaped(out, text);
  out += '"';
}

}  // namespace

void appendRfc3339Micros(std::string& out, Micros micros) {
  std::int64_t seconds = micros / kMicrosPerSecond;
  std::int64_t fraction = micros % kMicrosPerSecond;
  if (fraction < 0) {
    fraction += kMicrosPerSecond;
    --seconds;
  }
  std::int64_t days = seconds / 86400;
  std::int64_t rest = seconds % 86400;
  if (rest < 0) {
    rest += 86400;
    --days;
  }
  std::int64_t y = 0;
  unsigned m = 0;
  unsigned d = 0;
  civilFromDays(days, y, m, d);
  char text[48];
  const int n = std::snprintf(text, sizeof(text), "%04lld-%02u-%02uT%02lld:%02lld:%02lld.%06lldZ",
                              static_cast<long long>(y), m, d, static_cast<long long>(rest / 3600),
                              static_cast<long long>(rest / 60 % 60),
                              static_cast<long long>(rest % 60), static_cast<long long>(fraction));
  out.append(text, static_cast<std::size_t>(n));
}

namespace {

/// The date, hour and minute of the last time parsed ("2026-11-26T03:50"), already checked,
/// and their instant: a log's lines share them by the thousand.
struct MinuteCache {
  char prefix[16] = {};
  Micros start_us = 0;
  bool valid = false;
};
thread_local MinuteCache t_minute;

/// The start of the minute `text` (at least 19 bytes) begins with, when it is well formed.
bool parseMinute(std::string_view text, Micros& start_us) {
  MinuteCache& cache = t_minute;
  if (cache.valid && std::memcmp(text.data(), cache.prefix, sizeof(cache.prefix)) == 0) {
    start_us = cache.start_us;
    return true;
  }
  int year = 0;
  int month = 0;
  int day = 0;
  int hour = 0;
  int minute = 0;
  if (!digits(text, 0, 4, year) || text[4] != '-' || !digits(text, 5, 2, month) || text[7] != '-' ||
      !digits(text, 8, 2, day) || (text[10] != 'T' && text[10] != 't' && text[10] != ' ') ||
      !digits(text, 11, 2, hour) || text[13] != ':' || !digits(text, 14, 2, minute)) {
    return false;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59) {
    return false;
  }
  const std::int64_t days =
      daysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  start_us = (days * 86400 + hour * 3600 + minute * 60) * kMicrosPerSecond;
  std::memcpy(cache.prefix, text.data(), sizeof(cache.prefix));
  cache.start_us = start_us;
  cache.valid = true;
  return true;
}

}  // namespace

bool parseRfc3339(std::string_view text, Micros& out) {
  Micros minute_us = 0;
  int second = 0;
  if (text.size() < 19 || !parseMinute(text, minute_us) || text[16] != ':' ||
      !digits(text, 17, 2, second) || second > 60) {
    return false;
  }
  std::size_t pos = 19;
  Micros fraction = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int count = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (count < 6) {
        fraction = fraction * 10 + (text[pos] - '0');
      }
      ++count;
      ++pos;
    }
    if (count == 0 || count > 9) {
      return false;
    }
    for (int i = count; i < 6; ++i) {
      fraction *= 10;
    }
  }
  Micros offset = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int oh = 0;
    int om = 0;
    std::size_t colon = text.size() > pos + 3 && text[pos + 3] == ':' ? 1 : 0;
    if (!digits(text, pos + 1, 2, oh) || !digits(text, pos + 3 + colon, 2, om) || oh > 23 ||
        om > 59) {
      return false;
    }
    offset = (static_cast<Micros>(oh) * 3600 + om * 60) * kMicrosPerSecond;
    if (text[pos] == '-') {
      offset = -offset;
    }
    pos += 5 + colon;
  } else {
    return false;
  }
  if (pos != text.size()) {
    return false;
  }
  out = minute_us + second * kMicrosPerSecond + fraction - offset;
  return true;
}

namespace {

/// `,"descriptors":[{...},...]` without its closing bracket.
void appendDescriptors(std::string& out, const DecisionRequest& request) {
  out += R"(,"descriptors":[)";
  for (std::size_t d = 0; d < request.descriptors.size(); ++d) {
    out += d == 0 ? "{" : ",{";
    bool first = true;
    for (const Entry& entry : request.descriptors[d]) {
      if (!first) {
        out += ',';
      }
      first = false;
      appendQuoted(out, entry.key);
      out += ':';
      appendQuoted(out, entry.value);
    }
    out += '}';
  }
}

/// The descriptors' own hits and limits, when any has one.
void appendPerDescriptor(std::string& out, const DecisionRequest& request) {
  bool any_hits = false;
  for (const auto& hits : request.descriptor_hits) {
    any_hits = any_hits || hits.has_value();
  }
  if (any_hits) {
    out += R"(,"descriptor_hits":[)";
    for (std::size_t d = 0; d < request.descriptor_hits.size(); ++d) {
      if (d > 0) {
        out += ',';
      }
      out += request.descriptor_hits[d] ? std::to_string(*request.descriptor_hits[d]) : "null";
    }
    out += ']';
  }
  bool any_limits = false;
  for (const auto& limit : request.descriptor_limits) {
    any_limits = any_limits || limit.has_value();
  }
  if (any_limits) {
    out += R"(,"descriptor_limits":[)";
    for (std::size_t d = 0; d < request.descriptor_limits.size(); ++d) {
      if (d > 0) {
        out += ',';
      }
      const auto& limit = request.descriptor_limits[d];
      if (!limit) {
        out += "null";
        continue;
      }
      out += R"({"requests_per_unit":)";
      out += std::to_string(limit->requests_per_unit);
      out += R"(,"unit":")";
      out += unitName(limit->unit);
      out += "\"}";
    }
    out += ']';
  }
}

}  // namespace

void appendAccessJson(std::string& out, Micros time_us, const DecisionRequest& request,
                      std::string_view rule, std::string_view decision, bool degraded,
                      Micros latency_us, std::string_view rules_hash) {
  out += R"({"time":")";
  appendRfc3339Micros(out, time_us);
  out += R"(","domain":)";
  appendQuoted(out, request.domain);
  out += R"(,"client":)";
  appendQuoted(out, request.client_id);
  appendDescriptors(out, request);
  out += R"(],"hits":)";
  out += std::to_string(request.hits);
  appendPerDescriptor(out, request);
  // How the limits were charged, when not all or nothing (Envoy's endpoints count every
  // limit, a report never denies), and the refunds: a replay charges the same way.
  if (request.charge != Charge::kAllOrNothing) {
    out += request.charge == Charge::kEvery ? R"(,"charge":"every")" : R"(,"charge":"report")";
  }
  if (request.refund) {
    out += R"(,"refund":true)";
  }
  if (std::find(request.descriptor_refunds.begin(), request.descriptor_refunds.end(), true) !=
      request.descriptor_refunds.end()) {
    out += R"(,"descriptor_refunds":[)";
    for (std::size_t d = 0; d < request.descriptor_refunds.size(); ++d) {
      out += d > 0 ? "," : "";
      out += request.descriptor_refunds[d] ? "true" : "false";
    }
    out += ']';
  }
  out += R"(,"rule":)";
  appendQuoted(out, rule);
  out += R"(,"decision":)";
  appendQuoted(out, decision);
  out += R"(,"degraded":)";
  out += degraded ? "true" : "false";
  out += R"(,"latency_us":)";
  out += std::to_string(latency_us);
  out += R"(,"rules":)";
  appendQuoted(out, rules_hash);
  out += '}';
}

namespace {

bool readDescriptors(JsonCursor& in, DecisionRequest& request) {
  if (!in.consume('[')) {
    return false;
  }
  std::size_t count = 0;
  std::string key;
  for (bool first = true; in.nextItem(']', first); first = false) {
    if (count == request.descriptors.size()) {
      request.descriptors.emplace_back();
    }
    Descriptor& descriptor = request.descriptors[count++];
    std::size_t entries = 0;
    if (!in.consume('{')) {
      return false;
    }
    for (bool first_entry = true; in.nextItem('}', first_entry); first_entry = false) {
      if (entries == descriptor.size()) {
        descriptor.emplace_back();
      }
      Entry& entry = descriptor[entries++];
      if (!in.readString(entry.key) || !in.consume(':') || !in.readString(entry.value)) {
        return false;
      }
    }
    if (!in.error().empty()) {
      return false;
    }
    descriptor.resize(entries);
  }
  request.descriptors.resize(count);
  return in.error().empty();
}

bool readDescriptorHits(JsonCursor& in, DecisionRequest& request) {
  request.descriptor_hits.clear();
  if (!in.consume('[')) {
    return false;
  }
  for (bool first = true; in.nextItem(']', first); first = false) {
    if (in.peek() == 'n') {
      if (!in.readLiteral("null")) {
        return false;
      }
      request.descriptor_hits.emplace_back();
      continue;
    }
    std::int64_t hits = 0;
    if (!in.readInt(hits)) {
      return false;
    }
    if (hits < 0) {
      return in.fail("descriptor_hits must not be negative");
    }
    request.descriptor_hits.emplace_back(hits);
  }
  return in.error().empty();
}

bool readDescriptorLimits(JsonCursor& in, DecisionRequest& request) {
  request.descriptor_limits.clear();
  if (!in.consume('[')) {
    return false;
  }
  std::string name;
  std::string text;
  for (bool first = true; in.nextItem(']', first); first = false) {
    if (in.peek() == 'n') {
      if (!in.readLiteral("null")) {
        return false;
      }
      request.descriptor_limits.emplace_back();
      continue;
    }
    LimitOverride limit;
    if (!in.consume('{')) {
      return false;
    }
    for (bool first_member = true; in.nextItem('}', first_member); first_member = false) {
      if (!in.readString(name) || !in.consume(':')) {
        return false;
      }
      if (name == "requests_per_unit") {
        if (!in.readInt(limit.requests_per_unit)) {
          return false;
        }
        if (limit.requests_per_unit < 0) {
          return in.fail("requests_per_unit must not be negative");
        }
      } else if (name == "unit") {
        if (!in.readString(text)) {
          return false;
        }
        auto unit = parseUnit(text);
        if (!unit) {
          return in.fail("unknown unit \"" + text + "\"");
        }
        limit.unit = *unit;
      } else if (!in.skipValue()) {
        return false;
      }
    }
    if (!in.error().empty()) {
      return false;
    }
    request.descriptor_limits.emplace_back(limit);
  }
  return in.error().empty();
}

bool readBool(JsonCursor& in, bool& out) {
  out = in.peek() == 't';
  return in.readLiteral(out ? "true" : "false");
}

bool readDescriptorRefunds(JsonCursor& in, DecisionRequest& request) {
  request.descriptor_refunds.clear();
  if (!in.consume('[')) {
    return false;
  }
  for (bool first = true; in.nextItem(']', first); first = false) {
    bool refund = false;
    if (!readBool(in, refund)) {
      return false;
    }
    request.descriptor_refunds.push_back(refund);
  }
  return in.error().empty();
}

bool readCharge(JsonCursor& in, DecisionRequest& request, std::string& text) {
  if (!in.readString(text)) {
    return false;
  }
  if (text == "every") {
    request.charge = Charge::kEvery;
  } else if (text == "report") {
    request.charge = Charge::kReport;
  } else if (text == "all_or_nothing") {
    request.charge = Charge::kAllOrNothing;
  } else {
    return in.fail("\"charge\" must be every, report or all_or_nothing, not \"" + text + "\"");
  }
  return true;
}

/// Which of the line's fields were read, and what was wrong with a bad one.
struct Seen {
  bool time = false;
  bool domain = false;
  bool descriptors = false;
  std::string problem;
};

enum class FieldRead { kOk, kStop, kBad };

enum class Field {
  kOther,
  kTime,
  kDomain,
  kClient,
  kDescriptors,
  kHits,
  kDescriptorHits,
  kDescriptorLimits,
  kCharge,
  kRefund,
  kDescriptorRefunds,
  kDecision,
  kRule,
  kRules,
};

/// `name` is `word` (whose length the caller has matched).
template <std::size_t N>
bool named(std::string_view name, const char (&word)[N]) {
  return std::memcmp(name.data(), word, N - 1) == 0;
}

/// The member `name` names: by its length first, then one comparison of a known size (not
/// a string comparison for each member of the format in turn).
Field fieldNamed(std::string_view name) {
  switch (name.size()) {
    case 4:
      return named(name, "time")   ? Field::kTime
             : named(name, "hits") ? Field::kHits
             : named(name, "rule") ? Field::kRule
                                   : Field::kOther;
    case 5:
      return named(name, "rules") ? Field::kRules : Field::kOther;
    case 6:
      return named(name, "domain")   ? Field::kDomain
             : named(name, "client") ? Field::kClient
             : named(name, "charge") ? Field::kCharge
             : named(name, "refund") ? Field::kRefund
                                     : Field::kOther;
    case 8:
      return named(name, "decision") ? Field::kDecision : Field::kOther;
    case 11:
      return named(name, "descriptors") ? Field::kDescriptors : Field::kOther;
    case 15:
      return named(name, "descriptor_hits") ? Field::kDescriptorHits : Field::kOther;
    case 17:
      return named(name, "descriptor_limits") ? Field::kDescriptorLimits : Field::kOther;
    case 18:
      return named(name, "descriptor_refunds") ? Field::kDescriptorRefunds : Field::kOther;
    default:
      return Field::kOther;
  }
}

/// "time": an RFC 3339 string, without escapes as a view of the line.
FieldRead readTime(JsonCursor& in, LoggedRequest& out, Seen& seen, std::string& text) {
  std::string_view when;
  bool ok = in.readPlainString(when);
  if (!ok && in.error().empty()) {
    ok = in.readString(text);
    when = text;
  }
  if (ok && !parseRfc3339(when, out.time_us)) {
    seen.problem = "\"time\" is not an RFC 3339 time: \"" + std::string(when) + "\"";
    return FieldRead::kBad;
  }
  seen.time = ok;
  return ok ? FieldRead::kOk : FieldRead::kStop;
}

/// The value of field `name` into `out` (an unknown field is skipped): kStop when the
/// cursor failed (its error says why), kBad with `seen.problem` for a value out of range.
FieldRead readField(JsonCursor& in, std::string_view name, LoggedRequest& out, Seen& seen,
                    std::string& text) {
  DecisionRequest& request = out.request;
  bool ok = true;
  switch (fieldNamed(name)) {
    case Field::kTime:
      return readTime(in, out, seen, text);
    case Field::kDomain:
      ok = in.readString(request.domain);
      seen.domain = ok;
      break;
    case Field::kClient:
      ok = in.readString(request.client_id);
      break;
    case Field::kDescriptors:
      ok = readDescriptors(in, request);
      seen.descriptors = ok;
      break;
    case Field::kHits:
      ok = in.readInt(request.hits);
      if (ok && request.hits < 0) {
        seen.problem = "\"hits\" must not be negative";
        return FieldRead::kBad;
      }
      break;
    case Field::kDescriptorHits:
      ok = readDescriptorHits(in, request);
      break;
    case Field::kDescriptorLimits:
      ok = readDescriptorLimits(in, request);
      break;
    case Field::kCharge:
      ok = readCharge(in, request, text);
      break;
    case Field::kRefund:
      ok = readBool(in, request.refund);
      break;
    case Field::kDescriptorRefunds:
      ok = readDescriptorRefunds(in, request);
      break;
    case Field::kDecision:
      ok = in.readString(out.decision);
      break;
    case Field::kRule:
      ok = in.readString(out.rule);
      break;
    case Field::kRules:
      ok = in.readString(out.rules_hash);
      break;
    case Field::kOther:
      ok = in.skipValue();
      break;
  }
  return ok ? FieldRead::kOk : FieldRead::kStop;
}

}  // namespace

bool parseAccessLine(std::string_view line, LoggedRequest& out, std::string& error) {
  if (parseWrittenLine(line, out)) {
    return true;  // the usual line, as Sluice writes it
  }
  JsonCursor in(line);
  DecisionRequest& request = out.request;
  request.clearForReuse();
  out.decision.clear();
  out.rule.clear();
  out.rules_hash.clear();
  Seen seen;
  std::string name_storage;
  std::string text;
  auto failAt = [&](std::size_t column, const std::string& message) {
    error = "column " + std::to_string(column) + ": " + message;
    return false;
  };
  if (in.peek() != '{') {
    return failAt(in.position() + 1,
                  "not a JSON object (the access log must be written with "
                  "--access-log-format json, or give --map)");
  }
  in.consume('{');
  for (bool first = true; in.nextItem('}', first); first = false) {
    std::string_view name_view;
    if (!in.readPlainString(name_view)) {
      if (!in.error().empty() || !in.readString(name_storage)) {
        break;
      }
      name_view = name_storage;
    }
    if (!in.consume(':')) {
      break;
    }
    const std::size_t at = in.position();
    const FieldRead read = readField(in, name_view, out, seen, text);
    if (read == FieldRead::kBad) {
      return failAt(at + 1, seen.problem);
    }
    if (read == FieldRead::kStop) {
      break;
    }
  }
  if (!in.error().empty()) {
    return failAt(in.position() + 1, in.error());
  }
  if (!in.atEnd()) {
    return failAt(in.position() + 1, "text after the JSON object");
  }
  if (!seen.time) {
    return failAt(1, "no \"time\"");
  }
  if (!seen.domain) {
    return failAt(1, "no \"domain\"");
  }
  if (!seen.descriptors) {
    request.descriptors.clear();
  }
  return true;
}

}  // namespace sluice::simulate
