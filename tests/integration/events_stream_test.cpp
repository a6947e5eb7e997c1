// Denied-request events (--events redis-stream) in a real Redis Stream: content, order, the
// MAXLEN cap, and drops counted while the stream's Redis is unreachable.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "support/free_port.hpp"
#include "support/http_client.hpp"
#include "support/redis_server.hpp"
#include "support/sluice_process.hpp"
#include "support/wait.hpp"

namespace sluice::test {
namespace {

using Fields = std::map<std::string, std::string>;

// The seed's login limit (5 per client), counted per day instead of per minute: the tests
// expect exactly 5 answers allowed, then denials, and a minute window rolling over in the
// middle of a test allows 5 more (a slow run straddles a minute boundary far more often than
// midnight, which eventsSidecar() also keeps away from).
constexpr const char* kDailyLoginRules = R"(domain: auth
descriptors:
  - key: auth_type
    value: login
    rate_limit:
      unit: day
      requests_per_unit: 5
)";

/// A sidecar with `args` and the daily login limit, started at least a minute before
/// midnight UTC (no test here takes that long).
SluiceOptions eventsSidecar(std::vector<std::string> args) {
  awayFromWindowBoundary(std::chrono::hours(24), std::chrono::seconds(60));
  return withRules({{"auth.yaml", kDailyLoginRules}}, std::move(args));
}

std::string login(const std::string& client) {
  return R"({"domain":"auth","clientId":")" + client +
         R"(","descriptors":[{"entries":[{"key":"auth_type","value":"login"}]}]})";
}

/// XRANGE stream - + as (id, fields) in stream order.
std::vector<std::pair<std::string, Fields>> readStream(RedisServer& redis,
                                                       const std::string& stream) {
  ReplyPtr reply = redis.command({"XRANGE", stream, "-", "+"});
  std::vector<std::pair<std::string, Fields>> out;
  if (!reply || reply->type != REDIS_REPLY_ARRAY) {
    return out;
  }
  for (std::size_t i = 0; i < reply->elements; ++i) {
    const redisReply* entry = reply->element[i];
    Fields fields;
    const redisReply* kv = entry->element[1];
    for (std::size_t j = 0; j + 1 < kv->elements; j += 2) {
      fields[std::string(kv->element[j]->str, kv->element[j]->len)] =
          std::string(kv->element[j + 1]->str, kv->element[j + 1]->len);
    }
    out.emplace_back(std::string(entry->element[0]->str, entry->element[0]->len),
                     std::move(fields));
  }
  return out;
}

/// Polls until the stream holds `n` entries (events are written off the request path).
std::vector<std::pair<std::string, Fields>> waitForEntries(RedisServer& redis,
                                                           const std::string& stream,
                                                           std::size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto entries = readStream(redis, stream);
  while (entries.size() < n && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    entries = readStream(redis, stream);
  }
  return entries;
}

std::int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST(EventsStreamTest, DenialsArriveInTheStreamInOrder) {
  RedisServer redis;
  SluiceProcess sluice(
      eventsSidecar({"--threads", "2", "--events", "redis-stream", "--events-redis", redis.url(),
                     "--events-stream", "test:denials"}));
  HttpClient client = sluice.client();
  const std::int64_t started = nowMs();
  std::vector<std::string> denied_clients;
  // 5 allowed each, then denials interleaved in a known order.
  for (const char* who : {"alice", "bob", "carol"}) {
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(client.post("/shouldAllowRequest", login(who)).status, 200);
    }
  }
  for (const char* who : {"bob", "alice", "carol", "alice", "bob", "bob"}) {
    ASSERT_EQ(client.post("/shouldAllowRequest", login(who)).status, 429);
    denied_clients.push_back(who);
  }
  auto entries = waitForEntries(redis, "test:denials", denied_clients.size());
  ASSERT_EQ(entries.size(), denied_clients.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Fields& f = entries[i].second;
    EXPECT_EQ(f.at("client"), denied_clients[i]) << i;
    EXPECT_EQ(f.at("domain"), "auth");
    EXPECT_EQ(f.at("descriptor"), "auth_type=login");
    EXPECT_EQ(f.at("rule"), "auth.auth_type_login");
    const std::int64_t t = std::stoll(f.at("time"));
    EXPECT_GE(t, started - 1000);
    EXPECT_LE(t, nowMs() + 1000);
    if (i > 0) {
      EXPECT_GE(t, std::stoll(entries[i - 1].second.at("time")));
    }
  }
  // The counter follows the batch's replies, a moment after the entries are visible.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::string metrics = client.get("/metrics").body;
  while (metrics.find("sluice_events_published_total 6\n") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    metrics = client.get("/metrics").body;
  }
  EXPECT_NE(metrics.find("sluice_events_published_total 6\n"), std::string::npos) << metrics;
}

TEST(EventsStreamTest, DefaultsToTheStoresRedisAndStreamName) {
  RedisServer redis;
  SluiceProcess sluice(eventsSidecar({"--threads", "1", "--store", "redis", "--redis", redis.url(),
                                      "--events", "redis-stream", "--redis-timeout-ms", "1000"}));
  // The store connects after /healthz answers; decide only once it has (else failure mode
  // `open` would allow the 6th request).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (sluice.log().find("store redis health: connecting -> healthy") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  HttpClient client = sluice.client();
  for (int i = 0; i < 6; ++i) {
    client.post("/shouldAllowRequest", login("erin"));
  }
  auto entries = waitForEntries(redis, "sluice:denials", 1);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].second.at("client"), "erin");
}

TEST(EventsStreamTest, MaxLenCapsTheStream) {
  RedisServer redis;
  SluiceProcess sluice(eventsSidecar({"--threads", "1", "--events", "redis-stream",
                                      "--events-redis", redis.url(), "--events-maxlen", "10"}));
  HttpClient client = sluice.client();
  constexpr int kDenials = 300;
  for (int i = 0; i < 5 + kDenials; ++i) {
    client.post("/shouldAllowRequest", login("flood"));
  }
  // Wait for every event to be written, then check the approximate trim took effect.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (client.get("/metrics")
                 .body.find("sluice_events_published_total " + std::to_string(kDenials) + "\n") ==
             std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ReplyPtr len = redis.command({"XLEN", "sluice:denials"});
  ASSERT_EQ(len->type, REDIS_REPLY_INTEGER);
  EXPECT_GE(len->integer, 10);
  EXPECT_LT(len->integer, kDenials);  // MAXLEN ~ trims whole stream nodes (100 entries)
}

TEST(EventsStreamTest, UnreachableRedisDropsEventsWithoutDelayingDecisions) {
  // Held bound, not listening: every connection is refused, and no server started by a test
  // running in parallel can take the port (one run saw events written, or not refused,
  // when the port was only free a moment before).
  const RefusingPort closed;
  SluiceProcess sluice(
      eventsSidecar({"--threads", "1", "--events", "redis-stream", "--events-redis",
                     "redis://127.0.0.1:" + std::to_string(closed.port()) + "/0"}));
  HttpClient client("127.0.0.1", sluice.port(), std::chrono::milliseconds(2000));
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(client.post("/shouldAllowRequest", login("gus")).status, 200);
  }
  constexpr int kDenials = 20;
  for (int i = 0; i < kDenials; ++i) {
    ASSERT_EQ(client.post("/shouldAllowRequest", login("gus")).status, 429);
  }
  const std::string dropped = R"(sluice_events_dropped_total{reason="redis_unavailable"} )" +
                              std::to_string(kDenials) + "\n";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string body = client.get("/metrics").body;
  while (body.find(dropped) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    body = client.get("/metrics").body;
  }
  EXPECT_NE(body.find(dropped), std::string::npos) << body;
  EXPECT_NE(body.find(R"(sluice_events_dropped_total{reason="queue_full"} 0)"), std::string::npos);
  // The outage is logged once, not per event.
  const std::string log = sluice.log();
  const auto first = log.find("events: cannot connect");
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find("events: cannot connect", first + 1), std::string::npos) << log;
}

// The event writer is a blocking hiredis client on a thread of its own, with a 1 s deadline
// per round trip. This Redis answers every XADD with a reply that never ends (one byte every
// 50 ms), so no read ever times out by itself: decisions must not wait for the writer, the
// writer must give the round trip up at its deadline, and sluice must stop while the Redis
// is still trickling.
TEST(EventsStreamTest, AHangingRedisDelaysNeitherDecisionsNorShutdown) {
  BlackholeServer hanging(BlackholeServer::Mode::kEndlessReply);
  SluiceProcess sluice(
      eventsSidecar({"--threads", "1", "--events", "redis-stream", "--events-redis", hanging.url(),
                     "--drain-timeout-ms", "1000"}));
  HttpClient client("127.0.0.1", sluice.port(), std::chrono::milliseconds(10'000));
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(client.post("/shouldAllowRequest", login("hank")).status, 200);
  }
  ASSERT_EQ(client.post("/shouldAllowRequest", login("hank")).status, 429);
  // The writer has sent its first XADD and is reading the endless reply.
  ASSERT_TRUE(waitFor([&] { return hanging.clientsThatSpoke() == 1; }, std::chrono::seconds(10)))
      << sluice.log();
  for (int i = 0; i < 200; ++i) {
    ASSERT_EQ(client.post("/shouldAllowRequest", login("hank")).status, 429);
  }
  // 200 denials answered while the writer reads the endless reply. The reply never ends, but
  // bytes keep coming, so no single read times out: the writer gives it up at its deadline
  // for the whole round trip (1 s), drops that batch and says why.
  const std::string dropped_none = "sluice_events_dropped_total{reason=\"redis_unavailable\"} 0\n";
  std::string metrics;
  ASSERT_TRUE(waitFor(
      [&] {
        metrics = client.get("/metrics").body;
        return metrics.find("sluice_events_dropped_total{reason=\"redis_unavailable\"}") !=
                   std::string::npos &&
               metrics.find(dropped_none) == std::string::npos;
      },
      std::chrono::seconds(10)))
      << metrics << sluice.log();
  EXPECT_NE(metrics.find("sluice_events_published_total 0\n"), std::string::npos) << metrics;
  ASSERT_TRUE(waitFor(
      [&] { return sluice.log().find("no complete reply within 1000 ms") != std::string::npos; },
      std::chrono::seconds(10)))
      << sluice.log();
  // Shutdown while the Redis still trickles: each round trip is bounded, so the queue is
  // drained or dropped and sluice exits (a hang would be for good).
  sluice.signal(SIGTERM);
  auto code = sluice.wait(std::chrono::seconds(10));
  ASSERT_TRUE(code.has_value()) << "sluice did not stop with a trickling events Redis";
  EXPECT_EQ(*code, 0);
}

}  // namespace
}  // namespace sluice::test
