#include <gtest/gtest.h>

#include <chrono>
#include <optional>

#include "sluice/common/clock.hpp"
#include "sluice/decision/decision_service.hpp"
#include "sluice/store/memory_store.hpp"

namespace sluice {
namespace {

constexpr Micros kHour = 3'600 * kMicrosPerSecond;

/// A daily quota per customer in the zone its request names (UTC when the name is not a
/// zone), and a monthly one in Paris.
constexpr const char* kRules = R"(domain: api
descriptors:
  - key: customer
    descriptors:
      - key: tz
        rate_limit:
          unit: day
          requests_per_unit: 2
          calendar: {time_zone_from: tz, time_zone: UTC}
  - key: plan
    rate_limit:
      unit: month
      requests_per_unit: 3
      calendar: {time_zone: Europe/Paris}
  - key: strict
    descriptors:
      - key: tz
        rate_limit:
          unit: day
          requests_per_unit: 2
          calendar: {time_zone_from: tz}
)";

Micros utc(int y, unsigned m, unsigned d, int h = 0) {
  const std::chrono::sys_days day{std::chrono::year{y} / std::chrono::month{m} /
                                  std::chrono::day{d}};
  return std::chrono::duration_cast<std::chrono::microseconds>(day.time_since_epoch()).count() +
         h * kHour;
}

class CalendarDecisionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadResult loaded = loadRulesFromStrings({{"api.yaml", kRules}});
    ASSERT_TRUE(loaded.errors.empty()) << loaded.errors.front().toString();
    rules_ = loaded.rules;
    DecisionServiceParts parts;
    parts.rules = [this] { return rules_; };
    parts.store = makeMemoryStore(MemoryStoreOptions{}, clock_, metrics_);
    parts.clock = &clock_;
    service_ = makeDecisionService(std::move(parts));
  }

  Result<Decision> decide(Descriptor descriptor) {
    DecisionRequest r;
    r.domain = "api";
    r.descriptors = {std::move(descriptor)};
    std::optional<Result<Decision>> out;
    service_->decide(std::move(r), [&](Result<Decision> d) { out.emplace(std::move(d)); });
    EXPECT_TRUE(out.has_value());
    return std::move(*out);
  }

  static const Outcome& outcomeOf(const Result<Decision>& d) {
    return d->descriptors.at(0).limits.at(0).outcome;
  }

  ManualClock clock_;
  Metrics metrics_;
  RuleSetPtr rules_;
  std::unique_ptr<DecisionService> service_;
};

TEST_F(CalendarDecisionTest, EachCustomersDayEndsAtItsOwnMidnight) {
  clock_.set(utc(2026, 3, 8, 20));  // 21:00 in Paris, 15:00 in New York (EDT since 07:00Z)
  const Descriptor paris{{"customer", "a"}, {"tz", "Europe/Paris"}};
  const Descriptor new_york{{"customer", "b"}, {"tz", "America/New_York"}};
  Result<Decision> first = decide(paris);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(outcomeOf(first).reset_after_us, 3 * kHour);  // midnight CET is 23:00Z
  Result<Decision> other = decide(new_york);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(outcomeOf(other).reset_after_us, 8 * kHour);  // midnight EDT is 04:00Z
  EXPECT_TRUE(decide(paris)->allowed);
  EXPECT_FALSE(decide(paris)->allowed);
  clock_.set(utc(2026, 3, 8, 23));  // a new day in Paris only
  EXPECT_TRUE(decide(paris)->allowed);
  EXPECT_TRUE(decide(new_york)->allowed);
  EXPECT_FALSE(decide(new_york)->allowed);
}

TEST_F(CalendarDecisionTest, AZoneTheDatabaseLacksFallsBackToTheRulesZone) {
  clock_.set(utc(2026, 3, 8, 20));
  Result<Decision> d = decide({{"customer", "c"}, {"tz", "Mars/Olympus_Mons"}});
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(outcomeOf(d).reset_after_us, 4 * kHour);  // UTC midnight
}

TEST_F(CalendarDecisionTest, AZoneTheDatabaseLacksWithoutFallbackIsABadRequest) {
  clock_.set(utc(2026, 3, 8, 20));
  Result<Decision> d = decide({{"strict", "x"}, {"tz", "Mars/Olympus_Mons"}});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(d.error().message,
            "descriptors[0]: limit \"api.strict.tz\": entry \"tz\" names no time zone of the tz "
            "database (such as \"Europe/Paris\")");
  Result<Decision> good = decide({{"strict", "x"}, {"tz", "Asia/Kolkata"}});
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(outcomeOf(good).remaining, 1);  // the refused request charged nothing
}

TEST_F(CalendarDecisionTest, MonthlyQuotaResetsOnTheFirstInParis) {
  clock_.set(utc(2026, 2, 28, 22));  // 23:00 on 28 February in Paris
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(decide({{"plan", "free"}})->allowed);
  }
  Result<Decision> denied = decide({{"plan", "free"}});
  EXPECT_FALSE(denied->allowed);
  EXPECT_EQ(outcomeOf(denied).retry_after_us, kHour);
  clock_.advance(std::chrono::hours(1));  // 1 March, 00:00 CET
  EXPECT_TRUE(decide({{"plan", "free"}})->allowed);
}

}  // namespace
}  // namespace sluice
