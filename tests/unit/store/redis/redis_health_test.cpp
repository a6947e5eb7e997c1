// Store health as a state (connecting, healthy, failing), fed by connection events and
// periodic PINGs, and the start-up wait for the first connection. Real redis-server; the
// network faults come from the fault proxy (tests/support/fault_proxy.hpp).
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <string>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/store/redis_store.hpp"
#include "support/fault_proxy.hpp"
#include "support/free_port.hpp"
#include "support/redis_server.hpp"

namespace sluice {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using test::FaultProxy;
using test::RedisServer;
using test::runUntil;

StoreRequest oneLimit(const std::string& key) {
  StoreLimit l;
  l.key = key;
  l.params.algorithm = Algorithm::kFixedWindow;
  l.params.limit = 100;
  l.params.window_us = 3600 * kMicrosPerSecond;
  return StoreRequest{{l}, 1};
}

class RedisHealthTest : public ::testing::Test {
 protected:
  RedisOptions optionsFor(const std::string& url) {
    auto o = parseRedisUrl(url);
    EXPECT_TRUE(o.ok());
    RedisOptions options = *o;
    options.key_prefix =
        std::string("h-") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    return options;
  }

  void open(const RedisOptions& options) {
    store_ = makeRedisStore(io_, options, metrics_, clock_);
  }

  bool waitFor(StoreHealth health, milliseconds timeout = milliseconds(5000)) {
    return runUntil(
        io_, [&] { return store_->health() == health; }, timeout);
  }

  std::uint64_t transitionsTo(std::string_view state) {
    return metrics_
        .counter("store_health_transitions_total", {{"store", "redis"}, {"to", std::string(state)}})
        .value();
  }

  boost::asio::io_context io_;
  Metrics metrics_;
  SystemClock clock_;
  StorePtr store_;
};

TEST_F(RedisHealthTest, ConnectingThenHealthyOnceTheFirstConnectionIsMade) {
  RedisServer server;
  open(optionsFor(server.url()));
  EXPECT_EQ(store_->health(), StoreHealth::kConnecting);
  EXPECT_FALSE(store_->healthy());
  ASSERT_TRUE(waitFor(StoreHealth::kHealthy));
  EXPECT_TRUE(store_->healthy());
  EXPECT_EQ(transitionsTo("healthy"), 1u);
  EXPECT_EQ(metrics_.gauge("store_health", {{"store", "redis"}, {"state", "healthy"}}).value(), 1);
}

TEST_F(RedisHealthTest, ACallMadeWhileConnectingWaitsForTheConnectionInsteadOfFailing) {
  RedisServer server;
  // Every reply 400 ms late: the handshake (and so the first connection) takes > 400 ms.
  FaultProxy proxy(server.port());
  proxy.setLatency(milliseconds(400));
  RedisOptions options = optionsFor(proxy.url());
  options.request_timeout = milliseconds(1000);
  open(options);
  const auto started = Clock::now();
  auto result = test::evaluateOnce(io_, *store_, oneLimit("slow-start"));
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_TRUE(result->allowed);
  EXPECT_GE(Clock::now() - started, milliseconds(400));
  EXPECT_EQ(store_->health(), StoreHealth::kHealthy);
  EXPECT_EQ(transitionsTo("failing"), 0u);
}

TEST_F(RedisHealthTest, FailingOnceTheConnectWaitHasPassedWithoutAConnection) {
  RedisOptions options =
      optionsFor("redis://127.0.0.1:" + std::to_string(test::freeLoopbackPort()) + "/0");
  options.connect_wait = milliseconds(300);
  open(options);
  const auto started = Clock::now();
  // Refused at once, but start-up is not over: still connecting, and a call waits.
  auto result = test::evaluateOnce(io_, *store_, oneLimit("never"));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().kind, ErrorKind::kConnection);
  EXPECT_GE(Clock::now() - started, milliseconds(250));
  EXPECT_EQ(store_->health(), StoreHealth::kFailing);
  EXPECT_EQ(transitionsTo("failing"), 1u);
  EXPECT_GE(
      metrics_.counter("redis_faults_total", {{"store", "redis"}, {"kind", "connection"}}).value(),
      2u);  // every refused attempt, and the call that waited
}

TEST_F(RedisHealthTest, APingDetectsAHalfOpenConnectionAndTheStoreReconnects) {
  RedisServer server;
  FaultProxy proxy(server.port());
  RedisOptions options = optionsFor(proxy.url());
  options.ping_interval = milliseconds(100);
  options.stall_timeout = milliseconds(300);
  open(options);
  ASSERT_TRUE(waitFor(StoreHealth::kHealthy));
  // No request in flight: only the PING can notice that the peer is gone (nothing else
  // would, short of TCP keepalive's minutes), so noticing it at all is the check; expected
  // after about ping_interval + stall_timeout (0.4 s), waited for up to 10 s.
  proxy.halfOpenExisting();
  ASSERT_TRUE(waitFor(StoreHealth::kFailing, milliseconds(10'000)));
  ASSERT_TRUE(waitFor(StoreHealth::kHealthy, milliseconds(3000)));
  EXPECT_TRUE(test::evaluateOnce(io_, *store_, oneLimit("after")).ok());
  EXPECT_EQ(transitionsTo("failing"), 1u);
  EXPECT_EQ(transitionsTo("healthy"), 2u);
}

TEST_F(RedisHealthTest, APingAnsweredWithAnErrorMakesTheStoreFailingUntilPongComesBack) {
  test::RedisServerOptions server_options;
  server_options.extra_args = {"--busy-reply-threshold", "100"};
  RedisServer server(server_options);
  RedisOptions options = optionsFor(server.url());
  options.ping_interval = milliseconds(50);
  options.stall_timeout = milliseconds(5000);  // the BUSY replies come, the connection stays
  options.connect_timeout = milliseconds(5000);
  open(options);
  ASSERT_TRUE(waitFor(StoreHealth::kHealthy));
  // A script busy for 1.5 s: after 100 ms Redis answers every other command with -BUSY.
  auto blocker = server.connect();
  ASSERT_EQ(redisAppendCommand(blocker.get(), "EVAL %s 0",
                               "local t = redis.call('TIME') local s = t[1] * 1000000 + t[2] "
                               "while true do local n = redis.call('TIME') "
                               "if n[1] * 1000000 + n[2] - s > 1500000 then break end end"),
            REDIS_OK);
  int done = 0;
  ASSERT_EQ(redisBufferWrite(blocker.get(), &done), REDIS_OK);
  ASSERT_TRUE(waitFor(StoreHealth::kFailing, milliseconds(3000)));
  ASSERT_TRUE(waitFor(StoreHealth::kHealthy, milliseconds(5000)));
  EXPECT_GE(
      metrics_.counter("store_health_transitions_total", {{"store", "redis"}, {"to", "failing"}})
          .value(),
      1u);
}

}  // namespace
}  // namespace sluice
