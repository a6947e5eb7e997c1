#include "sluice/decision/rate_limit_headers.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace sluice {
namespace {

// The header lines of one answer by name; every line must be `Name: value\r\n`.
std::map<std::string, std::string> headersOf(const LimitStatus& binding, bool denied) {
  std::string lines;
  appendRateLimitHeaders(lines, binding, denied);
  std::map<std::string, std::string> out;
  std::size_t pos = 0;
  while (pos < lines.size()) {
    std::size_t end = lines.find("\r\n", pos);
    EXPECT_NE(end, std::string::npos) << lines;
    if (end == std::string::npos) {
      break;
    }
    std::string line = lines.substr(pos, end - pos);
    std::size_t colon = line.find(": ");
    EXPECT_NE(colon, std::string::npos) << line;
    if (colon != std::string::npos) {
      out[line.substr(0, colon)] = line.substr(colon + 2);
    }
    pos = end + 2;
  }
  return out;
}

LimitStatus limit(std::int64_t remaining, Micros reset, Micros retry) {
  LimitStatus l;
  l.name = "login";
  l.limit = 5;
  l.window_us = 60 * kMicrosPerSecond;
  l.outcome.allowed = retry == 0;
  l.outcome.remaining = remaining;
  l.outcome.reset_after_us = reset;
  l.outcome.retry_after_us = retry;
  return l;
}

TEST(RateLimitHeadersTest, SecondsRoundUp) {
  EXPECT_EQ(ceilSeconds(0), 0);
  EXPECT_EQ(ceilSeconds(-5), 0);
  EXPECT_EQ(ceilSeconds(1), 1);
  EXPECT_EQ(ceilSeconds(kMicrosPerSecond), 1);
  EXPECT_EQ(ceilSeconds(kMicrosPerSecond + 1), 2);
  EXPECT_EQ(ceilMillis(1), 1);
  EXPECT_EQ(ceilMillis(1000), 1);
  EXPECT_EQ(ceilMillis(1001), 2);
}

TEST(RateLimitHeadersTest, RetryAfterIsAtLeastOneSecond) {
  EXPECT_EQ(retryAfterSeconds(0), 1);
  EXPECT_EQ(retryAfterSeconds(1), 1);
  EXPECT_EQ(retryAfterSeconds(999'999), 1);
  EXPECT_EQ(retryAfterSeconds(1'000'001), 2);
  EXPECT_EQ(retryAfterSeconds(kRetryNever), 1);
}

TEST(RateLimitHeadersTest, AllowedAnswerHasNoRetryAfter) {
  auto h = headersOf(limit(4, 41'200'000, 0), false);
  EXPECT_EQ(h["X-Ratelimit-Limit"], "5");
  EXPECT_EQ(h["X-Ratelimit-Remaining"], "4");
  EXPECT_EQ(h["X-Ratelimit-Reset"], "42");
  EXPECT_EQ(h["RateLimit-Policy"], "\"login\";q=5;w=60");
  EXPECT_EQ(h["RateLimit"], "\"login\";r=4;t=42");
  EXPECT_EQ(h.count("Retry-After"), 0u);
  EXPECT_EQ(h.count("X-Ratelimit-Retry-After"), 0u);
}

TEST(RateLimitHeadersTest, DeniedAnswerRoundsRetryAfterUp) {
  auto h = headersOf(limit(0, 300'000, 300'000), true);
  EXPECT_EQ(h["Retry-After"], "1");
  EXPECT_EQ(h["X-Ratelimit-Retry-After"], "1");
  EXPECT_EQ(h["X-Ratelimit-Reset"], "1");
  h = headersOf(limit(0, 12'000'001, 12'000'001), true);
  EXPECT_EQ(h["Retry-After"], "13");
}

TEST(RateLimitHeadersTest, NeverPassingRequestGetsNoRetryAfter) {
  LimitStatus l = limit(5, 0, kRetryNever);
  l.outcome.allowed = false;
  l.outcome.never = true;
  auto h = headersOf(l, true);
  EXPECT_EQ(h.count("Retry-After"), 0u);
  EXPECT_EQ(h["X-Ratelimit-Limit"], "5");
}

// rateLimitHeaderFields() joined back into lines: the same bytes as appendRateLimitHeaders().
std::string joined(const LimitStatus& binding, bool denied) {
  std::string out;
  for (const HeaderField& field : rateLimitHeaderFields(binding, denied)) {
    out.append(field.name).append(": ").append(field.value).append("\r\n");
  }
  return out;
}

TEST(RateLimitHeadersTest, FieldsAreTheLinesNameByName) {
  LimitStatus never = limit(5, 0, kRetryNever);
  never.outcome.allowed = false;
  never.outcome.never = true;
  LimitStatus big = limit(123'456'789'012, 99'999'999'000'001, 12'345'678'900'000);
  big.name = "a\"b\\c\xc3\xa9";
  big.limit = 9'223'372'036'854'775'807;
  big.window_us = 100'000'000 * kMicrosPerSecond;
  LimitStatus unnamed = limit(0, 1, 1);
  unnamed.name.clear();
  const std::vector<std::pair<LimitStatus, bool>> cases = {
      {limit(4, 41'200'000, 0), false},
      {limit(0, 300'000, 300'000), true},
      {never, true},
      {big, true},
      {big, false},
      {unnamed, true},
      {limit(4, 41'200'000, 0), false},  // the prepared parts of another limit before
  };
  for (const auto& [binding, denied] : cases) {
    std::string lines;
    appendRateLimitHeaders(lines, binding, denied);
    EXPECT_EQ(joined(binding, denied), lines) << binding.name;
  }
  const auto fields = rateLimitHeaderFields(limit(0, 300'000, 300'000), true);
  ASSERT_EQ(fields.size(), 7u);
  EXPECT_EQ(fields[0].name, "X-Ratelimit-Limit");
  EXPECT_EQ(fields[0].value, "5");
  EXPECT_EQ(fields[4].name, "RateLimit");
  EXPECT_EQ(fields[4].value, "\"login\";r=0;t=1");
  EXPECT_EQ(fields[6].name, "Retry-After");
  EXPECT_EQ(fields[6].value, "1");
}

TEST(RateLimitHeadersTest, PolicyNameIsAnEscapedStructuredFieldString) {
  EXPECT_EQ(sfString("a\"b\\c\nd\xc3\xa9"), "\"a\\\"b\\\\cd\"");
}

TEST(RateLimitHeadersTest, LinesAreExactlyTheseBytesInThisOrder) {
  std::string lines = "Before: 1\r\n";
  appendRateLimitHeaders(lines, limit(3, 1'500'000, 0), false);
  EXPECT_EQ(lines,
            "Before: 1\r\n"
            "X-Ratelimit-Limit: 5\r\nX-Ratelimit-Remaining: 3\r\nX-Ratelimit-Reset: 2\r\n"
            "RateLimit-Policy: \"login\";q=5;w=60\r\nRateLimit: \"login\";r=3;t=2\r\n");
  // Numbers of every length (past the eight digits of the short way), a denial, and a name
  // to escape; the same limit again (its prepared parts reused) and another one.
  LimitStatus big = limit(123'456'789'012, 99'999'999'000'001, 12'345'678'900'000);
  big.name = "a\"b\\c\xc3\xa9";
  big.limit = 9'223'372'036'854'775'807;
  big.window_us = 100'000'000 * kMicrosPerSecond;
  for (int round = 0; round < 2; ++round) {
    lines.clear();
    appendRateLimitHeaders(lines, big, true);
    EXPECT_EQ(lines,
              "X-Ratelimit-Limit: 9223372036854775807\r\n"
              "X-Ratelimit-Remaining: 123456789012\r\nX-Ratelimit-Reset: 100000000\r\n"
              "RateLimit-Policy: \"a\\\"b\\\\c\";q=9223372036854775807;w=100000000\r\n"
              "RateLimit: \"a\\\"b\\\\c\";r=123456789012;t=100000000\r\n"
              "X-Ratelimit-Retry-After: 12345679\r\nRetry-After: 12345679\r\n");
  }
  lines.clear();
  appendRateLimitHeaders(lines, limit(-4, 0, 0), true);
  EXPECT_EQ(lines,
            "X-Ratelimit-Limit: 5\r\nX-Ratelimit-Remaining: 0\r\nX-Ratelimit-Reset: 0\r\n"
            "RateLimit-Policy: \"login\";q=5;w=60\r\nRateLimit: \"login\";r=0;t=0\r\n"
            "X-Ratelimit-Retry-After: 1\r\nRetry-After: 1\r\n");
}

TEST(RateLimitHeadersTest, BindingPrefersDenyingLimitWithLongestRetry) {
  Decision d;
  d.allowed = false;
  d.descriptors.push_back(DescriptorStatus{true, {limit(3, 1, 0), limit(0, 5'000'000, 5'000'000)}});
  d.descriptors.push_back(DescriptorStatus{true, {limit(0, 9'000'000, 9'000'000)}});
  ASSERT_NE(d.binding(), nullptr);
  EXPECT_EQ(d.binding()->outcome.retry_after_us, 9'000'000);
}

TEST(RateLimitHeadersTest, BindingOnAllowIsTheLeastRemainingAndIgnoresShadowAndUnlimited) {
  Decision d;
  LimitStatus shadow = limit(0, 1, 0);
  shadow.shadow = true;
  LimitStatus unlimited = limit(0, 1, 0);
  unlimited.unlimited = true;
  d.descriptors.push_back(
      DescriptorStatus{true, {limit(7, 1, 0), shadow, unlimited, limit(2, 1, 0)}});
  ASSERT_NE(d.binding(), nullptr);
  EXPECT_EQ(d.binding()->outcome.remaining, 2);
  Decision none;
  none.descriptors.push_back(DescriptorStatus{true, {shadow, unlimited}});
  EXPECT_EQ(none.binding(), nullptr);
}

}  // namespace
}  // namespace sluice
