#include <gtest/gtest.h>

#include <string>

#include "sluice/rules/rules.hpp"
#include "support/rules_loading.hpp"

namespace sluice {
namespace {

using test::errorsOf;
using test::loadOne;

std::string rule(const std::string& body) {
  return "domain: d\n"
         "descriptors:\n"
         "  - key: k\n"
         "    rate_limit:\n" +
         body;
}

const std::string kValid =
    "      algorithm: concurrency\n"
    "      max_in_flight: 20\n"
    "      lease: 30s\n";

std::string onlyError(const std::string& yaml) {
  const auto errors = errorsOf(yaml);
  EXPECT_EQ(errors.size(), 1U);
  return errors.empty() ? std::string() : errors.front().toString();
}

TEST(ConcurrencyRulesTest, MaxInFlightAndLeaseMakeTheLimit) {
  const RuleSetPtr rules = loadOne(rule(kValid));
  ASSERT_TRUE(rules);
  const RateLimit& limit = rules->findDomain("d")->descriptors[0].limits[0];
  EXPECT_EQ(limit.params.algorithm, Algorithm::kConcurrency);
  EXPECT_EQ(limit.params.limit, 20);
  EXPECT_EQ(limit.requests_per_unit, 20);
  EXPECT_EQ(limit.params.window_us, 30 * kMicrosPerSecond);
}

TEST(ConcurrencyRulesTest, MaxInFlightIsRequired) {
  EXPECT_NE(onlyError(rule("      algorithm: concurrency\n      lease: 30s\n"))
                .find("a concurrency limit is missing 'max_in_flight'"),
            std::string::npos);
}

TEST(ConcurrencyRulesTest, LeaseIsRequired) {
  const std::string error =
      onlyError(rule("      algorithm: concurrency\n      max_in_flight: 2\n"));
  EXPECT_NE(error.find("a concurrency limit is missing 'lease'"), std::string::npos) << error;
  EXPECT_NE(error.find("test.yaml:5:7:"), std::string::npos) << error;
}

TEST(ConcurrencyRulesTest, AWindowDoesNotApply) {
  const std::string error = onlyError(rule(kValid + "      unit: second\n"));
  EXPECT_NE(error.find("'unit' does not apply to algorithm 'concurrency'"), std::string::npos)
      << error;
  EXPECT_NE(error.find(":8:7:"), std::string::npos) << error;
}

TEST(ConcurrencyRulesTest, LeaseKeysDoNotApplyToOtherAlgorithms) {
  const std::string error =
      onlyError(rule("      unit: second\n      requests_per_unit: 5\n      max_in_flight: 3\n"));
  EXPECT_NE(error.find("'max_in_flight' does not apply to algorithm 'fixed_window'"),
            std::string::npos)
      << error;
}

TEST(ConcurrencyRulesTest, BoundsAreChecked) {
  EXPECT_NE(onlyError(rule("      algorithm: concurrency\n      max_in_flight: 10001\n"
                           "      lease: 1s\n"))
                .find("max_in_flight"),
            std::string::npos);
  EXPECT_NE(onlyError(rule("      algorithm: concurrency\n      max_in_flight: 1\n"
                           "      lease: 500us\n"))
                .find("'lease' must be at least 1ms"),
            std::string::npos);
  EXPECT_NE(onlyError(rule("      algorithm: concurrency\n      max_in_flight: 1\n"
                           "      lease: soon\n"))
                .find("lease"),
            std::string::npos);
}

TEST(ConcurrencyRulesTest, EventualConsistencyIsRefusedWithTheReason) {
  const std::string error = onlyError(rule(kValid + "      consistency: eventual\n"));
  EXPECT_NE(error.find("'consistency: eventual' does not apply to algorithm 'concurrency'"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("each sidecar admit on its own view"), std::string::npos) << error;
  EXPECT_NE(error.find(":8:20:"), std::string::npos) << error;
}

}  // namespace
}  // namespace sluice
