#include "sluice/decision/lease_tracker.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sluice/common/metrics.hpp"

namespace sluice {
namespace {

constexpr Micros kSecond = kMicrosPerSecond;

class LeaseTrackerTest : public ::testing::Test {
 protected:
  double outstanding(const std::string& rule) {
    return metrics_.gauge("leases_outstanding", {{"domain", "work"}, {"rule", rule}}).value();
  }
  std::uint64_t released(const std::string& rule, const std::string& by) {
    return metrics_
        .counter("leases_released_total", {{"domain", "work"}, {"rule", rule}, {"by", by}})
        .value();
  }

  Metrics metrics_;
  LeaseTracker tracker_{metrics_};
};

TEST_F(LeaseTrackerTest, AResetTakesTheLeasesOfItsBucketsOutOfOutstanding) {
  tracker_.granted("work", "work.job", 1, "a|job_x", 30 * kSecond, 0);
  tracker_.granted("work", "work.job", 2, "a|job_x", 30 * kSecond, 0);
  tracker_.granted("work", "work.job", 3, "b|job_x", 30 * kSecond, 0);
  tracker_.granted("work", "work.short", 4, "a|short_x", 30 * kSecond, 0);
  ASSERT_EQ(outstanding("work.job"), 3);

  tracker_.reset({"a|"}, kSecond);
  EXPECT_EQ(outstanding("work.job"), 1) << "client b's lease stays";
  EXPECT_EQ(outstanding("work.short"), 0);
  EXPECT_EQ(released("work.job", "reset"), 2U);
  EXPECT_EQ(released("work.short", "reset"), 1U);
  EXPECT_EQ(released("work.job", "release"), 0U);

  // A reset lease is no longer followed: its expiry does not count it again.
  tracker_.sweep(31 * kSecond);
  EXPECT_EQ(metrics_.counter("leases_expired_total", {{"domain", "work"}, {"rule", "work.job"}})
                .value(),
            1U);
}

}  // namespace
}  // namespace sluice
