#include "sluice/common/metrics.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "sluice/common/clock.hpp"

namespace sluice {
namespace {

TEST(MetricsTest, CounterRendersWithHelpTypeAndLabels) {
  Metrics m;
  m.describe("decisions_total", Metrics::Type::kCounter, "Decisions by outcome.");
  m.counter("decisions_total", {{"domain", "auth"}, {"outcome", "allowed"}}).inc(3);
  std::string text = m.render();
  EXPECT_NE(text.find("# HELP sluice_decisions_total Decisions by outcome.\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE sluice_decisions_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("sluice_decisions_total{domain=\"auth\",outcome=\"allowed\"} 3\n"),
            std::string::npos);
}

TEST(MetricsTest, SameLabelsReturnSameSeries) {
  Metrics m;
  Counter& a = m.counter("x_total", {{"k", "v"}});
  Counter& b = m.counter("x_total", {{"k", "v"}});
  EXPECT_EQ(&a, &b);
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  EXPECT_EQ(renderLabels({{"k", "a\"b\\c\nd"}}), "{k=\"a\\\"b\\\\c\\nd\"}");
}

TEST(MetricsTest, IllFormedUtf8InLabelValuesBecomesReplacementCharacter) {
  // Prometheus refuses a whole scrape with one ill-formed label value; well-formed
  // multi-byte characters pass unchanged.
  EXPECT_EQ(renderLabels({{"k",
                           "a\xff"
                           "b"}}),
            "{k=\"a\xEF\xBF\xBD"
            "b\"}");
  EXPECT_EQ(renderLabels({{"k", "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"}}),
            "{k=\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"}");
  // Overlong form, surrogate, truncated sequence.
  EXPECT_EQ(renderLabels({{"k", "\xC0\xAF"}}), "{k=\"\xEF\xBF\xBD\xEF\xBF\xBD\"}");
  EXPECT_EQ(renderLabels({{"k", "\xED\xA0\x80"}}), "{k=\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"}");
  EXPECT_EQ(renderLabels({{"k", "x\xE2\x82"}}), "{k=\"x\xEF\xBF\xBD\xEF\xBF\xBD\"}");
}

TEST(MetricsTest, ValuesThatRenderAlikeShareOneSeries) {
  Metrics m;
  Counter& a = m.counter("x_total", {{"k", "a\xff"}});
  Counter& b = m.counter("x_total", {{"k", "a\xfe"}});
  EXPECT_EQ(&a, &b);
}

TEST(MetricsTest, HelpIsEscapedAndGaugesSpellNonFiniteValues) {
  Metrics m;
  m.describe("g", Metrics::Type::kGauge, "two\nlines \\ here");
  m.gauge("g", {{"k", "inf"}}).set(std::numeric_limits<double>::infinity());
  m.gauge("g", {{"k", "nan"}}).set(std::numeric_limits<double>::quiet_NaN());
  m.gauge("g", {{"k", "frac"}}).set(0.1);
  std::string text = m.render();
  EXPECT_NE(text.find("# HELP sluice_g two\\nlines \\\\ here\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_g{k=\"inf\"} +Inf\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_g{k=\"nan\"} NaN\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_g{k=\"frac\"} 0.1\n"), std::string::npos) << text;
}

TEST(MetricsTest, HistogramIsCumulativeWithInfSumAndCount) {
  Metrics m;
  m.describe("lat_seconds", Metrics::Type::kHistogram, "Latency.", {0.1, 1.0});
  Histogram& h = m.histogram("lat_seconds");
  h.observe(0.05);
  h.observe(0.5);
  h.observe(5);
  std::string text = m.render();
  EXPECT_NE(text.find("sluice_lat_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_lat_seconds_bucket{le=\"1\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_lat_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_lat_seconds_count 3\n"), std::string::npos) << text;
}

TEST(MetricsTest, HistogramCountsAValueOnABoundInThatBound) {
  Metrics m;
  m.describe("on_bound_seconds", Metrics::Type::kHistogram, "Latency.", {0.1, 1.0, 2.0});
  Histogram& h = m.histogram("on_bound_seconds");
  for (double v : {0.0, 0.1, 0.10001, 1.0, 2.0, 2.5}) {
    h.observe(v);
  }
  EXPECT_EQ(h.cumulativeCounts(), (std::vector<std::uint64_t>{2, 4, 5, 6}));
  EXPECT_EQ(h.count(), 6u);
}

TEST(ClockTest, ManualClockAdvancesOnlyWhenTold) {
  ManualClock clock(1000);
  EXPECT_EQ(clock.nowMicros(), 1000);
  clock.advance(std::chrono::milliseconds(250));
  EXPECT_EQ(clock.nowMicros(), 251000);
}

}  // namespace
}  // namespace sluice
