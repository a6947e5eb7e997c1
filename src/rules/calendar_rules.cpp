#include "rules/calendar_rules.hpp"

#include <algorithm>
#include <array>
#include <optional>

#include "rules/suggest.hpp"

namespace sluice::rules_detail {
namespace {

constexpr std::array<std::string_view, 2> kCalendarKeys{"time_zone", "time_zone_from"};

std::optional<CalendarUnit> calendarUnitOf(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kDay:
      return CalendarUnit::kDay;
    case TimeUnit::kWeek:
      return CalendarUnit::kWeek;
    case TimeUnit::kMonth:
      return CalendarUnit::kMonth;
    case TimeUnit::kYear:
      return CalendarUnit::kYear;
    default:
      return std::nullopt;
  }
}

/// The zone named by `field`, or null after reporting why there is none.
const TimeZone* readZone(YamlReader& reader, const Field& field) {
  const auto name = reader.readString(field, "time_zone");
  if (!name) {
    return nullptr;
  }
  if (const TimeZone* zone = findTimeZone(*name)) {
    return zone;
  }
  const std::vector<std::string_view> names = timeZoneNames();
  if (names.empty()) {
    reader.error(reader.at(field), "unknown time zone " + inQuotes(*name) +
                                       ": the system has no tz database (install tzdata: "
                                       "/usr/share/zoneinfo)");
    return nullptr;
  }
  std::string message = "unknown time zone " + inQuotes(*name) +
                        " (a name of the tz database, such as 'Europe/Paris' or 'UTC'";
  if (const auto suggestion = closestMatch(*name, names)) {
    message += "; did you mean " + inQuotes(*suggestion) + "?";
  }
  reader.error(reader.at(field), message + ")");
  return nullptr;
}

}  // namespace

void readCalendar(YamlReader& reader, const Field& field, RateLimit& limit) {
  if (!field.value.IsMap()) {
    reader.error(reader.at(field),
                 "'calendar' must be a mapping with 'time_zone' or "
                 "'time_zone_from', not a " +
                     YamlReader::kindOf(field.value));
    return;
  }
  const std::size_t errors_before = reader.errorsReported();
  const Fields fields =
      reader.readFields(field.value, KeySet{kCalendarKeys, "in 'calendar'", nullptr});
  const auto zone_field = fields.find("time_zone");
  const auto from_field = fields.find("time_zone_from");
  if (zone_field == fields.end() && from_field == fields.end()) {
    reader.error(reader.at(field),
                 "'calendar' needs 'time_zone' (a zone such as "
                 "'Europe/Paris') or 'time_zone_from' (a descriptor key)");
  }
  const TimeZone* zone = nullptr;
  if (zone_field != fields.end()) {
    zone = readZone(reader, zone_field->second);
  }
  std::string from;
  if (from_field != fields.end()) {
    if (auto key = reader.readString(from_field->second, "time_zone_from")) {
      if (key->empty()) {
        reader.error(reader.at(from_field->second), "'time_zone_from' must name a descriptor key");
      }
      from = std::move(*key);
    }
  }
  if (limit.unlimited) {
    reader.error(reader.at(field.key), "'calendar' does not apply to an unlimited rate limit");
  }
  const std::optional<CalendarUnit> unit = calendarUnitOf(limit.unit);
  if (!unit && !limit.unlimited) {
    reader.error(reader.at(field.key),
                 "'calendar' needs a 'unit' of day, week, month or year, "
                 "not " +
                     inQuotes(unitName(limit.unit)));
  }
  if (limit.unit_multiplier != 1) {
    reader.error(reader.at(field.key),
                 "'calendar' windows are one calendar day, week, month or year: "
                 "'unit_multiplier' must be 1, not " +
                     std::to_string(limit.unit_multiplier));
  }
  if (reader.errorsReported() != errors_before || !unit) {
    return;
  }
  limit.params.calendar = CalendarSpec{*unit, zone};
  limit.calendar_zone_from = std::move(from);
  limit.calendar_zone_fallback = limit.calendar_zone_from.empty() ? nullptr : zone;
}

void checkCalendarZoneKey(YamlReader& reader, const RateLimit& limit,
                          const std::vector<std::string>& path_keys) {
  if (limit.calendar_zone_from.empty()) {
    return;
  }
  if (std::find(path_keys.begin(), path_keys.end(), limit.calendar_zone_from) != path_keys.end()) {
    return;
  }
  if (path_keys.empty()) {
    reader.error(limit.location, "'time_zone_from' " + inQuotes(limit.calendar_zone_from) +
                                     ": a domain-level rate limit has no descriptor to read a "
                                     "zone from (use 'time_zone')");
    return;
  }
  std::string keys;
  for (const std::string& key : path_keys) {
    keys += keys.empty() ? "" : ", ";
    keys += key;
  }
  reader.error(limit.location, "'time_zone_from' " + inQuotes(limit.calendar_zone_from) +
                                   " is not a key of this limit's descriptor (its keys: " + keys +
                                   "): the zone's entry must be part of the counter's key");
}

}  // namespace sluice::rules_detail
