#include "store/redis/script_limit.hpp"

namespace sluice::redis {

ScriptLimitArgs scriptLimitArgs(const LimitParams& params, Micros now) {
  if (params.calendar.enabled() && params.algorithm == Algorithm::kFixedWindow) {
    const CalendarWindow current = calendarWindowAt(params.calendar, now);
    const CalendarWindow previous = calendarWindowAt(params.calendar, current.start - 1);
    const CalendarWindow next = calendarWindowAt(params.calendar, current.end);
    return ScriptLimitArgs{kCalendarWindowCode,           params.limit,
                           current.end - current.start,   current.start,
                           previous.end - previous.start, next.end - next.start};
  }
  if (params.algorithm == Algorithm::kConcurrency) {
    return ScriptLimitArgs{kConcurrencyCode, params.limit, params.window_us, 0, 0, 0};
  }
  return ScriptLimitArgs{static_cast<std::int64_t>(params.algorithm),
                         params.limit,
                         params.window_us,
                         params.burst,
                         params.min_interval_us,
                         params.warmup_us};
}

}  // namespace sluice::redis
