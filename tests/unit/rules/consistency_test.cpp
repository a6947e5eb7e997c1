#include "sluice/rules/consistency.hpp"

#include <gtest/gtest.h>

#include <string>

#include "sluice/rules/rules.hpp"
#include "support/rules_loading.hpp"

namespace sluice {
namespace {

using test::errorsOf;
using test::loadOne;

std::string rule(const std::string& algorithm, const std::string& consistency) {
  return "domain: d\n"
         "descriptors:\n"
         "  - key: k\n"
         "    rate_limit:\n"
         "      unit: second\n"
         "      requests_per_unit: 10\n"
         "      algorithm: " +
         algorithm + "\n      consistency: " + consistency + "\n";
}

TEST(ConsistencyTest, StrictIsTheDefault) {
  const RuleSetPtr rules = loadOne(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
      "      requests_per_unit: 10\n");
  ASSERT_TRUE(rules);
  EXPECT_EQ(rules->findDomain("d")->descriptors[0].limits[0].params.consistency,
            Consistency::kStrict);
}

TEST(ConsistencyTest, EventualIsAcceptedForMergeableAlgorithms) {
  for (const char* algorithm : {"fixed_window", "sliding_window_counter", "token_bucket"}) {
    const RuleSetPtr rules = loadOne(rule(algorithm, "eventual"));
    ASSERT_TRUE(rules) << algorithm;
    EXPECT_EQ(rules->findDomain("d")->descriptors[0].limits[0].params.consistency,
              Consistency::kEventual);
  }
}

TEST(ConsistencyTest, EventualIsAcceptedForSketch) {
  const RuleSetPtr rules =
      loadOne(rule("sketch", "eventual") + "      sketch: {width: 1024, depth: 3}\n");
  ASSERT_TRUE(rules);
  EXPECT_EQ(rules->findDomain("d")->descriptors[0].limits[0].params.consistency,
            Consistency::kEventual);
}

TEST(ConsistencyTest, EventualWithAnotherAlgorithmIsRefusedWithItsLocation) {
  for (const char* algorithm : {"sliding_window_log", "leaky_bucket"}) {
    const auto errors = errorsOf(rule(algorithm, "eventual"));
    ASSERT_EQ(errors.size(), 1u) << algorithm;
    EXPECT_EQ(errors[0].location.line, 8);
    EXPECT_EQ(errors[0].location.column, 20);
    EXPECT_NE(errors[0].message.find("does not apply to algorithm '" + std::string(algorithm)),
              std::string::npos)
        << errors[0].toString();
  }
}

TEST(ConsistencyTest, AnUnknownValueIsRefused) {
  const auto errors = errorsOf(rule("fixed_window", "sometimes"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].toString(),
            "test.yaml:8:20: unknown consistency 'sometimes' (expected strict or eventual)");
}

TEST(ConsistencyTest, EventualWithWarmupIsRefused) {
  const auto errors = errorsOf(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
      "      requests_per_unit: 10\n      algorithm: token_bucket\n      warmup: 5s\n"
      "      consistency: eventual\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].message.find("warmup"), std::string::npos);
}

}  // namespace
}  // namespace sluice
