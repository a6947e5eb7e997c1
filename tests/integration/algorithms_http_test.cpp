// Every algorithm over real HTTP against the real binary (docs/algorithms.md): what a
// caller sees in status codes, rate-limit headers and the body's per-limit fields. Each case
// runs on the memory store and on `--store redis` with a real redis-server (the Lua scripts
// must make the same decisions).
//
// Timing: windows are short (1 s) only where a test needs time to pass; the others use hour
// windows. Assertions on time are lower bounds or follow from the order of events, so a slow
// machine cannot fail them: e.g. after sleeping the announced retry_after_ms the same request
// must pass, and a request sent 500 ms after another sees at most 500 ms less of its window.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "support/http_client.hpp"
#include "support/redis_server.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// Domain `algo`, one node per case (the descriptor value names it). Limits have explicit
// names so the IETF headers are predictable.
constexpr const char* kAlgoRules = R"(domain: algo
descriptors:
  - key: alg
    value: fixed
    rate_limit: {name: fixed, unit: second, requests_per_unit: 3, algorithm: fixed_window}
  - key: alg
    value: log
    rate_limit: {name: log, unit: second, requests_per_unit: 3, algorithm: sliding_window_log}
  - key: alg
    value: log_min_interval
    rate_limit:
      name: log_min_interval
      unit: minute
      requests_per_unit: 10
      algorithm: sliding_window_log
      min_interval: 400ms
  - key: alg
    value: log_count_rejected
    rate_limit:
      name: log_count_rejected
      unit: second
      requests_per_unit: 2
      algorithm: sliding_window_log
      count_rejected: true
  - key: alg
    value: counter
    rate_limit:
      {name: counter, unit: second, requests_per_unit: 4, algorithm: sliding_window_counter}
  - key: alg
    value: token
    rate_limit:
      {name: token, unit: second, requests_per_unit: 2, algorithm: token_bucket, burst: 4}
  - key: alg
    value: token_plain
    rate_limit: {name: token_plain, unit: second, requests_per_unit: 10, algorithm: token_bucket}
  - key: alg
    value: token_warmup
    rate_limit:
      name: token_warmup
      unit: second
      requests_per_unit: 10
      algorithm: token_bucket
      warmup: 1s
  - key: alg
    value: leaky
    rate_limit:
      {name: leaky, unit: second, requests_per_unit: 1, algorithm: leaky_bucket, burst: 3}
  - key: alg
    value: shaped
    rate_limit:
      name: shaped
      unit: second
      requests_per_unit: 4
      algorithm: leaky_bucket
      burst: 4
      shape: true
  - key: alg
    value: fixed_window_hourly
    rate_limit:
      {name: fixed_window_hourly, unit: hour, requests_per_unit: 5, algorithm: fixed_window}
  - key: alg
    value: sliding_window_log_hourly
    rate_limit:
      name: sliding_window_log_hourly
      unit: hour
      requests_per_unit: 5
      algorithm: sliding_window_log
  - key: alg
    value: sliding_window_counter_hourly
    rate_limit:
      name: sliding_window_counter_hourly
      unit: hour
      requests_per_unit: 5
      algorithm: sliding_window_counter
  - key: alg
    value: token_bucket_hourly
    rate_limit:
      {name: token_bucket_hourly, unit: hour, requests_per_unit: 5, algorithm: token_bucket}
  - key: alg
    value: leaky_bucket_hourly
    rate_limit:
      {name: leaky_bucket_hourly, unit: hour, requests_per_unit: 5, algorithm: leaky_bucket}
  - key: alg
    value: pair
    rate_limits:
      - {name: wide, unit: hour, requests_per_unit: 10, algorithm: token_bucket}
      - {name: narrow, unit: hour, requests_per_unit: 2, algorithm: fixed_window}
)";

constexpr milliseconds kShapedInterval{250};  // W / L of the `shaped` node

/// A client id unique to the running test, so tests sharing one server never share buckets.
std::string testClient() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string(info->test_suite_name()) + "." + info->name();
}

std::string descriptorJson(const std::string& value) {
  return R"([{"key":"alg","value":")" + value + R"("}])";
}

std::string decisionBody(const std::vector<std::string>& values, std::int64_t hits = 1) {
  std::string descriptors;
  for (const auto& value : values) {
    descriptors += (descriptors.empty() ? "" : ",") + descriptorJson(value);
  }
  return R"({"domain":"algo","clientId":")" + testClient() + R"(","descriptors":[)" + descriptors +
         R"(],"hits":)" + std::to_string(hits) + "}";
}

std::int64_t ceilDiv(std::int64_t value, std::int64_t by) { return (value + by - 1) / by; }

/// Limit `limit` of descriptor `descriptor` in an answer's body.
json limitOf(const HttpResponse& r, std::size_t descriptor = 0, std::size_t limit = 0) {
  return json::parse(r.body)["descriptors"][descriptor]["limits"][limit];
}

/// The headers of an answer whose binding limit is `limit` (its body entry) with window
/// `window_s`: they say what the body says, in whole seconds rounded up.
void expectHeadersOf(const HttpResponse& r, const json& limit, std::int64_t window_s) {
  SCOPED_TRACE(r.body);
  const std::string name = "\"" + limit["name"].get<std::string>() + "\"";
  const std::string remaining = std::to_string(limit["remaining"].get<std::int64_t>());
  const std::string reset =
      std::to_string(ceilDiv(limit["reset_after_ms"].get<std::int64_t>(), 1000));
  EXPECT_EQ(r.header("X-Ratelimit-Limit"), std::to_string(limit["limit"].get<std::int64_t>()));
  EXPECT_EQ(r.header("X-Ratelimit-Remaining"), remaining);
  EXPECT_EQ(r.header("X-Ratelimit-Reset"), reset);
  EXPECT_EQ(r.header("RateLimit-Policy"),
            name + ";q=" + r.header("X-Ratelimit-Limit") + ";w=" + std::to_string(window_s));
  EXPECT_EQ(r.header("RateLimit"), name + ";r=" + remaining + ";t=" + reset);
  if (r.status == 200 || limit.value("never", false)) {
    EXPECT_FALSE(r.hasHeader("Retry-After"));
    EXPECT_FALSE(r.hasHeader("X-Ratelimit-Retry-After"));
    return;
  }
  const std::int64_t retry_ms = limit["retry_after_ms"].get<std::int64_t>();
  EXPECT_GT(retry_ms, 0);
  const std::string retry = std::to_string(std::max<std::int64_t>(1, ceilDiv(retry_ms, 1000)));
  EXPECT_EQ(r.header("Retry-After"), retry);
  EXPECT_EQ(r.header("X-Ratelimit-Retry-After"), retry);
}

/// Sleeps until at least `room` is left in the current epoch-aligned window of `window`, so a
/// test that needs one whole window does not straddle its end.
void awaitWindowRoom(milliseconds window, milliseconds room) {
  const auto now =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  const milliseconds left = window - now % window;
  if (left < room) {
    std::this_thread::sleep_for(left + milliseconds(10));
  }
}

void sleepMs(std::int64_t ms) { std::this_thread::sleep_for(milliseconds(ms)); }

enum class Store { kMemory, kRedis };

std::string storeName(Store store) { return store == Store::kMemory ? "memory" : "redis"; }

/// The servers of this process, started on first use and shared by the tests: one `sluice`
/// per store, and for the Redis one a real redis-server. Tests never share buckets (each has
/// its own client id), so sharing a server only saves start-up time.
class AlgorithmsHttpBase : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    memory_.reset();
    redis_sluice_.reset();
    redis_.reset();
  }

  static SluiceProcess& server(Store store) {
    if (store == Store::kMemory) {
      if (!memory_) {
        memory_ = std::make_unique<SluiceProcess>(withRules({{"algo.yaml", kAlgoRules}}));
      }
      return *memory_;
    }
    if (!redis_sluice_) {
      redis_ = std::make_unique<RedisServer>();
      redis_sluice_ = std::make_unique<SluiceProcess>(
          withRules({{"algo.yaml", kAlgoRules}}, {"--threads", "1", "--store", "redis", "--redis",
                                                  redis_->url(), "--failure-mode", "closed",
                                                  // A loaded CI machine must not turn a slow
                                                  // answer into a 503: exactness is tested here.
                                                  "--redis-timeout-ms", "1000"}));
      awaitReady(*redis_sluice_);
    }
    return *redis_sluice_;
  }

  /// /healthz answers before the Redis connection is up; /readyz says when the store can
  /// answer (with failure mode `closed`, requests before that get 503). One I/O thread: each
  /// thread has its own connection and /readyz reports the one of the thread it lands on.
  static void awaitReady(SluiceProcess& sluice) {
    HttpClient client = sluice.client();
    const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
    while (client.get("/readyz").status != 200) {
      if (SteadyClock::now() > deadline) {
        throw std::runtime_error("sluice on redis not ready: " + sluice.log());
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
  }

  void use(Store store) {
    sluice_ = &server(store);
    client_.emplace(sluice_->client());
  }

  HttpResponse decide(const std::string& value, std::int64_t hits = 1) {
    return client_->post("/shouldAllowRequest", decisionBody({value}, hits));
  }

  SluiceProcess* sluice_ = nullptr;
  std::optional<HttpClient> client_;

 private:
  static std::unique_ptr<SluiceProcess> memory_;
  static std::unique_ptr<RedisServer> redis_;
  static std::unique_ptr<SluiceProcess> redis_sluice_;
};

std::unique_ptr<SluiceProcess> AlgorithmsHttpBase::memory_;
std::unique_ptr<RedisServer> AlgorithmsHttpBase::redis_;
std::unique_ptr<SluiceProcess> AlgorithmsHttpBase::redis_sluice_;

/// The behaviours of each algorithm over time, on each store.
class AlgorithmsHttpTest : public AlgorithmsHttpBase, public ::testing::WithParamInterface<Store> {
 protected:
  void SetUp() override { use(GetParam()); }
};

// ---- fixed_window ------------------------------------------------------------------------

TEST_P(AlgorithmsHttpTest, FixedWindowAllowsTheLimitThenDeniesUntilTheNextWindow) {
  awaitWindowRoom(milliseconds(1000), milliseconds(600));
  for (int i = 0; i < 3; ++i) {
    HttpResponse r = decide("fixed");
    ASSERT_EQ(r.status, 200) << r.body;
    json limit = limitOf(r);
    EXPECT_EQ(limit["algorithm"], "fixed_window");
    EXPECT_EQ(limit["remaining"], 2 - i);
    EXPECT_EQ(limit["retry_after_ms"], 0);
    expectHeadersOf(r, limit, 1);
    EXPECT_EQ(r.header("X-Ratelimit-Reset"), "1");
  }
  HttpResponse denied = decide("fixed");
  ASSERT_EQ(denied.status, 429) << denied.body;
  json limit = limitOf(denied);
  EXPECT_EQ(limit["allowed"], false);
  EXPECT_EQ(limit["remaining"], 0);
  // Both end with the window: the retry is when the counter starts over.
  EXPECT_LE(limit["retry_after_ms"].get<std::int64_t>(), 1000);
  EXPECT_EQ(limit["reset_after_ms"], limit["retry_after_ms"]);
  expectHeadersOf(denied, limit, 1);
  EXPECT_EQ(denied.header("Retry-After"), "1");

  sleepMs(limit["retry_after_ms"].get<std::int64_t>() + 20);
  HttpResponse next_window = decide("fixed");
  ASSERT_EQ(next_window.status, 200) << next_window.body;
  EXPECT_EQ(limitOf(next_window)["remaining"], 2);
}

// ---- sliding_window_log ------------------------------------------------------------------

TEST_P(AlgorithmsHttpTest, SlidingWindowLogFreesOneRequestWhenTheOldestAgesOut) {
  ASSERT_EQ(decide("log").status, 200);
  sleepMs(500);
  ASSERT_EQ(decide("log").status, 200);
  HttpResponse last = decide("log");
  ASSERT_EQ(last.status, 200) << last.body;
  EXPECT_EQ(limitOf(last)["remaining"], 0);

  HttpResponse denied = decide("log");
  ASSERT_EQ(denied.status, 429) << denied.body;
  json limit = limitOf(denied);
  EXPECT_EQ(limit["algorithm"], "sliding_window_log");
  // The first request ages out at least 500 ms before the last two: that is the retry,
  // while the bucket is entirely fresh only when the newest ages out.
  const std::int64_t retry_ms = limit["retry_after_ms"].get<std::int64_t>();
  EXPECT_LE(retry_ms, 500);
  EXPECT_GT(limit["reset_after_ms"].get<std::int64_t>(), retry_ms);
  expectHeadersOf(denied, limit, 1);

  sleepMs(retry_ms + 20);
  HttpResponse freed = decide("log");
  ASSERT_EQ(freed.status, 200) << freed.body;
  EXPECT_EQ(limitOf(freed)["remaining"], 0);
  // The two later requests are still inside the window: no fresh window as with fixed_window.
  HttpResponse again = decide("log");
  EXPECT_EQ(again.status, 429) << again.body;
  expectHeadersOf(again, limitOf(again), 1);
}

TEST_P(AlgorithmsHttpTest, SlidingWindowLogMinIntervalDeniesARequestTooCloseToThePrevious) {
  HttpResponse first = decide("log_min_interval");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(limitOf(first)["remaining"], 9);

  HttpResponse too_close = decide("log_min_interval");
  ASSERT_EQ(too_close.status, 429) << too_close.body;
  json limit = limitOf(too_close);
  // Denied for the gap, not the count: nothing consumed, and the retry is the gap's rest.
  EXPECT_EQ(limit["remaining"], 9);
  const std::int64_t retry_ms = limit["retry_after_ms"].get<std::int64_t>();
  EXPECT_LE(retry_ms, 400);
  expectHeadersOf(too_close, limit, 60);
  EXPECT_EQ(too_close.header("Retry-After"), "1");

  sleepMs(retry_ms + 20);
  HttpResponse spaced = decide("log_min_interval");
  ASSERT_EQ(spaced.status, 200) << spaced.body;
  EXPECT_EQ(limitOf(spaced)["remaining"], 8);
}

TEST_P(AlgorithmsHttpTest, SlidingWindowLogCountRejectedKeepsAHammeringClientBlocked) {
  ASSERT_EQ(decide("log_count_rejected").status, 200);
  ASSERT_EQ(decide("log_count_rejected").status, 200);
  const auto admitted_at = SteadyClock::now();
  // Hammer for longer than the window: the two admitted requests age out, but every denied
  // attempt is logged too, so the client stays blocked.
  HttpResponse denied;
  int attempts = 0;
  while (SteadyClock::now() - admitted_at < milliseconds(1200)) {
    denied = decide("log_count_rejected");
    ASSERT_EQ(denied.status, 429) << "attempt " << attempts << ": " << denied.body;
    ++attempts;
    std::this_thread::sleep_for(milliseconds(50));
  }
  json limit = limitOf(denied);
  EXPECT_EQ(limit["remaining"], 0);
  expectHeadersOf(denied, limit, 1);

  // Once it pauses for the announced retry, it passes.
  sleepMs(limit["retry_after_ms"].get<std::int64_t>() + 20);
  HttpResponse after_pause = decide("log_count_rejected");
  EXPECT_EQ(after_pause.status, 200) << after_pause.body;
}

// ---- sliding_window_counter --------------------------------------------------------------

TEST_P(AlgorithmsHttpTest, SlidingWindowCounterWeighsThePreviousWindowIntoTheNext) {
  awaitWindowRoom(milliseconds(1000), milliseconds(600));
  for (int i = 0; i < 4; ++i) {
    HttpResponse r = decide("counter");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(limitOf(r)["remaining"], 3 - i);
    expectHeadersOf(r, limitOf(r), 1);
  }
  HttpResponse denied = decide("counter");
  ASSERT_EQ(denied.status, 429) << denied.body;
  json limit = limitOf(denied);
  EXPECT_EQ(limit["algorithm"], "sliding_window_counter");
  // Four in this window still weigh 4 x (1 - elapsed) in the next one: one more request
  // fits only a quarter of the way into it. The bucket is fresh two windows on.
  const std::int64_t retry_ms = limit["retry_after_ms"].get<std::int64_t>();
  EXPECT_GE(retry_ms, 250);
  EXPECT_LE(retry_ms, 1250);
  EXPECT_GT(limit["reset_after_ms"].get<std::int64_t>(), 1000);
  EXPECT_EQ(denied.header("X-Ratelimit-Reset"), "2");
  expectHeadersOf(denied, limit, 1);

  sleepMs(retry_ms + 20);
  HttpResponse weighted = decide("counter");
  ASSERT_EQ(weighted.status, 200) << weighted.body;
  // A fixed window would have 3 left here.
  EXPECT_LT(limitOf(weighted)["remaining"].get<std::int64_t>(), 3);
}

// ---- token_bucket ------------------------------------------------------------------------

TEST_P(AlgorithmsHttpTest, TokenBucketAllowsTheBurstThenRefillsOneTokenPerInterval) {
  for (int i = 0; i < 4; ++i) {
    HttpResponse r = decide("token");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(limitOf(r)["algorithm"], "token_bucket");
    EXPECT_EQ(limitOf(r)["remaining"], 3 - i);
    expectHeadersOf(r, limitOf(r), 1);
  }
  HttpResponse denied = decide("token");
  ASSERT_EQ(denied.status, 429) << denied.body;
  json limit = limitOf(denied);
  EXPECT_EQ(limit["remaining"], 0);
  // 2 per second: one token every 500 ms; four take up to 2 s to come back.
  const std::int64_t retry_ms = limit["retry_after_ms"].get<std::int64_t>();
  EXPECT_LE(retry_ms, 500);
  EXPECT_GT(limit["reset_after_ms"].get<std::int64_t>(), 1500);
  EXPECT_LE(limit["reset_after_ms"].get<std::int64_t>(), 2000);
  expectHeadersOf(denied, limit, 1);
  EXPECT_EQ(denied.header("X-Ratelimit-Limit"), "2");

  sleepMs(retry_ms + 20);
  HttpResponse refilled = decide("token");
  ASSERT_EQ(refilled.status, 200) << refilled.body;
  EXPECT_EQ(limitOf(refilled)["remaining"], 0);
  EXPECT_EQ(decide("token").status, 429);
}

TEST_P(AlgorithmsHttpTest, TokenBucketAdmitsACostAboveTheRateUpToTheBurst) {
  HttpResponse three = decide("token", 3);  // 3 > 2 per second, <= burst 4
  ASSERT_EQ(three.status, 200) << three.body;
  EXPECT_EQ(limitOf(three)["remaining"], 1);

  HttpResponse five = decide("token", 5);  // > burst: never
  ASSERT_EQ(five.status, 429) << five.body;
  EXPECT_EQ(limitOf(five)["never"], true);
  EXPECT_EQ(json::parse(five.body)["reason"],
            "the cost exceeds what limit \"token\" can ever admit");
  expectHeadersOf(five, limitOf(five), 1);
}

TEST_P(AlgorithmsHttpTest, TokenBucketWithWarmupStartsColdAndAdmitsLessThanItsBurst) {
  int plain_allowed = 0;
  int cold_allowed = 0;
  std::int64_t first_cold_remaining = -1;
  for (int i = 0; i < 10; ++i) {
    plain_allowed += decide("token_plain").status == 200 ? 1 : 0;
  }
  for (int i = 0; i < 10; ++i) {
    HttpResponse r = decide("token_warmup");
    ASSERT_TRUE(r.status == 200 || r.status == 429) << r.body;
    cold_allowed += r.status == 200 ? 1 : 0;
    if (i == 0) {
      ASSERT_EQ(r.status, 200) << r.body;
      first_cold_remaining = limitOf(r)["remaining"].get<std::int64_t>();
      expectHeadersOf(r, limitOf(r), 1);
    } else if (r.status == 429) {
      expectHeadersOf(r, limitOf(r), 1);
    }
  }
  // A warm bucket of 10 admits 10 at once; a cold one charges its first requests up to three
  // intervals each (remaining counts requests at the stable interval).
  EXPECT_EQ(plain_allowed, 10);
  EXPECT_LT(cold_allowed, 10);
  EXPECT_LT(first_cold_remaining, 9);
}

// ---- leaky_bucket ------------------------------------------------------------------------

TEST_P(AlgorithmsHttpTest, LeakyBucketGivesEachRequestItsDelayInTheQueueAndDeniesWhenFull) {
  // 1 per second, a queue of 3: the answers say when each request leaves the queue.
  std::vector<std::int64_t> delays;
  for (int i = 0; i < 3; ++i) {
    HttpResponse r = decide("leaky");
    ASSERT_EQ(r.status, 200) << r.body;
    json limit = limitOf(r);
    EXPECT_EQ(limit["algorithm"], "leaky_bucket");
    EXPECT_EQ(limit["shaped"], false);
    EXPECT_EQ(limit["remaining"], 2 - i);
    expectHeadersOf(r, limit, 1);
    delays.push_back(limit["delay_ms"].get<std::int64_t>());
  }
  EXPECT_EQ(delays[0], 0);
  EXPECT_GT(delays[1], 0);
  EXPECT_LE(delays[1], 1000);
  EXPECT_GT(delays[2], 1000);
  EXPECT_LE(delays[2], 2000);

  HttpResponse full = decide("leaky");
  ASSERT_EQ(full.status, 429) << full.body;
  json limit = limitOf(full);
  EXPECT_EQ(limit["remaining"], 0);
  EXPECT_EQ(limit["delay_ms"], 0);
  EXPECT_LE(limit["retry_after_ms"].get<std::int64_t>(), 1000);
  expectHeadersOf(full, limit, 1);
  EXPECT_EQ(full.header("Retry-After"), "1");
}

TEST_P(AlgorithmsHttpTest, ShapedLeakyBucketHoldsConcurrentAnswersOneIntervalApart) {
  struct Answer {
    HttpResponse response;
    SteadyClock::time_point arrived;
  };
  const std::string body = decisionBody({"shaped"});
  std::vector<Answer> answers(3);
  std::vector<std::thread> callers;
  const auto start = SteadyClock::now();
  for (auto& answer : answers) {
    callers.emplace_back([this, &answer, &body] {
      HttpClient client = sluice_->client();
      try {
        answer.response = client.post("/shouldAllowRequest", body);
      } catch (const std::exception& e) {
        answer.response.body = e.what();
      }
      answer.arrived = SteadyClock::now();
    });
  }
  for (auto& caller : callers) {
    caller.join();
  }
  std::vector<milliseconds> arrivals;
  std::vector<std::int64_t> delays;
  for (const auto& answer : answers) {
    ASSERT_EQ(answer.response.status, 200) << answer.response.body;
    json limit = limitOf(answer.response);
    EXPECT_EQ(limit["shaped"], true);
    expectHeadersOf(answer.response, limit, 1);
    delays.push_back(limit["delay_ms"].get<std::int64_t>());
    arrivals.push_back(std::chrono::duration_cast<milliseconds>(answer.arrived - start));
  }
  std::sort(arrivals.begin(), arrivals.end());
  std::sort(delays.begin(), delays.end());
  // The k-th request leaves the queue (k - 1) x 250 ms after the first reached the server,
  // which was after `start`: lower bounds only, a slow machine only delays answers more.
  EXPECT_EQ(delays[0], 0);
  EXPECT_GT(delays[2], 0);
  EXPECT_GE(arrivals[1], kShapedInterval * 3 / 4);
  EXPECT_GE(arrivals[2], kShapedInterval * 3 / 2);
}

// ---- several limits: all or nothing --------------------------------------------------------

TEST_P(AlgorithmsHttpTest, RateLimitsListChargesNoLimitWhenOneDenies) {
  for (int i = 0; i < 2; ++i) {
    HttpResponse r = decide("pair");
    ASSERT_EQ(r.status, 200) << r.body;
    // The binding limit on a 200 is the one with the least remaining: `narrow`.
    expectHeadersOf(r, limitOf(r, 0, 1), 3600);
    EXPECT_EQ(r.header("X-Ratelimit-Remaining"), std::to_string(1 - i));
  }
  for (int i = 0; i < 3; ++i) {
    HttpResponse denied = decide("pair");
    ASSERT_EQ(denied.status, 429) << denied.body;
    json wide = limitOf(denied, 0, 0);
    json narrow = limitOf(denied, 0, 1);
    EXPECT_EQ(wide["name"], "wide");
    EXPECT_EQ(wide["allowed"], true);
    EXPECT_EQ(narrow["name"], "narrow");
    EXPECT_EQ(narrow["allowed"], false);
    expectHeadersOf(denied, narrow, 3600);
  }
  // Three denied requests charged nothing to `wide`: 10 - 2 left.
  HttpResponse check = decide("pair", 0);
  ASSERT_EQ(check.status, 200) << check.body;
  EXPECT_EQ(limitOf(check, 0, 0)["remaining"], 8);
  EXPECT_EQ(limitOf(check, 0, 1)["remaining"], 0);
}

TEST_P(AlgorithmsHttpTest, SeveralDescriptorsChargeNoneWhenOneDenies) {
  awaitWindowRoom(milliseconds(3'600'000), milliseconds(3000));
  ASSERT_EQ(decide("fixed_window_hourly", 5).status, 200);
  HttpResponse denied = client_->post("/shouldAllowRequest",
                                      decisionBody({"token_bucket_hourly", "fixed_window_hourly"}));
  ASSERT_EQ(denied.status, 429) << denied.body;
  expectHeadersOf(denied, limitOf(denied, 1), 3600);
  EXPECT_EQ(denied.header("RateLimit-Policy"), R"("fixed_window_hourly";q=5;w=3600)");
  HttpResponse check = decide("token_bucket_hourly", 0);
  ASSERT_EQ(check.status, 200) << check.body;
  EXPECT_EQ(limitOf(check)["remaining"], 5);
}

// ---- the same contract for every algorithm -----------------------------------------------
// Hour windows (L = 5 per hour): nothing refills during a test.

class AlgorithmsHttpContractTest
    : public AlgorithmsHttpBase,
      public ::testing::WithParamInterface<std::tuple<Store, std::string>> {
 protected:
  void SetUp() override {
    use(std::get<0>(GetParam()));
    awaitWindowRoom(milliseconds(3'600'000), milliseconds(3000));
  }
  const std::string& algorithm() const { return std::get<1>(GetParam()); }
  std::string node() const { return algorithm() + "_hourly"; }
  HttpResponse decideParam(std::int64_t hits) { return decide(node(), hits); }
};

TEST_P(AlgorithmsHttpContractTest, HitsAboveOneConsumeThatManyAndADeniedCostConsumesNothing) {
  HttpResponse three = decideParam(3);
  ASSERT_EQ(three.status, 200) << three.body;
  json limit = limitOf(three);
  EXPECT_EQ(limit["algorithm"], algorithm());
  EXPECT_EQ(limit["remaining"], 2);
  expectHeadersOf(three, limit, 3600);

  HttpResponse too_many = decideParam(3);
  ASSERT_EQ(too_many.status, 429) << too_many.body;
  limit = limitOf(too_many);
  EXPECT_EQ(limit["remaining"], 2);
  EXPECT_FALSE(limit.contains("never"));
  EXPECT_GT(limit["retry_after_ms"].get<std::int64_t>(), 0);
  expectHeadersOf(too_many, limit, 3600);

  HttpResponse two = decideParam(2);
  ASSERT_EQ(two.status, 200) << two.body;
  EXPECT_EQ(limitOf(two)["remaining"], 0);
  expectHeadersOf(two, limitOf(two), 3600);
}

TEST_P(AlgorithmsHttpContractTest, HitsZeroChecksWithoutConsuming) {
  HttpResponse fresh = decideParam(0);
  ASSERT_EQ(fresh.status, 200) << fresh.body;
  EXPECT_EQ(limitOf(fresh)["remaining"], 5);
  expectHeadersOf(fresh, limitOf(fresh), 3600);
  for (int i = 0; i < 2; ++i) {
    HttpResponse check = decideParam(0);
    ASSERT_EQ(check.status, 200) << check.body;
    EXPECT_EQ(limitOf(check)["remaining"], 5);
  }
  HttpResponse hit = decideParam(1);
  ASSERT_EQ(hit.status, 200) << hit.body;
  EXPECT_EQ(limitOf(hit)["remaining"], 4);
  HttpResponse check = decideParam(0);
  ASSERT_EQ(check.status, 200) << check.body;
  EXPECT_EQ(limitOf(check)["remaining"], 4);
}

TEST_P(AlgorithmsHttpContractTest, CostAboveTheLimitIsDeniedAsNeverPassing) {
  HttpResponse never = decideParam(6);
  ASSERT_EQ(never.status, 429) << never.body;
  json body = json::parse(never.body);
  json limit = body["descriptors"][0]["limits"][0];
  EXPECT_EQ(limit["allowed"], false);
  EXPECT_EQ(limit["never"], true);
  EXPECT_EQ(limit["remaining"], 5);
  EXPECT_EQ(body["reason"], "the cost exceeds what limit \"" + node() + "\" can ever admit");
  // No retry can help: no Retry-After.
  expectHeadersOf(never, limit, 3600);

  HttpResponse one = decideParam(1);
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(limitOf(one)["remaining"], 4);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, AlgorithmsHttpTest,
                         ::testing::Values(Store::kMemory, Store::kRedis),
                         [](const ::testing::TestParamInfo<Store>& info) {
                           return storeName(info.param);
                         });

INSTANTIATE_TEST_SUITE_P(Algorithms, AlgorithmsHttpContractTest,
                         ::testing::Combine(::testing::Values(Store::kMemory, Store::kRedis),
                                            ::testing::Values("fixed_window", "sliding_window_log",
                                                              "sliding_window_counter",
                                                              "token_bucket", "leaky_bucket")),
                         [](const ::testing::TestParamInfo<std::tuple<Store, std::string>>& info) {
                           return storeName(std::get<0>(info.param)) + "_" +
                                  std::get<1>(info.param);
                         });

}  // namespace
}  // namespace sluice::test
