#include "sluice/common/metrics.hpp"

#include <gtest/gtest.h>

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

TEST(ClockTest, ManualClockAdvancesOnlyWhenTold) {
  ManualClock clock(1000);
  EXPECT_EQ(clock.nowMicros(), 1000);
  clock.advance(std::chrono::milliseconds(250));
  EXPECT_EQ(clock.nowMicros(), 251000);
}

}  // namespace
}  // namespace sluice
