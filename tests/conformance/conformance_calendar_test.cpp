// Calendar windows (docs/algorithms.md, "Calendar windows") on the memory store (C++ limiter)
// and a real redis-server (Lua, which gets the window bounds from the sidecar): the same
// requests across daylight-saving changes and month ends in several zones, with the
// expected resets, then random traces with refunds and envoy's counting compared field by
// field.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "conformance/conformance_harness.hpp"
#include "sluice/limiter/calendar.hpp"

namespace sluice::conformance {
namespace {

constexpr Micros kHour = 3'600 * kMicrosPerSecond;
constexpr Micros kDay = 24 * kHour;

Micros utc(int y, unsigned m, unsigned d, int h = 0, int min = 0) {
  const std::chrono::sys_days day{std::chrono::year{y} / std::chrono::month{m} /
                                  std::chrono::day{d}};
  return std::chrono::duration_cast<std::chrono::microseconds>(day.time_since_epoch()).count() +
         h * kHour + min * 60 * kMicrosPerSecond;
}

LimitParams calendarParams(CalendarUnit unit, const char* zone, std::int64_t limit) {
  LimitParams p;
  p.algorithm = Algorithm::kFixedWindow;
  p.limit = limit;
  p.window_us = kDay;  // the nominal length: never used for a calendar window
  p.calendar = CalendarSpec{unit, findTimeZone(zone)};
  EXPECT_NE(p.calendar.zone, nullptr) << zone;
  return p;
}

struct Step {
  Micros at = 0;
  bool allowed = true;
  std::int64_t remaining = 0;
  Micros reset_after = 0;
  Micros retry_after = 0;
};

struct Case {
  std::string name;
  LimitParams params;
  std::vector<Step> steps;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  // Paris, 29 March 2026: 23 hours (02:00 CET -> 03:00 CEST); midnight is 22:00 UTC after.
  out.push_back(Case{"paris_day_of_23_hours",
                     calendarParams(CalendarUnit::kDay, "Europe/Paris", 2),
                     {{utc(2026, 3, 29, 0), true, 1, 22 * kHour, 0},
                      {utc(2026, 3, 29, 12), true, 0, 10 * kHour, 0},
                      {utc(2026, 3, 29, 21, 59), false, 0, kHour / 60, kHour / 60},
                      {utc(2026, 3, 29, 22), true, 1, 24 * kHour, 0}}});
  // New York, 1 November 2026: 25 hours (02:00 EDT -> 01:00 EST).
  out.push_back(Case{"new_york_day_of_25_hours",
                     calendarParams(CalendarUnit::kDay, "America/New_York", 1),
                     {{utc(2026, 11, 1, 4), true, 0, 25 * kHour, 0},
                      {utc(2026, 11, 2, 4, 30), false, 0, kHour / 2, kHour / 2},
                      {utc(2026, 11, 2, 5), true, 0, 24 * kHour, 0}}});
  // Sydney, April 2026: the month holds the autumn change (+1 hour).
  out.push_back(Case{"sydney_month_with_a_change",
                     calendarParams(CalendarUnit::kMonth, "Australia/Sydney", 1),
                     {{utc(2026, 3, 31, 13), true, 0, 30 * kDay + kHour, 0},
                      {utc(2026, 4, 30, 13, 59), false, 0, kHour / 60, kHour / 60},
                      {utc(2026, 4, 30, 14), true, 0, 31 * kDay, 0}}});
  // Kolkata (UTC+05:30), February of a leap year, then March.
  out.push_back(Case{"kolkata_february_of_a_leap_year",
                     calendarParams(CalendarUnit::kMonth, "Asia/Kolkata", 3),
                     {{utc(2028, 1, 31, 18, 30), true, 2, 29 * kDay, 0},
                      {utc(2028, 2, 29, 18, 29), true, 1, kHour / 60, 0},
                      {utc(2028, 2, 29, 18, 30), true, 2, 31 * kDay, 0}}});
  // Paris, the ISO week of the spring change (Monday 23 to Monday 30 March 2026).
  out.push_back(Case{"paris_week_across_the_change",
                     calendarParams(CalendarUnit::kWeek, "Europe/Paris", 1),
                     {{utc(2026, 3, 22, 23), true, 0, 7 * kDay - kHour, 0},
                      {utc(2026, 3, 29, 21), false, 0, kHour, kHour},
                      {utc(2026, 3, 29, 22), true, 0, 7 * kDay, 0}}});
  // New York, a year.
  out.push_back(Case{"new_york_year",
                     calendarParams(CalendarUnit::kYear, "America/New_York", 1),
                     {{utc(2026, 12, 31, 12), true, 0, 17 * kHour, 0},
                      {utc(2027, 1, 1, 4, 59), false, 0, kHour / 60, kHour / 60},
                      {utc(2027, 1, 1, 5), true, 0, 365 * kDay, 0}}});
  return out;
}

StoreRequest requestFor(const LimitParams& params, Charge charge = Charge::kAllOrNothing,
                        bool refund = false, std::int64_t cost = 1) {
  StoreLimit limit;
  limit.key = "cal;i0;fw";
  limit.params = params;
  limit.refund = refund;
  StoreRequest request = clientRequest({limit}, cost, "calendar-client");
  request.charge = charge;
  return request;
}

TEST(CalendarConformanceTest, BothStoresAnswerEveryCaseAsExpected) {
  for (const Case& c : cases()) {
    StorePair stores(testPrefix() + "-" + c.name);
    for (std::size_t i = 0; i < c.steps.size(); ++i) {
      const Step& step = c.steps[i];
      stores.clock().set(step.at);
      const StoreRequest request = requestFor(c.params);
      for (Store* store : {&stores.memory(), &stores.redis()}) {
        const Result<StoreResponse> r = stores.run(*store, request);
        ASSERT_TRUE(r.ok()) << r.error().message;
        const Outcome& o = r->outcomes.at(0);
        const std::string where = c.name + " step " + std::to_string(i) + " on " +
                                  std::string(store->kind()) + ": " + str(o);
        EXPECT_EQ(o.allowed, step.allowed) << where;
        EXPECT_EQ(o.remaining, step.remaining) << where;
        EXPECT_EQ(o.reset_after_us, step.reset_after) << where;
        EXPECT_EQ(o.retry_after_us, step.retry_after) << where;
      }
    }
  }
}

/// Random requests around the boundaries of several zones' windows, with refunds, reports
/// and envoy's counting: the two stores answer the same, field by field.
TEST(CalendarConformanceTest, RandomTracesAcrossBoundariesAgree) {
  std::mt19937_64 random(20261101);
  const std::vector<LimitParams> limits{
      calendarParams(CalendarUnit::kDay, "Europe/Paris", 3),
      calendarParams(CalendarUnit::kDay, "America/New_York", 2),
      calendarParams(CalendarUnit::kWeek, "Australia/Sydney", 4),
      calendarParams(CalendarUnit::kMonth, "Asia/Kolkata", 5),
      calendarParams(CalendarUnit::kMonth, "America/Santiago", 3),
  };
  std::uniform_int_distribution<int> pick_charge(0, 5);
  std::uniform_int_distribution<Micros> jump(0, 6 * kHour);
  for (std::size_t l = 0; l < limits.size(); ++l) {
    StorePair stores(testPrefix() + "-" + std::to_string(l));
    Micros now = utc(2026, 3, 27);
    for (int i = 0; i < 120; ++i) {
      now += jump(random);
      stores.clock().set(now);
      const int kind = pick_charge(random);
      const StoreRequest request =
          requestFor(limits[l], kind == 4 ? Charge::kEvery : Charge::kAllOrNothing, kind == 5,
                     kind == 3 ? 2 : 1);
      const Result<StoreResponse> memory = stores.run(stores.memory(), request);
      const Result<StoreResponse> redis = stores.run(stores.redis(), request);
      ASSERT_TRUE(memory.ok() && redis.ok());
      ASSERT_TRUE(sameOutcome(memory->outcomes.at(0), redis->outcomes.at(0)))
          << "limit " << l << " step " << i << ": memory " << str(memory->outcomes[0]) << " redis "
          << str(redis->outcomes[0]);
      ASSERT_EQ(memory->allowed, redis->allowed);
    }
  }
}

}  // namespace
}  // namespace sluice::conformance
