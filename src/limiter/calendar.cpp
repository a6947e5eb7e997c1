#include "sluice/limiter/calendar.hpp"

#include <date/date.h>
#include <date/tz.h>

#include <algorithm>
#include <chrono>
#include <exception>

namespace sluice {
namespace {

using Us = std::chrono::microseconds;

/// Instants further from the epoch than this (about 3,000 years) are clamped before any
/// calendar arithmetic: the date library's years are 16-bit and its sums of offsets and
/// times must not overflow. Every time a rule or a clock produces is far inside.
constexpr Micros kCalendarRange = 100'000'000'000'000'000LL;

/// TimeZone is never defined: a `const TimeZone*` is a `const date::time_zone*` of the
/// process's tz database (which never moves or dies), cast there and back.
const TimeZone* handle(const date::time_zone* zone) {
  return reinterpret_cast<const TimeZone*>(zone);
}
const date::time_zone* native(const TimeZone* zone) {
  return reinterpret_cast<const date::time_zone*>(zone);
}

/// The database, read once (null when it cannot be read: no zone is then found).
const date::tzdb* database() {
  static const date::tzdb* const db = []() -> const date::tzdb* {
    try {
      return &date::get_tzdb();
    } catch (const std::exception&) {
      return nullptr;
    }
  }();
  return db;
}

Micros toMicros(const date::time_zone* zone, date::local_days day) {
  if (zone == nullptr) {
    return std::chrono::duration_cast<Us>(day.time_since_epoch()).count();
  }
  // A skipped midnight maps to the end of the gap, a repeated one to its first occurrence.
  const auto at = zone->to_sys(day, date::choose::earliest);
  return std::chrono::duration_cast<Us>(at.time_since_epoch()).count();
}

}  // namespace

const TimeZone* findTimeZone(std::string_view name) {
  const date::tzdb* db = database();
  if (db == nullptr || name.empty()) {
    return nullptr;
  }
  // The zones are sorted by name; a lookup of our own, because locate_zone throws.
  const auto it = std::lower_bound(
      db->zones.begin(), db->zones.end(), name,
      [](const date::time_zone& zone, std::string_view wanted) { return zone.name() < wanted; });
  if (it == db->zones.end() || it->name() != name) {
    return nullptr;
  }
  try {
    // A zone's file is read on its first use: here, not on a request's path. A file that
    // does not parse is no zone.
    (void)it->get_info(date::sys_seconds{});
  } catch (const std::exception&) {
    return nullptr;
  }
  return handle(&*it);
}

std::string_view timeZoneName(const TimeZone& zone) { return native(&zone)->name(); }

std::vector<std::string_view> timeZoneNames() {
  std::vector<std::string_view> names;
  if (const date::tzdb* db = database()) {
    names.reserve(db->zones.size());
    for (const date::time_zone& zone : db->zones) {
      names.push_back(zone.name());
    }
  }
  return names;
}

std::string_view timeZoneDatabaseVersion() {
  const date::tzdb* db = database();
  if (db == nullptr || db->version == "unknown") {
    return {};
  }
  return db->version;
}

CalendarWindow calendarWindowAt(const CalendarSpec& spec, Micros now) {
  now = std::clamp(now, -kCalendarRange, kCalendarRange);
  const date::time_zone* zone = native(spec.zone);
  const date::sys_time<Us> instant{Us{now}};
  const date::local_time<Us> local =
      zone != nullptr ? zone->to_local(instant) : date::local_time<Us>{Us{now}};
  const date::local_days day = date::floor<date::days>(local);
  date::local_days first = day;
  date::local_days next = day + date::days{1};
  switch (spec.unit) {
    case CalendarUnit::kNone:
    case CalendarUnit::kDay:
      break;
    case CalendarUnit::kWeek:
      first = day - (date::weekday{day} - date::Monday);
      next = first + date::days{7};
      break;
    case CalendarUnit::kMonth: {
      const date::year_month_day ymd{day};
      const date::year_month month = ymd.year() / ymd.month();
      first = date::local_days{month / 1};
      next = date::local_days{(month + date::months{1}) / 1};
      break;
    }
    case CalendarUnit::kYear: {
      const date::year year = date::year_month_day{day}.year();
      first = date::local_days{year / date::January / 1};
      next = date::local_days{(year + date::years{1}) / date::January / 1};
      break;
    }
  }
  return CalendarWindow{toMicros(zone, first), toMicros(zone, next)};
}

std::string_view calendarUnitName(CalendarUnit unit) {
  switch (unit) {
    case CalendarUnit::kNone:
      return "";
    case CalendarUnit::kDay:
      return "day";
    case CalendarUnit::kWeek:
      return "week";
    case CalendarUnit::kMonth:
      return "month";
    case CalendarUnit::kYear:
      return "year";
  }
  return "";
}

}  // namespace sluice
