#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/store/memory_store.hpp"

namespace sluice {
namespace {

constexpr Micros kT0 = 1'700'000'040LL * kMicrosPerSecond;
constexpr Micros kSecond = kMicrosPerSecond;
constexpr Micros kMinute = 60 * kSecond;
const std::string kKey = "mallory|api:user=mallory;i0;fw";

/// 2 requests per minute; 3 denials within the minute ban for 10 minutes, doubling to 30.
StoreLimit bannedLimit(const std::string& key = kKey) {
  StoreLimit limit;
  limit.key = key;
  limit.params.limit = 2;
  limit.params.window_us = kMinute;
  limit.params.ban.after = 3;
  limit.params.ban.duration_us = 10 * kMinute;
  limit.params.ban.backoff_milli = 2000;
  limit.params.ban.max_us = 30 * kMinute;
  limit.params.ban.forgive_us = 60 * kMinute;
  limit.params.ban.within_us = kMinute;
  return limit;
}

class MemoryStoreBanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_.set(kT0);
    store_ = makeMemoryStore({}, clock_, metrics_);
  }

  StoreResponse decide(StoreRequest request) {
    std::optional<Result<StoreResponse>> got;
    store_->evaluate(request, [&](Result<StoreResponse> r) { got = std::move(r); });
    return std::move(**got);
  }

  StoreResponse hit(StoreLimit limit = bannedLimit()) {
    StoreRequest request;
    request.limits.push_back(std::move(limit));
    return decide(std::move(request));
  }

  /// Uses up the two allowed requests and denies three times: the third denial bans.
  StoreResponse floodUntilBanned() {
    hit();
    hit();
    hit();
    hit();
    return hit();
  }

  std::size_t reset(const std::string& prefix) {
    std::optional<Result<std::size_t>> got;
    store_->reset({prefix}, [&](Result<std::size_t> r) { got = std::move(r); });
    return **got;
  }

  ManualClock clock_;
  Metrics metrics_;
  StorePtr store_;
};

TEST_F(MemoryStoreBanTest, TheThirdDenialStartsABanAndSaysSo) {
  hit();
  hit();
  StoreResponse denied = hit();
  EXPECT_FALSE(denied.allowed);
  EXPECT_FALSE(denied.outcomes[0].banned);
  hit();
  const StoreResponse banned = hit();
  EXPECT_FALSE(banned.allowed);
  EXPECT_TRUE(banned.outcomes[0].banned);
  EXPECT_EQ(banned.outcomes[0].ban_step, 1);
  EXPECT_EQ(banned.outcomes[0].retry_after_us, 10 * kMinute);
  EXPECT_EQ(banned.outcomes[0].reset_after_us, 10 * kMinute);
}

TEST_F(MemoryStoreBanTest, ABannedClientIsRefusedAfterItsWindowUntilTheBanEnds) {
  floodUntilBanned();
  clock_.advance(std::chrono::microseconds(2 * kMinute));  // the rate limit alone would allow again
  const StoreResponse refused = hit();
  EXPECT_FALSE(refused.allowed);
  EXPECT_TRUE(refused.outcomes[0].banned);
  EXPECT_EQ(refused.outcomes[0].ban_step, 0);  // no new ban: logged once
  EXPECT_EQ(refused.outcomes[0].retry_after_us, 8 * kMinute);
  clock_.advance(std::chrono::microseconds(8 * kMinute));
  const StoreResponse free = hit();
  EXPECT_TRUE(free.allowed);
  EXPECT_FALSE(free.outcomes[0].banned);
}

TEST_F(MemoryStoreBanTest, RefusalsDuringABanChargeNothing) {
  floodUntilBanned();
  for (int i = 0; i < 50; ++i) {
    EXPECT_TRUE(hit().outcomes[0].banned);
  }
  clock_.advance(std::chrono::microseconds(10 * kMinute));
  // The bucket was not charged by the refusals: the full limit is there.
  EXPECT_EQ(hit().outcomes[0].remaining, 1);
}

TEST_F(MemoryStoreBanTest, TheSecondBanIsLongerAndAQuietHourForgives) {
  floodUntilBanned();
  clock_.advance(std::chrono::microseconds(10 * kMinute));
  EXPECT_EQ(floodUntilBanned().outcomes[0].retry_after_us, 20 * kMinute);
  clock_.advance(std::chrono::microseconds(20 * kMinute));
  EXPECT_EQ(floodUntilBanned().outcomes[0].retry_after_us, 30 * kMinute);
  clock_.advance(
      std::chrono::microseconds(30 * kMinute + 60 * kMinute));  // the ban, then an hour of quiet
  const StoreResponse again = floodUntilBanned();
  EXPECT_EQ(again.outcomes[0].ban_step, 1);
  EXPECT_EQ(again.outcomes[0].retry_after_us, 10 * kMinute);
}

TEST_F(MemoryStoreBanTest, TheAdminResetLiftsTheBan) {
  floodUntilBanned();
  EXPECT_TRUE(hit().outcomes[0].banned);
  reset("mallory|");
  EXPECT_TRUE(hit().allowed);
}

TEST_F(MemoryStoreBanTest, OtherClientsAreNotBanned) {
  floodUntilBanned();
  EXPECT_TRUE(hit(bannedLimit("alice|api:user=alice;i0;fw")).allowed);
}

TEST_F(MemoryStoreBanTest, AShadowLimitBansWithoutDenying) {
  StoreLimit shadow = bannedLimit();
  shadow.shadow = true;
  for (int i = 0; i < 4; ++i) {
    hit(shadow);
  }
  const StoreResponse started = hit(shadow);
  EXPECT_TRUE(started.allowed);
  EXPECT_TRUE(started.outcomes[0].banned);
  EXPECT_EQ(started.outcomes[0].ban_step, 1);
}

TEST_F(MemoryStoreBanTest, ReportsAndRefundsAreNeverRefusedNorCounted) {
  floodUntilBanned();
  StoreRequest report;
  report.limits.push_back(bannedLimit());
  report.charge = Charge::kReport;
  EXPECT_TRUE(decide(report).allowed);
  EXPECT_FALSE(decide(report).outcomes[0].banned);
}

TEST_F(MemoryStoreBanTest, ABannedLimitDeniesTheWholeRequestAndLeavesTheOthersUncharged) {
  floodUntilBanned();
  StoreRequest request;
  request.limits.push_back(bannedLimit());
  StoreLimit other;
  other.key = "mallory|api:path=/;i0;fw";
  other.params.limit = 10;
  other.params.window_us = kMinute;
  request.limits.push_back(other);
  const StoreResponse response = decide(request);
  EXPECT_FALSE(response.allowed);
  EXPECT_TRUE(response.outcomes[0].banned);
  EXPECT_TRUE(response.outcomes[1].allowed);
  EXPECT_EQ(response.outcomes[1].remaining, 10);  // a check: nothing charged
}

}  // namespace
}  // namespace sluice
