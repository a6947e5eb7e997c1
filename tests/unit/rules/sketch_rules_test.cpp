#include <gtest/gtest.h>

#include <string>

#include "sluice/limiter/sketch.hpp"
#include "sluice/rules/rules.hpp"
#include "support/rules_loading.hpp"

namespace sluice {
namespace {

using test::errorsOf;
using test::loadOne;

/// A domain whose one descriptor's rate_limit body is `body` (the mapping starts on line 6).
std::string withLimit(const std::string& body) {
  return "domain: d\n"
         "descriptors:\n"
         "  - key: remote_address\n"
         "    rate_limit:\n"
         "      algorithm: sketch\n" +
         body;
}

const RateLimit& onlyLimit(const RuleSetPtr& rules) {
  return rules->findDomain("d")->descriptors.at(0).limits.at(0);
}

std::string onlyError(const std::string& yaml) {
  const auto errors = errorsOf(yaml);
  std::string all;
  for (const auto& e : errors) {
    all += e.toString() + "\n";
  }
  EXPECT_EQ(errors.size(), 1U) << all;
  return errors.empty() ? "" : errors[0].toString();
}

TEST(SketchRulesTest, ExpectedRequestsSizesTheWidth) {
  const auto rules = loadOne(withLimit(
      "      unit: minute\n      requests_per_unit: 100\n      sketch: {expected_requests: "
      "1000000}\n"));
  ASSERT_TRUE(rules);
  const LimitParams& p = onlyLimit(rules).params;
  EXPECT_EQ(p.algorithm, Algorithm::kSketch);
  EXPECT_EQ(p.sketch.depth, 4U);
  EXPECT_EQ(p.sketch.counter_bits, 8U);
  EXPECT_EQ(p.sketch.width, sketchWidthFor(1'000'000, 100));
  EXPECT_EQ(p.sketch.width, 200'000U);  // load 1e6 / (w x 100) = 0.05
  EXPECT_EQ(p.sketch.bloom_bits, 0U);
  ASSERT_TRUE(p.sketch.identity);
  EXPECT_EQ(p.sketch.identity->domain, "d");
}

TEST(SketchRulesTest, WidthAndDepthAreTakenAsGiven) {
  const auto rules = loadOne(withLimit(
      "      unit: second\n      requests_per_unit: 1000\n      sketch: {width: 4096, depth: 3}\n"
      "      count_rejected: true\n"));
  ASSERT_TRUE(rules);
  const LimitParams& p = onlyLimit(rules).params;
  EXPECT_EQ(p.sketch.width, 4096U);
  EXPECT_EQ(p.sketch.depth, 3U);
  EXPECT_EQ(p.sketch.counter_bits, 16U);
  EXPECT_TRUE(p.count_rejected);
}

TEST(SketchRulesTest, BloomIsSizedFromExpectedClients) {
  const auto rules = loadOne(
      withLimit("      unit: second\n      requests_per_unit: 10\n      sketch: {width: 1024}\n"
                "      bloom: true\n      expected_clients: 100000\n"));
  ASSERT_TRUE(rules);
  const LimitParams& p = onlyLimit(rules).params;
  EXPECT_EQ(p.sketch.bloom_bits, sketchBloomBits(100'000));
  EXPECT_EQ(p.sketch.bloom_hashes, kSketchBloomHashes);
  EXPECT_NEAR(static_cast<double>(p.sketch.bloom_bits), 958'506.0, 1.0);  // 9.585 bits/client
}

TEST(SketchRulesTest, AGeometryChangeNamesAnotherSketch) {
  const auto a = loadOne(
      withLimit("      unit: second\n      requests_per_unit: 10\n      sketch: {width: 1024}\n"));
  const auto b = loadOne(
      withLimit("      unit: second\n      requests_per_unit: 10\n      sketch: {width: 2048}\n"));
  const auto c = loadOne(
      withLimit("      unit: second\n      requests_per_unit: 20\n      sketch: {width: 1024}\n"));
  EXPECT_NE(onlyLimit(a).params.sketch.identity->key, onlyLimit(b).params.sketch.identity->key);
  // Same geometry and counter width: the counts survive a change of the limit.
  EXPECT_EQ(onlyLimit(a).params.sketch.identity->key, onlyLimit(c).params.sketch.identity->key);
}

TEST(SketchRulesTest, ErrorsCarryTheirPosition) {
  EXPECT_EQ(onlyError(withLimit("      unit: second\n      requests_per_unit: 10\n")),
            "test.yaml:5:7: algorithm 'sketch' needs 'sketch: {expected_requests: N}' "
            "(admitted requests per window across all clients) or 'sketch: {width: W, depth: "
            "D}'");
  EXPECT_EQ(onlyError(withLimit(
                "      unit: second\n      requests_per_unit: 10\n      sketch: {widht: 5}\n")),
            "test.yaml:8:16: unknown key 'widht' in 'sketch' (expected expected_requests, "
            "width, depth); did you mean 'width'?");
  EXPECT_EQ(onlyError(withLimit("      unit: second\n      requests_per_unit: 10\n"
                                "      sketch: {width: 5, depth: 17}\n")),
            "test.yaml:8:33: 'depth' must be between 1 and 16, got 17");
  EXPECT_EQ(onlyError(withLimit("      unit: second\n      requests_per_unit: 10\n"
                                "      sketch: {width: 5, expected_requests: 9}\n")),
            "test.yaml:8:16: give either 'expected_requests' or 'width' in 'sketch', not both");
  EXPECT_EQ(onlyError(withLimit("      unit: second\n      requests_per_unit: 10\n"
                                "      sketch: {width: 5}\n      bloom: true\n")),
            "test.yaml:9:7: 'bloom: true' needs 'expected_clients' (distinct clients per "
            "window; sizes the filter)");
  EXPECT_EQ(onlyError(withLimit("      unit: second\n      requests_per_unit: 10\n"
                                "      sketch: {width: 5}\n      expected_clients: 5\n")),
            "test.yaml:9:7: 'expected_clients' applies only with 'bloom: true'");
  EXPECT_EQ(onlyError(withLimit("      unit: second\n      requests_per_unit: 4294967295\n"
                                "      sketch: {width: 5}\n")),
            "test.yaml:5:7: 'requests_per_unit' 4294967295 is too large for algorithm 'sketch' "
            "(its counters hold at most 4294967294)");
  EXPECT_EQ(onlyError(withLimit("      unit: second\n      requests_per_unit: 10\n"
                                "      sketch: [1]\n")),
            "test.yaml:8:15: 'sketch' must be a mapping with 'expected_requests' or 'width' (and "
            "optional 'depth'), not a list");
}

TEST(SketchRulesTest, SketchOptionsBelongToTheSketchAlgorithm) {
  const auto errors = errorsOf(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
      "      requests_per_unit: 1\n      sketch: {width: 5}\n");
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].toString(),
            "test.yaml:7:7: 'sketch' does not apply to algorithm 'fixed_window' (only to sketch)");
}

TEST(SketchRulesTest, RulesJsonShowsTheGeometry) {
  const auto rules = loadOne(withLimit(
      "      unit: second\n      requests_per_unit: 10\n      sketch: {width: 1024, depth: 2}\n"));
  const std::string json = rulesToJson(*rules);
  EXPECT_NE(json.find("\"width\":1024"), std::string::npos) << json;
  EXPECT_NE(json.find("\"memory_bytes\":4144"), std::string::npos) << json;
}

}  // namespace
}  // namespace sluice
