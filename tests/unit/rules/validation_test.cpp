#include <gtest/gtest.h>

#include "sluice/rules/rules.hpp"
#include "support/rules_loading.hpp"

namespace sluice {
namespace {

using test::errorsOf;

/// Asserts that `yaml` yields exactly one error, at `line`, with `message`.
void expectOnlyError(const std::string& yaml, int line, const std::string& message) {
  const std::vector<RuleError> errors = errorsOf(yaml);
  std::string all;
  for (const RuleError& error : errors) {
    all += error.toString() + "\n";
  }
  ASSERT_EQ(errors.size(), 1u) << all;
  EXPECT_EQ(errors[0].location.file, "test.yaml");
  EXPECT_EQ(errors[0].location.line, line) << errors[0].toString();
  EXPECT_EQ(errors[0].message, message);
}

/// A domain with one descriptor whose rate_limit body is `body` (indented 6 spaces); the
/// rate_limit mapping starts on line 6.
std::string withLimit(const std::string& body) {
  return "domain: d\n"
         "descriptors:\n"
         "  - key: k\n"
         "    value: v\n"
         "    rate_limit:\n" +
         body;
}

TEST(ValidationTest, YamlSyntaxError) {
  const auto errors = errorsOf("domain: d\ndescriptors: [\n  - key: x\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].location.line, 3);
  EXPECT_EQ(errors[0].message.rfind("YAML syntax error: ", 0), 0u) << errors[0].message;
}

TEST(ValidationTest, StrayCommaIsASyntaxErrorNotAHang) {
  // yaml-cpp 0.7's LoadAll loops forever on this (jbeder/yaml-cpp#1040).
  expectOnlyError("# comment\n    , y\n", 2, "YAML syntax error: unexpected ','");
  expectOnlyError(",", 1, "YAML syntax error: unexpected ','");
}

TEST(ValidationTest, UnknownKeySuggestsRateLimit) {
  expectOnlyError("domain: d\ndescriptors:\n  - key: k\n    ratelimit:\n      unit: second\n", 4,
                  "unknown key 'ratelimit' in a descriptor (did you mean 'rate_limit'?)");
}

TEST(ValidationTest, UnknownKeySuggestsRequestsPerUnit) {
  const auto errors = errorsOf(withLimit("      unit: second\n      requestsperunit: 5\n"));
  ASSERT_EQ(errors.size(), 2u);
  // The mapping that lacks requests_per_unit starts on line 6, the misspelt key is on line 7.
  EXPECT_EQ(errors[0].location.line, 6);
  EXPECT_EQ(errors[0].message.rfind("rate limit is missing 'requests_per_unit'", 0), 0u);
  EXPECT_EQ(errors[1].location.line, 7);
  EXPECT_EQ(errors[1].location.column, 7);
  EXPECT_EQ(errors[1].message,
            "unknown key 'requestsperunit' in a rate limit (did you mean 'requests_per_unit'?)");
}

TEST(ValidationTest, UnknownKeyWithoutNearMissListsTheExpectedKeys) {
  expectOnlyError("domain: d\ncolour: blue\n", 2,
                  "unknown key 'colour' at the top level (expected one of: domain, descriptors, "
                  "rate_limit, rate_limits, name, candidate)");
}

TEST(ValidationTest, LimitKeyOnTheDescriptorSaysWhereItBelongs) {
  expectOnlyError("domain: d\ndescriptors:\n  - key: k\n    unit: second\n", 4,
                  "unknown key 'unit' in a descriptor ('unit' belongs inside 'rate_limit')");
}

TEST(ValidationTest, DescriptorKeyInsideARateLimitSaysWhereItBelongs) {
  expectOnlyError(
      withLimit("      unit: second\n      requests_per_unit: 5\n      shadow_mode: true\n"), 8,
      "unknown key 'shadow_mode' in a rate limit ('shadow_mode' belongs to the "
      "descriptor, not inside a rate limit)");
}

TEST(ValidationTest, DuplicateYamlKey) {
  expectOnlyError("domain: d\ndomain: e\n", 2, "duplicate key 'domain' (first given at line 1)");
}

TEST(ValidationTest, DescriptorsMustBeAList) {
  expectOnlyError("domain: d\ndescriptors:\n  key: k\n", 3,
                  "'descriptors' must be a list of mappings with 'key', not a mapping");
}

TEST(ValidationTest, DescriptorItemMustBeAMapping) {
  expectOnlyError("domain: d\ndescriptors:\n  - k\n", 3,
                  "each item of 'descriptors' must be a mapping with 'key', not a string");
}

TEST(ValidationTest, RateLimitMustBeAMapping) {
  expectOnlyError("domain: d\ndescriptors:\n  - key: k\n    rate_limit: 5\n", 4,
                  "'rate_limit' must be a mapping with 'unit' and 'requests_per_unit', not a "
                  "string");
}

TEST(ValidationTest, BooleanMustBeTrueOrFalse) {
  expectOnlyError("domain: d\ndescriptors:\n  - key: k\n    shadow_mode: maybe\n", 4,
                  "'shadow_mode' must be true or false, got 'maybe'");
}

TEST(ValidationTest, StringMustNotBeAList) {
  expectOnlyError("domain: [a, b]\n", 1, "'domain' must be a string, not a list");
}

TEST(ValidationTest, MissingDomain) { expectOnlyError("descriptors: []\n", 1, "missing 'domain'"); }

TEST(ValidationTest, EmptyDomain) {
  expectOnlyError("domain: \"\"\n", 1, "'domain' must not be empty");
}

TEST(ValidationTest, EmptyFile) {
  expectOnlyError("# nothing here\n", 1,
                  "the file is empty: expected a mapping with 'domain' and 'descriptors'");
}

TEST(ValidationTest, FileMustBeAMapping) {
  expectOnlyError("- domain: d\n", 1, "the file must be a mapping with 'domain' and 'descriptors'");
}

TEST(ValidationTest, OneDocumentPerFile) {
  expectOnlyError("domain: a\n---\ndomain: b\n", 2, "only one YAML document (one domain) per file");
}

TEST(ValidationTest, DuplicateDomainAcrossFiles) {
  const auto errors =
      loadRulesFromStrings({{"a.yaml", "domain: auth\n"}, {"b.yaml", "# b\ndomain: auth\n"}})
          .errors;
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].toString(),
            "b.yaml:2:9: duplicate domain 'auth' (already defined at a.yaml:1:9)");
}

TEST(ValidationTest, MissingKey) {
  expectOnlyError("domain: d\ndescriptors:\n  - value: v\n", 3, "descriptor is missing 'key'");
}

TEST(ValidationTest, EmptyKey) {
  expectOnlyError("domain: d\ndescriptors:\n  - key: \"\"\n", 3, "descriptor has an empty 'key'");
}

TEST(ValidationTest, DuplicateCompositeKeyAtOneLevel) {
  expectOnlyError(
      "domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: j\n  - key: k\n    value: v\n",
      6, "duplicate descriptor composite key 'd.k_v' (first defined at line 3)");
}

TEST(ValidationTest, DuplicateKeyOnlyNodeNested) {
  expectOnlyError(
      "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n      - key: b\n", 6,
      "duplicate descriptor composite key 'd.a.b' (first defined at line 5)");
}

TEST(ValidationTest, SameKeyDifferentValuesIsNotADuplicate) {
  EXPECT_TRUE(
      errorsOf("domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: w\n"
               "  - key: k\n")
          .empty());
}

TEST(ValidationTest, BadUnit) {
  expectOnlyError(withLimit("      unit: minutes\n      requests_per_unit: 5\n"), 6,
                  "invalid unit 'minutes' (expected second, minute, hour, day, week, month or "
                  "year); did you mean 'minute'?");
}

TEST(ValidationTest, MissingUnit) {
  expectOnlyError(withLimit("      requests_per_unit: 5\n"), 6, "rate limit is missing 'unit'");
}

TEST(ValidationTest, MissingRequestsPerUnit) {
  expectOnlyError(withLimit("      unit: second\n"), 6,
                  "rate limit is missing 'requests_per_unit' (envoyproxy/ratelimit would read it "
                  "as 0 and block all traffic; write 'requests_per_unit: 0' if that is intended)");
}

TEST(ValidationTest, UnlimitedNeedsNoRequestsPerUnit) {
  EXPECT_TRUE(errorsOf(withLimit("      unlimited: true\n")).empty());
}

TEST(ValidationTest, NegativeNumber) {
  expectOnlyError(withLimit("      unit: second\n      requests_per_unit: -5\n"), 7,
                  "'requests_per_unit' must be a non-negative integer, got '-5'");
}

TEST(ValidationTest, NonIntegerNumber) {
  expectOnlyError(withLimit("      unit: second\n      requests_per_unit: 2.5\n"), 7,
                  "'requests_per_unit' must be a non-negative integer, got '2.5'");
}

TEST(ValidationTest, QuotedNumberIsAString) {
  expectOnlyError(withLimit("      unit: second\n      requests_per_unit: \"5\"\n"), 7,
                  "'requests_per_unit' must be a non-negative integer, got the string \"5\"");
}

TEST(ValidationTest, TooLargeNumber) {
  expectOnlyError(withLimit("      unit: second\n      requests_per_unit: 99999999999\n"), 7,
                  "'requests_per_unit' is too large: 99999999999 (at most 4294967295)");
}

TEST(ValidationTest, ZeroUnitMultiplier) {
  expectOnlyError(
      withLimit("      unit: second\n      requests_per_unit: 5\n      unit_multiplier: 0\n"), 8,
      "'unit_multiplier' must be an integer >= 1, got '0'");
}

// Spans beyond 10 years overflowed the algorithms' int64 arithmetic (tests/fuzz/fuzz_limiter).
TEST(ValidationTest, WindowLongerThanTenYears) {
  expectOnlyError(
      withLimit("      unit: year\n      requests_per_unit: 5\n      unit_multiplier: 11\n"), 8,
      "'unit_multiplier' 11 makes the window too long (at most 10 years)");
  EXPECT_TRUE(errorsOf(withLimit("      unit: year\n      requests_per_unit: 5\n"
                                 "      unit_multiplier: 10\n"))
                  .empty());
}

TEST(ValidationTest, DurationLongerThanTenYears) {
  expectOnlyError(withLimit("      unit: second\n      requests_per_unit: 5\n"
                            "      algorithm: sliding_window_log\n      min_interval: 3651d\n"),
                  9, "'min_interval' is too long: '3651d' (at most 10 years)");
}

TEST(ValidationTest, BucketThatTakesLongerThanTenYearsToFill) {
  // One token a day and a burst of 4000: a full bucket is almost 11 years of tokens.
  expectOnlyError(withLimit("      unit: day\n      requests_per_unit: 1\n"
                            "      algorithm: token_bucket\n      burst: 4000\n"),
                  9,
                  "'burst' 4000 makes a full bucket last too long (burst x window / "
                  "requests_per_unit must be at most 10 years)");
}

TEST(ValidationTest, BucketTooLargeForExactArithmetic) {
  // 100M per second with the default burst: 10^16 >= 2^53 steps of 1/L microsecond.
  expectOnlyError(withLimit("      unit: second\n      requests_per_unit: 100000000\n"
                            "      algorithm: leaky_bucket\n"),
                  7,
                  "burst x requests_per_unit (100000000 x 100000000) must stay below 2^53 "
                  "for leaky_bucket (exact arithmetic in the Redis store)");
}

TEST(ValidationTest, LargeBucketBelowTheExactnessBoundIsValid) {
  EXPECT_TRUE(errorsOf(withLimit("      unit: second\n      requests_per_unit: 90000000\n"
                                 "      algorithm: token_bucket\n"))
                  .empty());
}

TEST(ValidationTest, UnlimitedWithUnit) {
  expectOnlyError(withLimit("      unlimited: true\n      unit: second\n"), 7,
                  "should not specify 'unit' when 'unlimited' is true");
}

TEST(ValidationTest, EmptyReplacesEntry) {
  expectOnlyError(withLimit("      unit: second\n      requests_per_unit: 5\n      replaces:\n"
                            "        - name: \"\"\n"),
                  9, "should not have an empty 'replaces' entry: it needs a 'name'");
}

TEST(ValidationTest, ReplacesEntryWithoutName) {
  expectOnlyError(withLimit("      unit: second\n      requests_per_unit: 5\n      replaces:\n"
                            "        - {}\n"),
                  9, "should not have an empty 'replaces' entry: it needs a 'name'");
}

TEST(ValidationTest, ReplacingItself) {
  expectOnlyError(withLimit("      unit: second\n      requests_per_unit: 5\n      replaces:\n"
                            "        - name: me\n      name: me\n"),
                  9, "a rate limit cannot replace itself ('me')");
}

TEST(ValidationTest, ReplacingAnUnknownName) {
  expectOnlyError(withLimit("      unit: second\n      requests_per_unit: 5\n      replaces:\n"
                            "        - name: ghost\n"),
                  9, "replaces 'ghost', but no rate limit in domain 'd' has that name");
}

TEST(ValidationTest, ReplacingANameDefinedLaterInTheFileIsFine) {
  EXPECT_TRUE(errorsOf(withLimit("      unit: second\n      requests_per_unit: 5\n      replaces:\n"
                                 "        - name: later\n"
                                 "  - key: j\n    rate_limit: {name: later, unit: second, "
                                 "requests_per_unit: 1}\n"))
                  .empty());
}

TEST(ValidationTest, ShareThresholdWithoutWildcard) {
  expectOnlyError("domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n",
                  5, "'share_threshold' needs a wildcard 'value' (one containing '*')");
}

TEST(ValidationTest, UnknownAlgorithm) {
  expectOnlyError(
      withLimit("      unit: second\n      requests_per_unit: 5\n      algorithm: token-bucket\n"),
      8,
      "unknown algorithm 'token-bucket' (expected one of fixed_window, sliding_window_log, "
      "sliding_window_counter, token_bucket, leaky_bucket, sketch, concurrency); did you mean "
      "'token_bucket'?");
}

struct ParamCase {
  const char* line;
  const char* message;
};

class InapplicableParamTest : public ::testing::TestWithParam<ParamCase> {};

TEST_P(InapplicableParamTest, IsRejectedAtItsLine) {
  expectOnlyError(
      withLimit("      unit: second\n      requests_per_unit: 5\n" + std::string(GetParam().line)),
      8, GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Params, InapplicableParamTest,
    ::testing::Values(
        ParamCase{"      burst: 10\n",
                  "'burst' does not apply to algorithm 'fixed_window' (only to token_bucket, "
                  "leaky_bucket)"},
        ParamCase{"      min_interval: 1s\n",
                  "'min_interval' does not apply to algorithm 'fixed_window' (only to "
                  "sliding_window_log)"},
        ParamCase{"      shape: true\n",
                  "'shape' does not apply to algorithm 'fixed_window' (only to leaky_bucket)"},
        ParamCase{"      warmup: 10s\n",
                  "'warmup' does not apply to algorithm 'fixed_window' (only to token_bucket)"},
        ParamCase{"      count_rejected: true\n      algorithm: token_bucket\n",
                  "'count_rejected' does not apply to algorithm 'token_bucket' (only to "
                  "fixed_window, sliding_window_log, sliding_window_counter, sketch)"}));

TEST(ValidationTest, ParamsValidForTheirAlgorithmsAreAccepted) {
  EXPECT_TRUE(
      errorsOf(withLimit("      unit: second\n      requests_per_unit: 5\n"
                         "      algorithm: leaky_bucket\n      burst: 3\n      shape: true\n"))
          .empty());
  EXPECT_TRUE(errorsOf(withLimit("      unit: second\n      requests_per_unit: 5\n"
                                 "      algorithm: sliding_window_counter\n"
                                 "      count_rejected: true\n"))
                  .empty());
}

TEST(ValidationTest, MalformedDuration) {
  expectOnlyError(withLimit("      unit: second\n      requests_per_unit: 5\n"
                            "      algorithm: sliding_window_log\n      min_interval: 10\n"),
                  9,
                  "malformed duration '10' for 'min_interval' (expected a whole number and a "
                  "unit: us, ms, s, m, h or d, e.g. 250ms or 2s)");
}

TEST(ValidationTest, ZeroBurst) {
  expectOnlyError(withLimit("      unit: second\n      requests_per_unit: 5\n"
                            "      algorithm: token_bucket\n      burst: 0\n"),
                  9, "'burst' must be an integer >= 1, got '0'");
}

TEST(ValidationTest, RateLimitAndRateLimitsTogether) {
  expectOnlyError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
      "requests_per_unit: 1}\n    rate_limits:\n      - {unit: day, requests_per_unit: 9}\n",
      5, "use either 'rate_limit' or 'rate_limits' on one node, not both");
}

TEST(ValidationTest, EmptyRateLimitsList) {
  expectOnlyError("domain: d\ndescriptors:\n  - key: k\n    rate_limits: []\n", 4,
                  "'rate_limits' must be a non-empty list of rate limits");
}

TEST(ValidationTest, DuplicateNameInRateLimits) {
  expectOnlyError(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limits:\n"
      "      - {name: a, unit: second, requests_per_unit: 1}\n"
      "      - {name: a, unit: day, requests_per_unit: 9}\n",
      6, "duplicate rate limit name 'a' on one node (first at line 5)");
}

// An empty name is proto3's "no name" (Envoy Gateway writes it on every limit): the limit
// keeps its generated name, as in envoyproxy/ratelimit.
TEST(ValidationTest, EmptyNameIsNoName) {
  const auto errors =
      errorsOf(withLimit("      unit: second\n      requests_per_unit: 5\n      name: \"\"\n"));
  EXPECT_TRUE(errors.empty()) << errors.front().toString();
}

TEST(ValidationTest, NestingDeeperThanSixtyFourLevels) {
  std::string yaml = "domain: d\ndescriptors:\n";
  std::string indent = "  ";
  for (int level = 1; level <= 65; ++level) {
    yaml += indent + "- key: k" + std::to_string(level) + "\n";
    yaml += indent + "  descriptors:\n";
    indent += "    ";
  }
  yaml += indent + "- key: leaf\n";
  const auto errors = errorsOf(yaml);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].location.line, 2 * 64 + 2);
  EXPECT_EQ(errors[0].message, "descriptors are nested deeper than 64 levels");
}

TEST(ValidationTest, RecursiveMetadataAliasIsAnErrorNotACrash) {
  expectOnlyError("domain: d\ndescriptors:\n  - key: k\n    metadata: &m\n      x: *m\n", 4,
                  "'metadata' must be plain data with string keys, at most 32 levels deep and "
                  "10000 values (is an alias referring to itself?)");
}

TEST(ValidationTest, RecursiveDescriptorsAliasIsAnErrorNotACrash) {
  const auto errors = errorsOf("domain: d\ndescriptors: &a\n  - key: k\n    descriptors: *a\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message, "descriptors are nested deeper than 64 levels");
}

TEST(ValidationTest, ExponentialAliasesAreCutOffWithBoundedErrors) {
  std::string yaml = "domain: d\ndescriptors:\n  - &n0 {key: a0}\n";
  for (int i = 1; i < 30; ++i) {
    yaml += "  - &n" + std::to_string(i) + " {key: a" + std::to_string(i) + ", descriptors: [*n" +
            std::to_string(i - 1) + ", *n" + std::to_string(i - 1) + "]}\n";
  }
  const auto errors = errorsOf(yaml);
  ASSERT_EQ(errors.size(), 1001u);
  EXPECT_EQ(errors.back().toString(), "test.yaml: too many errors; only the first 1000 are shown");
}

TEST(ValidationTest, AnchorsAndAliasesWork) {
  EXPECT_TRUE(errorsOf("domain: d\ndescriptors:\n"
                       "  - key: a\n    rate_limit: &std {unit: second, requests_per_unit: 5}\n"
                       "  - key: b\n    rate_limit: *std\n")
                  .empty());
}

TEST(ValidationTest, ErrorsOfOneRateLimitComeInFileOrder) {
  const auto errors =
      errorsOf(withLimit("      burst: 3\n      unit: fortnight\n"
                         "      requests_per_unit: -1\n"));
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].location.line, 6);
  EXPECT_EQ(errors[0].message.rfind("'burst' does not apply", 0), 0u);
  EXPECT_EQ(errors[1].location.line, 7);
  EXPECT_EQ(errors[2].location.line, 8);
}

TEST(ValidationTest, ReportsEveryErrorInFileOrder) {
  const auto errors = errorsOf(
      "domain: d\n"
      "descriptors:\n"
      "  - key: a\n"
      "    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"
      "  - key: b\n"
      "    rate_limit: {unit: second, requests_per_unit: -1}\n"
      "  - key: c\n"
      "    descriptors:\n"
      "      - key: \"\"\n"
      "  - key: e\n"
      "    rate_limit: {unit: second, requests_per_unit: 1, algorithm: gcra}\n");
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[0].location.line, 4);
  EXPECT_EQ(errors[1].location.line, 6);
  EXPECT_EQ(errors[2].location.line, 9);
  EXPECT_EQ(errors[3].location.line, 11);
}

}  // namespace
}  // namespace sluice
