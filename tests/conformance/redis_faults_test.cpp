// Faults against a real redis-server: stopped mid-load and restarted (each failure mode),
// SCRIPT FLUSH mid-load. Nothing crashes, nothing hangs, recovery is automatic.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/rules/bucket_key.hpp"
#include "sluice/store/failover_store.hpp"
#include "sluice/store/memory_store.hpp"
#include "sluice/store/redis_store.hpp"
#include "support/redis_server.hpp"

namespace sluice {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// Keeps `concurrency` requests in flight on one store, driving the io_context on this
/// thread, and records every answer with the phase it was sent in.
class LoadDriver {
 public:
  struct Answer {
    int phase = 0;
    bool ok = false;
    bool allowed = false;
    bool degraded = false;
    ErrorKind kind = ErrorKind::kInternal;
    Clock::time_point at;
  };

  LoadDriver(boost::asio::io_context& io, Store& store, StoreRequest request, int concurrency)
      : io_(io), store_(store), request_(std::move(request)), concurrency_(concurrency) {}

  /// Runs the load for `duration` in `phase`.
  void run(int phase, milliseconds duration) {
    phase_ = phase;
    auto until = Clock::now() + duration;
    while (Clock::now() < until) {
      // Answers may come back synchronously (a failure mode, a closed connection): send
      // at most `concurrency_` per turn so the loop always yields to the io_context.
      for (int i = 0; i < concurrency_ && in_flight_ < concurrency_; ++i) {
        send();
      }
      test::runFor(io_, milliseconds(1));
    }
  }

  /// Runs the load in `phase` until an answer of that phase came from the store itself (ok,
  /// not degraded), or `timeout` passes; true when one did.
  bool runUntilClean(int phase, milliseconds timeout) {
    phase_ = phase;
    const auto until = Clock::now() + timeout;
    auto clean = [&] {
      return std::any_of(answers_.begin(), answers_.end(),
                         [&](const Answer& a) { return a.phase == phase && a.ok && !a.degraded; });
    };
    while (!clean() && Clock::now() < until) {
      for (int i = 0; i < concurrency_ && in_flight_ < concurrency_; ++i) {
        send();
      }
      test::runFor(io_, milliseconds(1));
    }
    return clean();
  }

  /// Waits for the requests still in flight.
  bool drain() {
    return test::runUntil(
        io_, [&] { return in_flight_ == 0; }, milliseconds(3000));
  }

  const std::vector<Answer>& answers() const { return answers_; }

 private:
  void send() {
    ++in_flight_;
    const int phase = phase_;
    store_.evaluate(request_, [this, phase](Result<StoreResponse> r) {
      --in_flight_;
      Answer a;
      a.phase = phase;
      a.ok = r.ok();
      a.at = Clock::now();
      if (r) {
        a.allowed = r->allowed;
        a.degraded = r->degraded;
      } else {
        a.kind = r.error().kind;
      }
      answers_.push_back(a);
    });
  }

  boost::asio::io_context& io_;
  Store& store_;
  StoreRequest request_;
  int concurrency_;
  int in_flight_ = 0;
  int phase_ = 0;
  std::vector<Answer> answers_;
};

enum Phase { kHealthy = 0, kOutage = 1, kRecovering = 2, kRecovered = 3 };

StoreRequest generousRequest() {
  StoreLimit limit;
  limit.key = BucketKey::storeKey("fault-client", "faults:k");
  limit.params.algorithm = Algorithm::kTokenBucket;
  limit.params.limit = 1'000'000;
  limit.params.window_us = kMicrosPerSecond;
  return StoreRequest{{limit}, 1};
}

class RedisOutageTest : public ::testing::TestWithParam<FailureMode> {};

TEST_P(RedisOutageTest, StoppedMidLoadAndRestartedBehavesAsTheFailureModeSays) {
  const FailureMode mode = GetParam();
  test::RedisServer server;
  boost::asio::io_context io;
  Metrics metrics;
  SystemClock clock;
  auto parsed = parseRedisUrl(server.url());
  ASSERT_TRUE(parsed.ok());
  RedisOptions options = *parsed;
  options.key_prefix = "faults-" + std::string(failureModeName(mode));
  // The outage shows as refused connections, not as missed deadlines: a deadline that a
  // loaded (or sanitized) machine can miss would count as a second outage, or as a degraded
  // answer once recovered.
  options.request_timeout = milliseconds(1000);
  StorePtr redis = makeRedisStore(io, options, metrics, clock);
  StorePtr memory = makeMemoryStore(MemoryStoreOptions{}, clock, metrics);
  StorePtr store = makeFailoverStore(redis, memory, mode, metrics);
  ASSERT_TRUE(test::runUntil(io, [&] { return redis->healthy(); }));

  LoadDriver load(io, *store, generousRequest(), 8);
  load.run(kHealthy, milliseconds(200));
  server.stop();
  load.run(kOutage, milliseconds(400));
  server.restart();
  const auto restarted = Clock::now();
  // Back on Redis once the connection is re-made (the reconnect backoff is capped at
  // 0.5 s): waited for, not timed; the time is recorded.
  ASSERT_TRUE(load.runUntilClean(kRecovering, milliseconds(10'000)));
  load.run(kRecovered, milliseconds(200));
  ASSERT_TRUE(load.drain());

  int healthy_ok = 0, outage = 0, outage_ok = 0, outage_degraded = 0, recovered_ok = 0,
      recovered_degraded = 0;
  Clock::time_point first_clean_after_restart{};
  for (const auto& a : load.answers()) {
    if (a.phase == kHealthy) {
      healthy_ok += a.ok && a.allowed && !a.degraded;
    } else if (a.phase == kOutage) {
      ++outage;
      outage_ok += a.ok;
      outage_degraded += a.ok && a.degraded;
      if (!a.ok) {
        EXPECT_TRUE(a.kind == ErrorKind::kConnection || a.kind == ErrorKind::kTimeout);
      }
    } else if (a.phase == kRecovered) {
      recovered_ok += a.ok && a.allowed;
      recovered_degraded += a.ok && a.degraded;
    }
    if (a.phase >= kRecovering && a.ok && !a.degraded &&
        first_clean_after_restart == Clock::time_point{}) {
      first_clean_after_restart = a.at;
    }
  }
  EXPECT_GT(healthy_ok, 0);
  EXPECT_GT(outage, 0);
  switch (mode) {
    case FailureMode::kOpen:
    case FailureMode::kLocal:
      // Every answer during the outage is a decision, flagged as degraded.
      EXPECT_EQ(outage_ok, outage);
      EXPECT_EQ(outage_degraded, outage);
      break;
    case FailureMode::kClosed:
      EXPECT_EQ(outage_ok, 0);
      break;
  }
  EXPECT_GT(recovered_ok, 0);
  EXPECT_EQ(recovered_degraded, 0) << "decisions did not go back to Redis";
  ASSERT_NE(first_clean_after_restart, Clock::time_point{});
  RecordProperty(
      "recovered_after_ms",
      static_cast<int>(
          std::chrono::duration_cast<milliseconds>(first_clean_after_restart - restarted).count()));
  // One outage: one activation, whatever the number of failed requests.
  EXPECT_EQ(metrics
                .counter("store_failure_mode_activations_total",
                         {{"mode", std::string(failureModeName(mode))}})
                .value(),
            1u);
  EXPECT_GT(metrics.counter("store_errors_total", {{"kind", "connection"}}).value() +
                metrics.counter("store_errors_total", {{"kind", "timeout"}}).value() +
                (mode == FailureMode::kLocal ? 1u : 0u),
            0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, RedisOutageTest,
                         ::testing::Values(FailureMode::kOpen, FailureMode::kClosed,
                                           FailureMode::kLocal),
                         [](const auto& info) { return std::string(failureModeName(info.param)); });

TEST(RedisScriptFlushTest, ScriptFlushMidLoadLosesNoRequestAndNoCount) {
  test::RedisServer server;
  boost::asio::io_context io;
  Metrics metrics;
  SystemClock clock;
  auto parsed = parseRedisUrl(server.url());
  ASSERT_TRUE(parsed.ok());
  RedisOptions options = *parsed;
  options.key_prefix = "flush";
  options.request_timeout = milliseconds(1000);
  StorePtr redis = makeRedisStore(io, options, metrics, clock);
  ASSERT_TRUE(test::runUntil(io, [&] { return redis->healthy(); }));

  StoreLimit limit;
  limit.key = BucketKey::storeKey("flush-client", "flush:k");
  limit.params.algorithm = Algorithm::kFixedWindow;
  limit.params.limit = 300;
  limit.params.window_us = 86'400 * kMicrosPerSecond;  // no window edge during the test
  const StoreRequest request{{limit}, 1};
  int allowed = 0, denied = 0, errors = 0, in_flight = 0;
  for (int i = 0; i < 600; ++i) {
    ++in_flight;
    redis->evaluate(request, [&](Result<StoreResponse> r) {
      --in_flight;
      if (!r) {
        ++errors;
        ADD_FAILURE() << r.error().message;
      } else if (r->allowed) {
        ++allowed;
      } else {
        ++denied;
      }
    });
    if (i % 50 == 25) {
      server.command({"SCRIPT", "FLUSH"});
    }
    if (i % 10 == 0) {
      test::runFor(io, milliseconds(1));
    }
  }
  ASSERT_TRUE(test::runUntil(io, [&] { return in_flight == 0; }));
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(allowed, 300);
  EXPECT_EQ(denied, 300);
}

}  // namespace
}  // namespace sluice
