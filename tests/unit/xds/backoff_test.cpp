#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/xds/rules_client.hpp"

namespace sluice::xds {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, DoublesFromInitialUpToMaxWithoutJitter) {
  Backoff backoff({milliseconds(10'000), milliseconds(60'000), 0.5, false}, [] { return 0.0; });
  std::vector<long> delays;
  for (int i = 0; i < 5; ++i) {
    delays.push_back(backoff.next().count());
  }
  EXPECT_EQ(delays, (std::vector<long>{10'000, 20'000, 40'000, 60'000, 60'000}));
  backoff.reset();
  EXPECT_EQ(backoff.next().count(), 10'000);
}

TEST(BackoffTest, JitterSpreadsEachDelayByTheRandomFactor) {
  double draw = 0.0;
  Backoff backoff({milliseconds(10'000), milliseconds(60'000), 0.5, true}, [&] { return draw; });
  EXPECT_EQ(backoff.next().count(), 5'000);  // 10 s - 50 %
  draw = 0.999999;
  EXPECT_EQ(backoff.next().count(), 29'999);  // 20 s + 50 %, just below
  draw = 0.5;
  EXPECT_EQ(backoff.next().count(), 40'000);
  draw = 0.999999;
  EXPECT_EQ(backoff.next().count(), 60'000);  // never above max
}

TEST(BackoffTest, ParsesEnvoysNodeMetadata) {
  auto metadata = parseNodeMetadata("cluster=gw,zone=a=b,broken,=empty-key");
  ASSERT_EQ(metadata.size(), 3u);
  EXPECT_EQ(metadata[0], (std::pair<std::string, std::string>{"cluster", "gw"}));
  EXPECT_EQ(metadata[1], (std::pair<std::string, std::string>{"zone", "a=b"}));
  EXPECT_EQ(metadata[2], (std::pair<std::string, std::string>{"", "empty-key"}));
}

/// Records each wait and moves a ManualClock by it instead of sleeping.
class ManualSleeper final : public Sleeper {
 public:
  ManualSleeper(ManualClock& clock, std::size_t until) : clock_(clock), until_(until) {}
  bool sleepFor(milliseconds delay) override {
    std::lock_guard lock(mutex_);
    if (woken_) {
      return false;
    }
    clock_.advance(delay);
    delays_.push_back(delay.count());
    cv_.notify_all();
    return delays_.size() < until_;
  }
  void wake() override {
    std::lock_guard lock(mutex_);
    woken_ = true;
  }
  std::vector<long> waitForDelays() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return delays_.size() >= until_; });
    return delays_;
  }

 private:
  ManualClock& clock_;
  std::size_t until_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<long> delays_;
  bool woken_ = false;
};

TEST(RulesClientTest, RetriesAnUnreachableServerWithBackoffOnTheInjectedClock) {
  ManualClock clock;
  const Micros start = clock.nowMicros();
  Metrics metrics;
  auto sleeper = std::make_unique<ManualSleeper>(clock, 4);
  ManualSleeper* waits = sleeper.get();
  ClientOptions options;
  options.server = "127.0.0.1:1";  // nothing listens on port 1
  options.backoff = {milliseconds(100), milliseconds(500), 0.5, false};
  bool applied = false;
  auto client = makeRulesClient(
      options,
      [&](const std::string&, std::vector<RateLimitConfigResource>) {
        applied = true;
        return ApplyOutcome{true, {}};
      },
      metrics, clock, std::move(sleeper), [] { return 0.5; });
  ASSERT_TRUE(client->start());
  EXPECT_EQ(waits->waitForDelays(), (std::vector<long>{100, 200, 400, 500}));
  client->stop();
  EXPECT_EQ(clock.nowMicros() - start, 1'200 * kMicrosPerMilli);
  EXPECT_FALSE(applied);
  const std::string text = metrics.render();
  EXPECT_NE(text.find("rules_xds_connected 0"), std::string::npos) << text;
  EXPECT_NE(text.find("rules_xds_stream_failures_total 4"), std::string::npos) << text;
}

TEST(RulesClientTest, RefusesUnreadableTlsFilesAtStart) {
  ManualClock clock;
  Metrics metrics;
  ClientOptions options;
  options.server = "127.0.0.1:1";
  options.tls = {true, "/nonexistent/ca.pem", "", "", ""};
  auto client = makeRulesClient(
      options,
      [](const std::string&, std::vector<RateLimitConfigResource>) { return ApplyOutcome{}; },
      metrics, clock);
  auto status = client->start();
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().message, "--xds-tls-ca /nonexistent/ca.pem: cannot be read");
}

}  // namespace
}  // namespace sluice::xds
