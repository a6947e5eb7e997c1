#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sluice/common/clock.hpp"

/// Calendar windows: a day, an ISO week, a month or a year as a clock on the wall of a time
/// zone counts them (docs/algorithms.md, "Calendar windows"). The zones are those of the
/// system's tz database (Debian's tzdata under /usr/share/zoneinfo), read through Howard
/// Hinnant's date library, the library C++20's <chrono> time zones were adopted from (GCC
/// 12's libstdc++ has the C++20 calendar types but not the zones).
///
/// Pure once a zone is found: a window is a function of (unit, zone, now).
namespace sluice {

/// Which calendar unit a window spans; kNone: the limit's window is a plain length,
/// epoch-aligned (the envoy-compatible meaning of `unit`).
enum class CalendarUnit : std::uint8_t { kNone, kDay, kWeek, kMonth, kYear };

/// A zone of the tz database. An opaque handle: the zones live as long as the process, so
/// a `const TimeZone*` may be kept anywhere (a rule's parameters, a request).
class TimeZone;

/// The zone named `name` ("Europe/Paris", "UTC", a link such as "US/Eastern"), or null when
/// the database has no such zone. Thread-safe; never throws. The first call reads the
/// database (a few milliseconds): the rules loader makes it, before any request.
const TimeZone* findTimeZone(std::string_view name);
/// The zone's name as the database spells it.
std::string_view timeZoneName(const TimeZone& zone);
/// Every zone's name, sorted (for did-you-mean hints); empty without a database.
std::vector<std::string_view> timeZoneNames();
/// The version of the tz database the zones come from ("2025b"), or "" when unknown.
std::string_view timeZoneDatabaseVersion();

/// A limit's calendar: the unit and the zone its windows follow. A null zone is UTC.
struct CalendarSpec {
  CalendarUnit unit = CalendarUnit::kNone;
  const TimeZone* zone = nullptr;

  bool enabled() const { return unit != CalendarUnit::kNone; }
  friend bool operator==(const CalendarSpec&, const CalendarSpec&) = default;
};

/// One calendar window, [start, end) in microseconds since the Unix epoch.
struct CalendarWindow {
  Micros start = 0;
  Micros end = 0;
};

/// The window of `spec` (enabled) that holds `now`: it starts at local midnight of the first
/// day of the unit (a day; a week's Monday, ISO 8601; a month's 1st; a year's January 1st)
/// and ends where the next one starts, so a day lasts 23, 24 or 25 hours across a
/// daylight-saving change and a month 28 to 31 days. A midnight the zone skips (a change at
/// 00:00) starts the day at the first instant after the gap; a midnight it repeats starts it
/// at the first of the two. start <= now < end.
CalendarWindow calendarWindowAt(const CalendarSpec& spec, Micros now);

/// "day", "week", "month", "year" ("" for kNone).
std::string_view calendarUnitName(CalendarUnit unit);

}  // namespace sluice
