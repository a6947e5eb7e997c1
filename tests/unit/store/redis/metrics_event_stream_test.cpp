#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "sluice/store/event_stream.hpp"
#include "support/redis_server.hpp"

namespace sluice {
namespace {

using test::RedisServer;
using test::ReplyPtr;

DenialEvent event(const std::string& client) {
  DenialEvent e;
  e.time_us = 1'700'000'000'000'000;
  e.domain = "auth";
  e.client = client;
  e.descriptor = "auth_type=login";
  e.rule = "login";
  return e;
}

EventStreamOptions optionsFor(int port) {
  EventStreamOptions options;
  options.redis.host = "127.0.0.1";
  options.redis.port = port;
  options.stream = "unit:denials";
  options.command_timeout = std::chrono::milliseconds(500);
  options.reconnect_backoff = std::chrono::milliseconds(50);
  return options;
}

bool eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

TEST(EventStreamTest, AFullQueueDropsAndCountsTheNewestEvents) {
  RedisServer redis;
  Metrics metrics;
  EventStreamOptions options = optionsFor(redis.port());
  options.queue_capacity = 2;
  auto publisher = makeRedisEventPublisher(options, metrics);
  for (const char* who : {"a", "b", "c", "d", "e"}) {
    publisher->publish(event(who));  // not started yet: nothing drains the queue
  }
  EXPECT_EQ(metrics.counter("events_dropped_total", {{"reason", "queue_full"}}).value(), 3u);
  EXPECT_EQ(metrics.gauge("events_queue_length").value(), 2);
  publisher->start();
  ASSERT_TRUE(eventually([&] { return metrics.counter("events_published_total").value() == 2; }));
  ReplyPtr range = redis.command({"XRANGE", "unit:denials", "-", "+"});
  ASSERT_EQ(range->elements, 2u);
  // Fields in order: time, domain, client, descriptor, rule.
  const redisReply* fields = range->element[0]->element[1];
  ASSERT_EQ(fields->elements, 10u);
  EXPECT_STREQ(fields->element[0]->str, "time");
  EXPECT_STREQ(fields->element[1]->str, "1700000000000");
  EXPECT_STREQ(fields->element[5]->str, "a");
  EXPECT_STREQ(range->element[1]->element[1]->element[5]->str, "b");
  publisher->stop();
}

TEST(EventStreamTest, StopWritesWhatIsQueuedThenDropsLaterEvents) {
  RedisServer redis;
  Metrics metrics;
  auto publisher = makeRedisEventPublisher(optionsFor(redis.port()), metrics);
  publisher->start();
  for (int i = 0; i < 50; ++i) {
    publisher->publish(event("c" + std::to_string(i)));
  }
  publisher->stop();
  EXPECT_EQ(metrics.counter("events_published_total").value(), 50u);
  ReplyPtr len = redis.command({"XLEN", "unit:denials"});
  EXPECT_EQ(len->integer, 50);
  publisher->publish(event("late"));
  EXPECT_EQ(metrics.counter("events_dropped_total", {{"reason", "stopped"}}).value(), 1u);
}

TEST(EventStreamTest, RecoversWhenRedisComesBack) {
  RedisServer redis;
  Metrics metrics;
  auto publisher = makeRedisEventPublisher(optionsFor(redis.port()), metrics);
  publisher->start();
  publisher->publish(event("before"));
  ASSERT_TRUE(eventually([&] { return metrics.counter("events_published_total").value() == 1; }));
  redis.stop();
  publisher->publish(event("during"));
  Counter& unavailable = metrics.counter("events_dropped_total", {{"reason", "redis_unavailable"}});
  ASSERT_TRUE(eventually([&] { return unavailable.value() == 1; }));
  redis.restart();  // an empty Redis again (no persistence)
  ASSERT_TRUE(eventually([&] {
    publisher->publish(event("after"));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return metrics.counter("events_published_total").value() >= 2;
  }));
  publisher->stop();
  ReplyPtr range = redis.command({"XRANGE", "unit:denials", "-", "+"});
  ASSERT_GE(range->elements, 1u);
  EXPECT_STREQ(range->element[0]->element[1]->element[5]->str, "after");
}

}  // namespace
}  // namespace sluice
