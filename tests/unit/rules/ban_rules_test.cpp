#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "sluice/rules/rules.hpp"
#include "support/rules_loading.hpp"

namespace sluice {
namespace {

using test::errorsOf;
using test::loadOne;

constexpr Micros kMinute = 60 * kMicrosPerSecond;
constexpr Micros kHour = 60 * kMinute;

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

/// A domain whose descriptor `user` has one limit of 5 per minute and `ban` (line 7).
std::string withBan(const std::string& ban, const std::string& more = "") {
  return "domain: d\n"
         "descriptors:\n"
         "  - key: user\n"
         "    rate_limit:\n"
         "      unit: minute\n"
         "      requests_per_unit: 5\n"
         "      ban: " +
         ban + "\n" + more;
}

const RateLimit& onlyLimit(const RuleSetPtr& rules) {
  return rules->findDomain("d")->descriptors.at(0).limits.at(0);
}

TEST(BanRulesTest, ReadsTheLadder) {
  const RuleSetPtr rules =
      loadOne(withBan("{after: 3, duration: 10m, backoff: 2.5, max: 24h, forgive_after: 2h}"));
  ASSERT_TRUE(rules);
  const BanParams& ban = onlyLimit(rules).params.ban;
  EXPECT_EQ(ban.after, 3);
  EXPECT_EQ(ban.duration_us, 10 * kMinute);
  EXPECT_EQ(ban.backoff_milli, 2500);
  EXPECT_EQ(ban.max_us, 24 * kHour);
  EXPECT_EQ(ban.forgive_us, 2 * kHour);
  EXPECT_EQ(ban.within_us, kMinute);  // the rule's window
}

TEST(BanRulesTest, DefaultsKeepEveryBanAsLongAsDurationAndForgiveAfterTheMax) {
  RuleSetPtr rules = loadOne(withBan("{after: 3, duration: 10m}"));
  ASSERT_TRUE(rules);
  BanParams ban = onlyLimit(rules).params.ban;
  EXPECT_EQ(ban.backoff_milli, 1000);
  EXPECT_EQ(ban.max_us, 10 * kMinute);
  EXPECT_EQ(ban.forgive_us, 10 * kMinute);
  rules = loadOne(withBan("{after: 3, duration: 10m, backoff: 2}"));
  ASSERT_TRUE(rules);
  ban = onlyLimit(rules).params.ban;
  EXPECT_EQ(ban.max_us, 24 * kHour);
  EXPECT_EQ(ban.forgive_us, 24 * kHour);
  rules = loadOne(
      "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, "
      "requests_per_unit: 1}\n");
  ASSERT_TRUE(rules);
  EXPECT_FALSE(onlyLimit(rules).params.ban.enabled());
}

TEST(BanRulesTest, RefusesABadLadderWithItsPlace) {
  expectOnlyError(withBan("{after: 0, duration: 10m}"), 7,
                  "'after' must be an integer >= 1, got '0'");
  const auto negative = errorsOf(withBan("{after: 3, duration: -5m}"));
  ASSERT_EQ(negative.size(), 1u);
  EXPECT_EQ(negative[0].location.line, 7);
  EXPECT_NE(negative[0].message.find("'duration'"), std::string::npos) << negative[0].message;
  expectOnlyError(withBan("{after: 3, duration: 0s}"), 7, "'duration' must be longer than 0");
  expectOnlyError(withBan("{after: 3, duration: 10m, max: 5m}"), 7,
                  "'max' must be at least 'duration' (the first ban)");
  expectOnlyError(withBan("{after: 3, duration: 10m, backoff: 0.5}"), 7,
                  "'backoff' must be a number from 1 to 10 (at most three decimals; 1 keeps "
                  "every ban as long as 'duration'), not '0.5'");
  expectOnlyError(withBan("{after: 3}"), 7,
                  "'ban' needs 'after' (denials within the limit's window, at least 1) and "
                  "'duration' (how long the first ban lasts, e.g. 10m)");
  expectOnlyError(withBan("yes"), 7,
                  "'ban' must be a mapping with 'after' and 'duration' (e.g. {after: 5, "
                  "duration: 10m, backoff: 2, max: 24h}), not a string");
  const auto errors = errorsOf(withBan("{after: 3, duration: 10m, forgive: 1h}"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message.rfind("unknown key 'forgive' in 'ban'", 0), 0u) << errors[0].message;
}

TEST(BanRulesTest, RefusesLimitsThatCannotKeepAnExactBan) {
  expectOnlyError(withBan("{after: 3, duration: 10m}", "      consistency: eventual\n"), 7,
                  "'ban' needs 'consistency: strict': an eventual limit is decided from each "
                  "sidecar's own view, which cannot keep one exact ban for every sidecar");
  expectOnlyError(withBan("{after: 3, duration: 10m}",
                          "      algorithm: sketch\n      sketch: {width: 64, depth: 2}\n"),
                  7,
                  "'ban' does not apply to algorithm 'sketch' (its counters are shared between "
                  "clients; use an exact algorithm for a penalty box)");
}

TEST(BanRulesTest, RefusesAConcurrencyLimit) {
  expectOnlyError(
      "domain: d\n"
      "descriptors:\n"
      "  - key: user\n"
      "    rate_limit:\n"
      "      algorithm: concurrency\n"
      "      max_in_flight: 8\n"
      "      lease: 30s\n"
      "      ban: {after: 3, duration: 10m}\n",
      8,
      "'ban' does not apply to algorithm 'concurrency' (its denial means too many requests in "
      "flight, not abuse: a ban would lock out a client whose own requests are merely slow)");
}

TEST(BanRulesTest, RulesJsonShowsTheBan) {
  const RuleSetPtr rules = loadOne(withBan("{after: 3, duration: 10m, backoff: 1.5, max: 1h}"));
  ASSERT_TRUE(rules);
  const auto json = nlohmann::json::parse(rulesToJson(*rules));
  const auto& ban = json["domains"]["d"]["descriptors"][0]["rate_limits"][0]["ban"];
  EXPECT_EQ(ban["after"], 3);
  EXPECT_EQ(ban["duration_ms"], 600000);
  EXPECT_EQ(ban["backoff"], 1.5);
  EXPECT_EQ(ban["max_ms"], 3600000);
  EXPECT_EQ(ban["forgive_after_ms"], 3600000);
}

}  // namespace
}  // namespace sluice
