#include <gtest/gtest.h>

#include "sluice/rules/rules.hpp"

namespace sluice {
namespace {

TEST(UnitTest, MicrosPerUnit) {
  EXPECT_EQ(unitMicros(TimeUnit::kSecond), 1'000'000);
  EXPECT_EQ(unitMicros(TimeUnit::kMinute), 60'000'000);
  EXPECT_EQ(unitMicros(TimeUnit::kHour), 3'600'000'000LL);
  EXPECT_EQ(unitMicros(TimeUnit::kDay), 86'400'000'000LL);
  EXPECT_EQ(unitMicros(TimeUnit::kWeek), 7 * 86'400'000'000LL);
  EXPECT_EQ(unitMicros(TimeUnit::kMonth), 30 * 86'400'000'000LL);
  EXPECT_EQ(unitMicros(TimeUnit::kYear), 365 * 86'400'000'000LL);
}

TEST(UnitTest, ParsesCaseInsensitivelyAndRoundTrips) {
  EXPECT_EQ(parseUnit("MINUTE"), TimeUnit::kMinute);
  EXPECT_EQ(parseUnit("Second"), TimeUnit::kSecond);
  EXPECT_EQ(parseUnit("minutes"), std::nullopt);
  EXPECT_EQ(parseUnit(""), std::nullopt);
  for (const TimeUnit unit : {TimeUnit::kSecond, TimeUnit::kMinute, TimeUnit::kHour, TimeUnit::kDay,
                              TimeUnit::kWeek, TimeUnit::kMonth, TimeUnit::kYear}) {
    EXPECT_EQ(parseUnit(unitName(unit)), unit);
  }
}

TEST(DurationTest, ParsesEveryUnit) {
  EXPECT_EQ(parseDuration("500us"), 500);
  EXPECT_EQ(parseDuration("250ms"), 250'000);
  EXPECT_EQ(parseDuration("2s"), 2'000'000);
  EXPECT_EQ(parseDuration("5m"), 300'000'000);
  EXPECT_EQ(parseDuration("1h"), 3'600'000'000LL);
  EXPECT_EQ(parseDuration("1d"), 86'400'000'000LL);
  EXPECT_EQ(parseDuration("0s"), 0);
}

TEST(DurationTest, RejectsMalformed) {
  for (const char* text :
       {"", "5", "ms", "-1s", "1.5s", "2 s", "2sec", "1h30m", "99999999999999999d"}) {
    EXPECT_EQ(parseDuration(text), std::nullopt) << text;
  }
}

TEST(EscapeKeyPartTest, KeepsSafeBytesAndEscapesTheRest) {
  EXPECT_EQ(escapeKeyPart("abc-XYZ_0.9"), "abc-XYZ_0.9");
  EXPECT_EQ(escapeKeyPart("a:b"), "a%3Ab");
  EXPECT_EQ(escapeKeyPart("{x}"), "%7Bx%7D");
  EXPECT_EQ(escapeKeyPart("a=b;c~d%"), "a%3Db%3Bc%7Ed%25");
  EXPECT_EQ(escapeKeyPart(std::string("\0\xff", 2)), "%00%FF");
  EXPECT_EQ(escapeKeyPart(""), "");
}

TEST(RuleErrorTest, FormatsFileLineColumn) {
  EXPECT_EQ((RuleError{{"a.yaml", 3, 7}, "bad"}).toString(), "a.yaml:3:7: bad");
  EXPECT_EQ((RuleError{{"missing", 0, 0}, "gone"}).toString(), "missing: gone");
}

}  // namespace
}  // namespace sluice
