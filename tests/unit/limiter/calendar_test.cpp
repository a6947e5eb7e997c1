#include "sluice/limiter/calendar.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>

#include "sluice/limiter/limiter.hpp"
#include "support/bucket_driver.hpp"

namespace sluice {
namespace {

constexpr Micros kHour = 3'600 * kMicrosPerSecond;
constexpr Micros kDay = 24 * kHour;

/// An instant given in UTC: y-m-d h:min, in microseconds since the epoch (std::chrono's own
/// calendar, independent of the code under test).
Micros utc(int y, unsigned m, unsigned d, int h = 0, int min = 0) {
  const std::chrono::sys_days day{std::chrono::year{y} / std::chrono::month{m} /
                                  std::chrono::day{d}};
  return std::chrono::duration_cast<std::chrono::microseconds>(day.time_since_epoch()).count() +
         h * kHour + min * 60 * kMicrosPerSecond;
}

CalendarSpec spec(CalendarUnit unit, const char* zone) {
  const TimeZone* found = findTimeZone(zone);
  EXPECT_NE(found, nullptr) << zone;
  return CalendarSpec{unit, found};
}

void expectWindow(const CalendarSpec& s, Micros now, Micros start, Micros end) {
  const CalendarWindow w = calendarWindowAt(s, now);
  EXPECT_EQ(w.start, start) << "start is off by " << (w.start - start) / 60'000'000 << " min";
  EXPECT_EQ(w.end, end) << "end is off by " << (w.end - end) / 60'000'000 << " min";
}

TEST(TimeZoneTest, FindsZonesAndLinksAndRefusesUnknownNames) {
  const TimeZone* paris = findTimeZone("Europe/Paris");
  ASSERT_NE(paris, nullptr);
  EXPECT_EQ(timeZoneName(*paris), "Europe/Paris");
  EXPECT_EQ(findTimeZone("Europe/Paris"), paris);  // one handle per zone
  EXPECT_NE(findTimeZone("UTC"), nullptr);
  EXPECT_NE(findTimeZone("US/Eastern"), nullptr);
  EXPECT_EQ(findTimeZone("Mars/Olympus_Mons"), nullptr);
  EXPECT_EQ(findTimeZone("europe/paris"), nullptr);  // the database's names are exact
  EXPECT_EQ(findTimeZone(""), nullptr);
  EXPECT_EQ(findTimeZone("Europe/Paris\n"), nullptr);
}

TEST(CalendarWindowTest, ParisDaysLast23And25HoursAcrossDaylightSavingChanges) {
  const CalendarSpec day = spec(CalendarUnit::kDay, "Europe/Paris");
  // An ordinary winter day: midnight CET is 23:00 UTC the day before.
  expectWindow(day, utc(2026, 1, 15, 12), utc(2026, 1, 14, 23), utc(2026, 1, 15, 23));
  // 29 March 2026: 02:00 CET becomes 03:00 CEST, the day has 23 hours.
  expectWindow(day, utc(2026, 3, 29, 12), utc(2026, 3, 28, 23), utc(2026, 3, 29, 22));
  // 25 October 2026: 03:00 CEST becomes 02:00 CET, the day has 25 hours.
  expectWindow(day, utc(2026, 10, 25, 0, 30), utc(2026, 10, 24, 22), utc(2026, 10, 25, 23));
  expectWindow(day, utc(2026, 10, 25, 22, 59), utc(2026, 10, 24, 22), utc(2026, 10, 25, 23));
}

TEST(CalendarWindowTest, NewYorkDaysFollowItsOwnChanges) {
  const CalendarSpec day = spec(CalendarUnit::kDay, "America/New_York");
  // 8 March 2026: 02:00 EST becomes 03:00 EDT.
  expectWindow(day, utc(2026, 3, 8, 10), utc(2026, 3, 8, 5), utc(2026, 3, 9, 4));
  // 1 November 2026: 02:00 EDT becomes 01:00 EST.
  expectWindow(day, utc(2026, 11, 1, 10), utc(2026, 11, 1, 4), utc(2026, 11, 2, 5));
  // Just before local midnight (04:59 UTC, 23:59 EST) is still the previous day.
  expectWindow(day, utc(2026, 11, 3, 4, 59), utc(2026, 11, 2, 5), utc(2026, 11, 3, 5));
}

TEST(CalendarWindowTest, SydneyChangesInTheSouthernSeasons) {
  const CalendarSpec day = spec(CalendarUnit::kDay, "Australia/Sydney");
  // 5 April 2026: 03:00 AEDT becomes 02:00 AEST (25 hours).
  expectWindow(day, utc(2026, 4, 5, 0), utc(2026, 4, 4, 13), utc(2026, 4, 5, 14));
  // 4 October 2026: 02:00 AEST becomes 03:00 AEDT (23 hours).
  expectWindow(day, utc(2026, 10, 4, 0), utc(2026, 10, 3, 14), utc(2026, 10, 4, 13));
}

TEST(CalendarWindowTest, KolkataHalfHourOffsetAndFebruaryOfLeapAndCommonYears) {
  const CalendarSpec month = spec(CalendarUnit::kMonth, "Asia/Kolkata");
  // IST is UTC+05:30: local midnight is 18:30 UTC the day before.
  expectWindow(month, utc(2028, 2, 10), utc(2028, 1, 31, 18, 30), utc(2028, 2, 29, 18, 30));
  expectWindow(month, utc(2027, 2, 10), utc(2027, 1, 31, 18, 30), utc(2027, 2, 28, 18, 30));
  // 31 January 20:00 UTC is already 1 February in Kolkata.
  expectWindow(month, utc(2027, 1, 31, 20), utc(2027, 1, 31, 18, 30), utc(2027, 2, 28, 18, 30));
}

TEST(CalendarWindowTest, MonthsOf28To31DaysAndTheOneWithAChangeInIt) {
  const CalendarSpec month = spec(CalendarUnit::kMonth, "Europe/Paris");
  // March 2026 holds the spring change: 31 days less one hour.
  const CalendarWindow march = calendarWindowAt(month, utc(2026, 3, 15));
  EXPECT_EQ(march.start, utc(2026, 2, 28, 23));
  EXPECT_EQ(march.end, utc(2026, 3, 31, 22));
  EXPECT_EQ(march.end - march.start, 31 * kDay - kHour);
  const CalendarWindow april = calendarWindowAt(month, utc(2026, 4, 30, 21, 59));
  EXPECT_EQ(april.end - april.start, 30 * kDay);
  EXPECT_EQ(april.start, march.end);
  // 30 April 22:00 UTC is midnight of 1 May in Paris: the next month.
  EXPECT_EQ(calendarWindowAt(month, utc(2026, 4, 30, 22)).start, april.end);
  const CalendarWindow february = calendarWindowAt(month, utc(2026, 2, 1));
  EXPECT_EQ(february.end - february.start, 28 * kDay);
  const CalendarWindow december = calendarWindowAt(month, utc(2026, 12, 31, 22));
  EXPECT_EQ(december.start, utc(2026, 11, 30, 23));
  EXPECT_EQ(december.end, utc(2026, 12, 31, 23));
}

TEST(CalendarWindowTest, WeeksStartOnMondayInTheZone) {
  const CalendarSpec week = spec(CalendarUnit::kWeek, "Europe/Paris");
  // Monday 23 March 2026 to Monday 30 March, across the spring change.
  expectWindow(week, utc(2026, 3, 26, 12), utc(2026, 3, 22, 23), utc(2026, 3, 29, 22));
  // Sunday 22 March 23:30 UTC is Monday 00:30 in Paris: that week already.
  expectWindow(week, utc(2026, 3, 22, 23, 30), utc(2026, 3, 22, 23), utc(2026, 3, 29, 22));
  // A week across a year's end: Monday 28 December 2026 to Monday 4 January 2027.
  const CalendarSpec utc_week{CalendarUnit::kWeek, nullptr};
  expectWindow(utc_week, utc(2027, 1, 1), utc(2026, 12, 28), utc(2027, 1, 4));
}

TEST(CalendarWindowTest, YearsStartOnJanuaryFirstInTheZone) {
  const CalendarSpec year = spec(CalendarUnit::kYear, "America/New_York");
  expectWindow(year, utc(2026, 7, 4), utc(2026, 1, 1, 5), utc(2027, 1, 1, 5));
  // 1 January 2027 03:00 UTC is still 2026 in New York.
  expectWindow(year, utc(2027, 1, 1, 3), utc(2026, 1, 1, 5), utc(2027, 1, 1, 5));
  const CalendarSpec leap{CalendarUnit::kYear, nullptr};
  const CalendarWindow w = calendarWindowAt(leap, utc(2028, 6, 1));
  EXPECT_EQ(w.end - w.start, 366 * kDay);
}

TEST(CalendarWindowTest, SkippedMidnightStartsTheDayAtTheEndOfTheGap) {
  // Santiago, 6 September 2026: 00:00 -04 becomes 01:00 -03, midnight never happens.
  const CalendarSpec day = spec(CalendarUnit::kDay, "America/Santiago");
  expectWindow(day, utc(2026, 9, 6, 12), utc(2026, 9, 6, 4), utc(2026, 9, 7, 3));
  expectWindow(day, utc(2026, 9, 6, 3, 59), utc(2026, 9, 5, 4), utc(2026, 9, 6, 4));
}

TEST(CalendarWindowTest, RepeatedMidnightStartsTheDayAtTheFirstOne) {
  // Havana, 1 November 2026: 01:00 -04 becomes 00:00 -05, midnight happens twice.
  const CalendarSpec day = spec(CalendarUnit::kDay, "America/Havana");
  expectWindow(day, utc(2026, 11, 1, 4, 30), utc(2026, 11, 1, 4), utc(2026, 11, 2, 5));
  expectWindow(day, utc(2026, 10, 31, 12), utc(2026, 10, 31, 4), utc(2026, 11, 1, 4));
}

TEST(CalendarWindowTest, WindowsTileTimeAndHoldNowInEveryZone) {
  std::mt19937_64 random(20260329);
  std::uniform_int_distribution<Micros> instant(utc(2024, 1, 1), utc(2037, 6, 1));
  for (const char* zone : {"Europe/Paris", "America/New_York", "Australia/Sydney", "Asia/Kolkata",
                           "Pacific/Chatham", "America/Santiago", "UTC"}) {
    for (const CalendarUnit unit :
         {CalendarUnit::kDay, CalendarUnit::kWeek, CalendarUnit::kMonth, CalendarUnit::kYear}) {
      const CalendarSpec s = spec(unit, zone);
      for (int i = 0; i < 200; ++i) {
        const Micros now = instant(random);
        const CalendarWindow w = calendarWindowAt(s, now);
        ASSERT_LE(w.start, now) << zone;
        ASSERT_LT(now, w.end) << zone;
        const CalendarWindow next = calendarWindowAt(s, w.end);
        ASSERT_EQ(next.start, w.end) << zone;
        ASSERT_EQ(calendarWindowAt(s, w.start - 1).end, w.start) << zone;
        ASSERT_EQ(calendarWindowAt(s, w.end - 1).start, w.start) << zone;
        if (unit == CalendarUnit::kDay) {
          ASSERT_GE(w.end - w.start, 22 * kHour) << zone;
          ASSERT_LE(w.end - w.start, 26 * kHour) << zone;
        } else if (unit == CalendarUnit::kMonth) {
          ASSERT_GE(w.end - w.start, 28 * kDay - 2 * kHour) << zone;
          ASSERT_LE(w.end - w.start, 31 * kDay + 2 * kHour) << zone;
        }
      }
    }
  }
}

TEST(CalendarWindowTest, AbsurdInstantsAreClampedNotOverflowed) {
  const CalendarSpec s = spec(CalendarUnit::kYear, "Europe/Paris");
  const CalendarWindow high = calendarWindowAt(s, std::numeric_limits<Micros>::max());
  EXPECT_LT(high.start, high.end);
  const CalendarWindow low = calendarWindowAt(s, std::numeric_limits<Micros>::min());
  EXPECT_LT(low.start, low.end);
}

/// The fixed window on a calendar: a quota's counter lives exactly as long as its day.
TEST(CalendarFixedWindowTest, DailyQuotaResetsAtLocalMidnightAcrossTheChange) {
  LimitParams p = test::makeParams(Algorithm::kFixedWindow, 2, 86'400 * kMicrosPerSecond);
  p.calendar = spec(CalendarUnit::kDay, "Europe/Paris");
  test::BucketDriver b(p);
  const Micros morning = utc(2026, 3, 29, 6);  // 08:00 CEST on the 23-hour day
  const Micros midnight = utc(2026, 3, 29, 22);
  Outcome first = b.hit(morning);
  EXPECT_TRUE(first.allowed);
  EXPECT_EQ(first.remaining, 1);
  EXPECT_EQ(first.reset_after_us, midnight - morning);
  EXPECT_EQ(b.lastTtl(), midnight - morning);
  EXPECT_TRUE(b.hit(morning + kHour).allowed);
  const Outcome denied = b.hit(morning + 2 * kHour);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.retry_after_us, midnight - (morning + 2 * kHour));
  b.expectExactRetry(morning + 2 * kHour, denied.retry_after_us);
  const Outcome next_day = b.hit(midnight);
  EXPECT_TRUE(next_day.allowed);
  EXPECT_EQ(next_day.remaining, 1);
  EXPECT_EQ(next_day.reset_after_us, 24 * kHour);  // 30 March is an ordinary day
}

TEST(CalendarFixedWindowTest, MonthlyQuotaRefundAndChargeStayInTheCalendarMonth) {
  LimitParams p = test::makeParams(Algorithm::kFixedWindow, 10, 30 * kDay);
  p.calendar = spec(CalendarUnit::kMonth, "America/New_York");
  const Micros now = utc(2026, 2, 27, 12);
  const Micros end = utc(2026, 3, 1, 5);  // midnight EST on 1 March
  const Evaluation charged = chargeAnyway(p, BucketState{}, now, 12);
  EXPECT_FALSE(charged.outcome.allowed);
  EXPECT_EQ(charged.outcome.retry_after_us, end - now);
  EXPECT_EQ(charged.ttl_us, end - now);
  const Evaluation refunded = refund(p, charged.next, now, 5);
  EXPECT_TRUE(refunded.outcome.allowed);
  EXPECT_EQ(refunded.outcome.remaining, 3);
  EXPECT_EQ(refunded.outcome.reset_after_us, end - now);
  // The charge is gone with February.
  EXPECT_EQ(evaluate(p, refunded.next, end, 1).outcome.remaining, 9);
}

}  // namespace
}  // namespace sluice
