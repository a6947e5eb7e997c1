#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "sluice/rules/rules.hpp"
#include "support/rules_loading.hpp"

namespace sluice {
namespace {

using test::errorsOf;
using test::loadOne;

/// Asserts that `yaml` yields exactly one error, at `line`, whose message is `message`.
void expectOnlyError(const std::string& yaml, int line, const std::string& message) {
  const std::vector<RuleError> errors = errorsOf(yaml);
  std::string all;
  for (const RuleError& error : errors) {
    all += error.toString() + "\n";
  }
  ASSERT_EQ(errors.size(), 1u) << all;
  EXPECT_EQ(errors[0].location.line, line) << errors[0].toString();
  EXPECT_EQ(errors[0].message, message);
}

/// A domain whose descriptor `plan` has one rate limit with `body` (indented 6 spaces); the
/// rate_limit mapping starts on line 5.
std::string withLimit(const std::string& body) {
  return "domain: d\n"
         "descriptors:\n"
         "  - key: plan\n"
         "    rate_limit:\n" +
         body;
}

const RateLimit& onlyLimit(const RuleSetPtr& rules) {
  return rules->findDomain("d")->descriptors.at(0).limits.at(0);
}

TEST(CalendarRulesTest, StaticZoneSetsTheLimitsCalendar) {
  const RuleSetPtr rules =
      loadOne(withLimit("      unit: month\n      requests_per_unit: 1000\n"
                        "      calendar:\n        time_zone: Europe/Paris\n"));
  ASSERT_TRUE(rules);
  const RateLimit& limit = onlyLimit(rules);
  EXPECT_EQ(limit.params.calendar.unit, CalendarUnit::kMonth);
  ASSERT_NE(limit.params.calendar.zone, nullptr);
  EXPECT_EQ(timeZoneName(*limit.params.calendar.zone), "Europe/Paris");
  EXPECT_TRUE(limit.calendar_zone_from.empty());
  // The nominal length stays the unit's (headers' window, /rules).
  EXPECT_EQ(limit.params.window_us, unitMicros(TimeUnit::kMonth));
}

TEST(CalendarRulesTest, WithoutCalendarUnitsKeepTheirEnvoyMeaning) {
  const RuleSetPtr rules = loadOne(withLimit("      unit: month\n      requests_per_unit: 1000\n"));
  ASSERT_TRUE(rules);
  EXPECT_FALSE(onlyLimit(rules).params.calendar.enabled());
  EXPECT_EQ(onlyLimit(rules).params.window_us, 30LL * 86'400 * kMicrosPerSecond);
}

TEST(CalendarRulesTest, ZoneFromTheRequestNeedsAKeyOnTheDescriptorsPath) {
  const RuleSetPtr rules = loadOne(
      "domain: d\n"
      "descriptors:\n"
      "  - key: customer\n"
      "    descriptors:\n"
      "      - key: tz\n"
      "        rate_limit:\n"
      "          unit: day\n"
      "          requests_per_unit: 5\n"
      "          calendar: {time_zone_from: tz, time_zone: UTC}\n");
  ASSERT_TRUE(rules);
  const RateLimit& limit = rules->findDomain("d")->descriptors[0].children[0].limits[0];
  EXPECT_EQ(limit.calendar_zone_from, "tz");
  ASSERT_NE(limit.calendar_zone_fallback, nullptr);
  EXPECT_EQ(timeZoneName(*limit.calendar_zone_fallback), "UTC");

  expectOnlyError(withLimit("      unit: day\n      requests_per_unit: 5\n"
                            "      calendar: {time_zone_from: tz}\n"),
                  5,
                  "'time_zone_from' 'tz' is not a key of this limit's descriptor (its keys: "
                  "plan): the zone's entry must be part of the counter's key");
  expectOnlyError(
      "domain: d\nrate_limit:\n  unit: day\n  requests_per_unit: 5\n"
      "  calendar: {time_zone_from: tz}\n",
      3,
      "'time_zone_from' 'tz': a domain-level rate limit has no descriptor to "
      "read a zone from (use 'time_zone')");
}

TEST(CalendarRulesTest, UnknownZoneIsALoadErrorWithItsPlaceAndAHint) {
  expectOnlyError(withLimit("      unit: day\n      requests_per_unit: 5\n"
                            "      calendar:\n        time_zone: Europe/Pariss\n"),
                  8,
                  "unknown time zone 'Europe/Pariss' (a name of the tz database, such as "
                  "'Europe/Paris' or 'UTC'; did you mean 'Europe/Paris'?)");
}

TEST(CalendarRulesTest, RefusesWhatACalendarCannotMean) {
  expectOnlyError(withLimit("      unit: hour\n      requests_per_unit: 5\n"
                            "      calendar: {time_zone: UTC}\n"),
                  7, "'calendar' needs a 'unit' of day, week, month or year, not 'hour'");
  expectOnlyError(withLimit("      unit: month\n      unit_multiplier: 3\n"
                            "      requests_per_unit: 5\n      calendar: {time_zone: UTC}\n"),
                  8,
                  "'calendar' windows are one calendar day, week, month or year: "
                  "'unit_multiplier' must be 1, not 3");
  expectOnlyError(withLimit("      unit: day\n      requests_per_unit: 5\n"
                            "      algorithm: token_bucket\n      calendar: {time_zone: UTC}\n"),
                  8,
                  "'calendar' does not apply to algorithm 'token_bucket' (only to fixed_window)");
  expectOnlyError(withLimit("      unit: day\n      requests_per_unit: 5\n"
                            "      calendar: {}\n"),
                  7,
                  "'calendar' needs 'time_zone' (a zone such as 'Europe/Paris') or "
                  "'time_zone_from' (a descriptor key)");
  const auto errors =
      errorsOf(withLimit("      unit: day\n      requests_per_unit: 5\n"
                         "      calendar: {time_zone: UTC, zone: UTC}\n"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message.rfind("unknown key 'zone' in 'calendar'", 0), 0u)
      << errors[0].message;
}

TEST(CalendarRulesTest, EventualConsistencyIsRefusedWithAReason) {
  expectOnlyError(withLimit("      unit: day\n      requests_per_unit: 5\n"
                            "      calendar: {time_zone: UTC}\n      consistency: eventual\n"),
                  8,
                  "'consistency: eventual' does not apply with 'calendar' (the sidecars' local "
                  "views count epoch-aligned windows; a calendar window is decided in the store)");
}

TEST(CalendarRulesTest, RulesJsonShowsTheCalendar) {
  const RuleSetPtr rules =
      loadOne(withLimit("      unit: week\n      requests_per_unit: 5\n"
                        "      calendar: {time_zone: Asia/Kolkata}\n"));
  ASSERT_TRUE(rules);
  const nlohmann::json json = nlohmann::json::parse(rulesToJson(*rules));
  const nlohmann::json& limit = json["domains"]["d"]["descriptors"][0]["rate_limits"][0];
  EXPECT_EQ(limit["calendar"]["unit"], "week");
  EXPECT_EQ(limit["calendar"]["time_zone"], "Asia/Kolkata");
}

}  // namespace
}  // namespace sluice
