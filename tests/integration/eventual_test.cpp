// `consistency: eventual` end to end: real `sluice` processes sharing real redis-servers.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "support/fault_proxy.hpp"
#include "support/http_client.hpp"
#include "support/load.hpp"
#include "support/redis_server.hpp"
#include "support/sluice_process.hpp"
#include "support/wait.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

/// Rules with one eventual limit of `limit` per day (no window edge during a test: see
/// awayFromMidnight) and a strict one for mixed requests.
std::string eventualRules(std::int64_t limit, const std::string& algorithm = "fixed_window") {
  return "domain: ev\n"
         "descriptors:\n"
         "  - key: k\n"
         "    value: shared\n"
         "    rate_limit:\n"
         "      unit: day\n"
         "      requests_per_unit: " +
         std::to_string(limit) +
         "\n"
         "      algorithm: " +
         algorithm +
         "\n"
         "      consistency: eventual\n"
         "  - key: s\n"
         "    value: strict\n"
         "    rate_limit:\n"
         "      unit: day\n"
         "      requests_per_unit: 1\n";
}

std::string request(const std::string& client, const std::string& key = "k",
                    const std::string& value = "shared") {
  return json{{"domain", "ev"},
              {"clientId", client},
              {"descriptors", json::array({json::array({{{"key", key}, {"value", value}}})})}}
      .dump();
}

/// Waits until the UTC day has at least `margin` left, so that a day window cannot end
/// during the test (at most `margin` of waiting, once a day).
void awayFromMidnight(seconds margin = seconds(60)) {
  const std::time_t now = std::time(nullptr);
  const std::time_t into_day = now % 86'400;
  if (86'400 - into_day < margin.count()) {
    std::this_thread::sleep_for(seconds(86'400 - into_day + 1));
  }
}

SluiceOptions sidecar(const RedisServer& redis, const std::string& rules,
                      std::vector<std::string> extra = {}) {
  SluiceOptions o;
  o.rule_files = {{"ev.yaml", rules}};
  o.args = {"--threads",
            "2",
            "--store",
            "redis",
            "--redis",
            redis.url(),
            "--failure-mode",
            "closed",
            "--redis-timeout-ms",
            "1000"};
  o.args.insert(o.args.end(), extra.begin(), extra.end());
  return o;
}

json readyz(SluiceProcess& sluice) {
  try {
    HttpClient client = sluice.client();
    return json::parse(client.get("/readyz").body, nullptr, false);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "GET /readyz: " << e.what() << "\n" << sluice.log();
    return json();
  }
}

/// Waits until the sidecar's eventual sync has reached its Redis.
bool waitSynced(SluiceProcess& sluice) {
  return waitFor(
      [&] {
        json r = readyz(sluice);
        return r.is_object() && r["eventual"].is_object() &&
               r["eventual"]["redis_reachable"] == true;
      },
      seconds(10));
}

/// Sum of every counter entry of the eventual hashes in `redis` (all windows).
std::int64_t redisTotal(RedisServer& redis) {
  std::int64_t total = 0;
  ReplyPtr keys = redis.command({"KEYS", "sluice:*:e*"});
  for (std::size_t i = 0; i < keys->elements; ++i) {
    ReplyPtr fields = redis.command({"HGETALL", keys->element[i]->str});
    for (std::size_t j = 0; j + 1 < fields->elements; j += 2) {
      const std::string name = fields->element[j]->str;
      if (!name.empty() && name.front() != '_' && name.front() != 'r') {
        total += std::stoll(fields->element[j + 1]->str);
      }
    }
  }
  return total;
}

TEST(EventualTest, ThreeSidecarsAtFullSpeedOnOneKeyAdmitWithinOnePercent) {
  awayFromMidnight();
  constexpr std::int64_t kLimit = 20'000;
  RedisServer redis;
  SluiceProcess a(sidecar(redis, eventualRules(kLimit)));
  SluiceProcess b(sidecar(redis, eventualRules(kLimit)));
  SluiceProcess c(sidecar(redis, eventualRules(kLimit)));
  for (SluiceProcess* s : {&a, &b, &c}) {
    ASSERT_TRUE(waitSynced(*s)) << s->log();
  }
  // Every sidecar sends until it has seen 1'000 denials: they all keep pushing well past
  // the limit, from their own views.
  Load load;
  const std::string body = request("hammer");
  for (SluiceProcess* s : {&a, &b, &c}) {
    load.start(*s, 3, body, (kLimit + 3'000) / 3 / 3);
  }
  load.join();
  EXPECT_EQ(load.other.load(), 0) << a.log();
  EXPECT_GE(load.allowed.load(), kLimit);
  EXPECT_LE(load.allowed.load(), kLimit + kLimit / 100);
  // Every admitted hit reaches Redis (within a few sync intervals).
  EXPECT_TRUE(waitFor([&] { return redisTotal(redis) == load.allowed.load(); }, seconds(5)))
      << redisTotal(redis) << " in Redis, " << load.allowed.load() << " admitted";
  HttpClient client = a.client();
  const std::string metrics = client.get("/metrics").body;
  EXPECT_NE(metrics.find("sluice_eventual_local_decisions_total{mode=\"synced\"}"),
            std::string::npos);
}

/// Rules with one eventual sketch limit of `limit` per day per `user`.
std::string sketchRules(std::int64_t limit) {
  return "domain: ev\n"
         "descriptors:\n"
         "  - key: user\n"
         "    rate_limit:\n"
         "      unit: day\n"
         "      requests_per_unit: " +
         std::to_string(limit) +
         "\n"
         "      algorithm: sketch\n"
         "      sketch: {width: 1024, depth: 3}\n"
         "      consistency: eventual\n"
         "  - key: s\n"
         "    value: strict\n"
         "    rate_limit:\n"
         "      unit: day\n"
         "      requests_per_unit: 1\n";
}

TEST(EventualTest, ThreeSidecarsHammeringOneSketchClientAdmitWithinOnePercent) {
  awayFromMidnight();
  constexpr std::int64_t kLimit = 20'000;
  RedisServer redis;
  SluiceProcess a(sidecar(redis, sketchRules(kLimit)));
  SluiceProcess b(sidecar(redis, sketchRules(kLimit)));
  SluiceProcess c(sidecar(redis, sketchRules(kLimit)));
  for (SluiceProcess* s : {&a, &b, &c}) {
    ASSERT_TRUE(waitSynced(*s)) << s->log();
  }
  // One client alone in its cells: the sketch's over-count is 0, so the bound is the
  // counters' [L, 1.01 L].
  Load load;
  const std::string body = request("hammer", "user", "hammer");
  for (SluiceProcess* s : {&a, &b, &c}) {
    load.start(*s, 3, body, (kLimit + 3'000) / 3 / 3);
  }
  load.join();
  EXPECT_EQ(load.other.load(), 0) << a.log();
  EXPECT_GE(load.allowed.load(), kLimit);
  EXPECT_LE(load.allowed.load(), kLimit + kLimit / 100);
  // The three sidecars hashed the client to the same 3 cells (the seed in Redis), and every
  // admitted hit reaches each of them: 3 cells x the admitted count.
  ReplyPtr seed = redis.command({"GET", "sluice:sketch-seed"});
  ASSERT_EQ(seed->type, REDIS_REPLY_STRING);
  EXPECT_TRUE(waitFor([&] { return redisTotal(redis) == 3 * load.allowed.load(); }, seconds(5)))
      << redisTotal(redis) << " in Redis, " << load.allowed.load() << " admitted";
  ReplyPtr keys = redis.command({"KEYS", "sluice:*"});
  std::vector<std::string> cells;
  std::string names;
  for (std::size_t i = 0; i < keys->elements; ++i) {
    const std::string name = keys->element[i]->str;
    names += name + " ";
    if (name.starts_with("sluice:{|ske.")) {
      cells.push_back(name);
    }
  }
  EXPECT_EQ(cells.size(), 3U) << names;
  // Another client of the rule is counted apart (its own cells; a collision could only
  // make it deny earlier, and with 1 024 columns and 3 rows it shares at most one).
  HttpClient client = a.client();
  EXPECT_EQ(client.post("/shouldAllowRequest", request("other", "user", "other")).status, 200);
  // Most decisions were local; near the limit the client went to round trips. Counted over the
  // three sidecars: which of them got there first depends on the scheduler (one starved
  // sidecar may learn from a sync that the client is over its limit and deny locally).
  const double local =
      seriesTotal({&a, &b, &c}, "sluice_eventual_local_decisions_total{mode=\"synced\"}");
  const double tight =
      seriesTotal({&a, &b, &c}, "sluice_eventual_round_trips_total{reason=\"tight\"}");
  EXPECT_GT(local, 0) << a.log();
  EXPECT_GT(tight, 0) << a.log();
  RecordProperty("admitted", std::to_string(load.allowed.load()));
  RecordProperty("local_decisions", std::to_string(static_cast<std::int64_t>(local)));
  RecordProperty("tight_round_trips", std::to_string(static_cast<std::int64_t>(tight)));
}

TEST(EventualTest, AMixedRequestWithASketchIsAllOrNothing) {
  awayFromMidnight();
  RedisServer redis;
  SluiceProcess a(sidecar(redis, sketchRules(100)));
  ASSERT_TRUE(waitSynced(a)) << a.log();
  HttpClient client = a.client();
  const std::string both =
      json{{"domain", "ev"},
           {"clientId", "mixed"},
           {"descriptors", json::array({json::array({{{"key", "user"}, {"value", "mixed"}}}),
                                        json::array({{{"key", "s"}, {"value", "strict"}}})})}}
          .dump();
  HttpResponse first = client.post("/shouldAllowRequest", both);
  ASSERT_EQ(first.status, 200) << first.body << a.log();
  // The strict limit (1 per day) denies: the sketch's cells must not be charged.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(client.post("/shouldAllowRequest", both).status, 429);
  }
  HttpResponse r = client.post("/shouldAllowRequest", request("mixed", "user", "mixed"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("X-Ratelimit-Remaining"), "98") << r.body;
  // Both admitted hits reach the client's 3 cells in Redis.
  EXPECT_TRUE(waitFor([&] { return redisTotal(redis) == 3 * 2; }, seconds(5))) << redisTotal(redis);
}

TEST(EventualTest, FarFromTheLimitDecisionsAreLocal) {
  RedisServer redis;
  // Quiet keys off: every hit reaches Redis within a second (QuietKeys... below: on).
  SluiceProcess a(sidecar(redis, eventualRules(1'000'000), {"--eventual-quiet-keys", "false"}));
  ASSERT_TRUE(waitSynced(a)) << a.log();
  HttpClient client = a.client();
  for (int i = 0; i < 200; ++i) {
    ASSERT_EQ(client.post("/shouldAllowRequest", request("far")).status, 200);
  }
  // No round trip at all: the new key's first hits are within its blind allowance (0.1 % of
  // 1 000 000), and the sync that follows reads it.
  const std::string metrics = client.get("/metrics").body;
  EXPECT_NE(metrics.find("sluice_eventual_round_trips_total{reason=\"unknown\"} 0\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("sluice_eventual_local_decisions_total{mode=\"synced\"} 200\n"),
            std::string::npos)
      << metrics;
  EXPECT_TRUE(waitFor([&] { return redisTotal(redis) == 200; }, seconds(5))) << redisTotal(redis);
}

// Quiet keys (the default): a key far from its limit keeps its few hits until its window
// ends; past its blind allowance (0.1 % of L) they go out.
TEST(EventualTest, AQuietKeysHitsStayOutOfRedisUntilTheyPassItsBlindAllowance) {
  awayFromMidnight();
  RedisServer redis;
  // A second eventual limit, of 100 a day: no blind allowance, so each of its hits goes out
  // with the next sync (the marker that syncs ran).
  SluiceProcess a(sidecar(redis, eventualRules(1'000'000) + "  - key: m\n"
                                                            "    rate_limit:\n"
                                                            "      unit: day\n"
                                                            "      requests_per_unit: 100\n"
                                                            "      consistency: eventual\n"));
  ASSERT_TRUE(waitSynced(a)) << a.log();
  HttpClient client = a.client();
  for (int i = 0; i < 200; ++i) {
    ASSERT_EQ(client.post("/shouldAllowRequest", request("quiet")).status, 200);
  }
  // For longer than a view takes to go stale (1 s: a key that is not quiet is sent and read
  // again by then), marker hits go out sync after sync; the quiet key's stay here.
  const auto start = std::chrono::steady_clock::now();
  std::int64_t markers = 0;
  while (std::chrono::steady_clock::now() - start < milliseconds(1'500) && markers < 100) {
    ASSERT_EQ(client.post("/shouldAllowRequest", request("marker", "m", "x")).status, 200);
    ++markers;
    ASSERT_TRUE(waitFor([&] { return redisTotal(redis) >= markers; }, seconds(5)));
  }
  EXPECT_EQ(redisTotal(redis), markers);
  EXPECT_TRUE(waitFor([&] { return readyz(a)["eventual"]["pending_hits"] == 200; }, seconds(5)))
      << readyz(a).dump();
  // Kept on purpose, they are no sync lag (which counts from the last sync Redis confirmed,
  // at most an interval or two ago).
  const std::string metrics = client.get("/metrics").body;
  const std::string lag = "\nsluice_eventual_sync_lag_seconds ";
  const std::size_t at = metrics.find(lag);
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_LT(std::stod(metrics.substr(at + lag.size())), 0.5) << metrics;
  // 1 100 hits: past the allowance of 1 000 they go out (and the rest, within it, waits again).
  for (int i = 0; i < 900; ++i) {
    ASSERT_EQ(client.post("/shouldAllowRequest", request("quiet")).status, 200);
  }
  EXPECT_TRUE(waitFor([&] { return redisTotal(redis) - markers > 1'000; }, seconds(5)))
      << redisTotal(redis);
  EXPECT_TRUE(waitFor(
      [&] {
        return readyz(a)["eventual"]["pending_hits"].get<std::int64_t>() ==
               1'100 - (redisTotal(redis) - markers);
      },
      seconds(5)))
      << readyz(a).dump();
}

TEST(EventualTest, AMixedRequestIsAllOrNothing) {
  awayFromMidnight();
  RedisServer redis;
  SluiceProcess a(sidecar(redis, eventualRules(100)));
  ASSERT_TRUE(waitSynced(a)) << a.log();
  HttpClient client = a.client();
  const std::string both =
      json{{"domain", "ev"},
           {"clientId", "mixed"},
           {"descriptors", json::array({json::array({{{"key", "k"}, {"value", "shared"}}}),
                                        json::array({{{"key", "s"}, {"value", "strict"}}})})}}
          .dump();
  EXPECT_EQ(client.post("/shouldAllowRequest", both).status, 200);
  // The strict limit (1 per day) denies: the eventual limit must not be charged.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(client.post("/shouldAllowRequest", both).status, 429);
  }
  HttpResponse r = client.post("/shouldAllowRequest", request("mixed"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("X-Ratelimit-Remaining"), "98") << r.body;
}

/// Quota-mode rules: eventual and strict quota descriptors with small daily limits.
std::string quotaRules() {
  std::string rules = "domain: ev\ndescriptors:\n";
  for (const auto& [key, limit, consistency] :
       std::vector<std::tuple<std::string, int, std::string>>{{"e2", 2, "eventual"},
                                                              {"s5", 5, "strict"},
                                                              {"e5", 5, "eventual"},
                                                              {"s2", 2, "strict"},
                                                              {"e1", 1, "eventual"},
                                                              {"e3", 3, "eventual"}}) {
    rules += "  - key: " + key +
             "\n    quota_mode: true\n    rate_limit:\n      unit: day\n"
             "      requests_per_unit: " +
             std::to_string(limit) + "\n      consistency: " + consistency + "\n";
  }
  return rules;
}

std::string quotaRequest(const std::string& client, const std::vector<std::string>& keys) {
  json descriptors = json::array();
  for (const std::string& key : keys) {
    descriptors.push_back(json::array({{{"key", key}, {"value", "v"}}}));
  }
  return json{{"domain", "ev"}, {"clientId", client}, {"descriptors", descriptors}}.dump();
}

// Quota mode across a request's strict and eventual limits decides as if all were strict:
// the request passes while one quota descriptor has room, and only what allowed is charged.
TEST(EventualTest, QuotaModeSpansStrictAndEventualLimits) {
  awayFromMidnight();
  RedisServer redis;
  SluiceProcess a(sidecar(redis, quotaRules()));
  ASSERT_TRUE(waitSynced(a)) << a.log();
  HttpClient client = a.client();
  // e2 (eventual, 2) with s5 (strict, 5), then e5 (eventual, 5) with s2 (strict, 2): either
  // way 5 requests pass (the larger quota), the 6th is denied.
  for (const auto& keys : {std::vector<std::string>{"e2", "s5"}, {"e5", "s2"}}) {
    std::vector<int> statuses;
    for (int i = 0; i < 7; ++i) {
      statuses.push_back(client.post("/shouldAllowRequest", quotaRequest("q", keys)).status);
    }
    EXPECT_EQ(statuses, (std::vector<int>{200, 200, 200, 200, 200, 429, 429}))
        << keys[0] << "+" << keys[1] << "\n"
        << a.log();
  }
  // The limits that denied were not charged past their limit, those that allowed were: a
  // request on each alone sees what is left.
  auto remaining = [&](const std::string& key) {
    HttpResponse r = client.post("/shouldAllowRequest", quotaRequest("q", {key}));
    return r.header("X-Ratelimit-Remaining");
  };
  EXPECT_EQ(remaining("s2"), "0");
  EXPECT_EQ(remaining("s5"), "0");
}

// A pure eventual quota request decided by a round trip (a key not read yet) follows quota
// semantics in the script: e1 is used up, e3 still has room, so the request passes and only
// e3 is charged.
TEST(EventualTest, QuotaModeInARoundTripDecision) {
  awayFromMidnight();
  RedisServer redis;
  SluiceProcess a(sidecar(redis, quotaRules()));
  ASSERT_TRUE(waitSynced(a)) << a.log();
  HttpClient client = a.client();
  auto unknownTrips = [&] {
    const std::string metrics = client.get("/metrics").body;
    const std::string name = "sluice_eventual_round_trips_total{reason=\"unknown\"} ";
    const std::size_t at = metrics.find(name);
    return at == std::string::npos ? -1 : std::stoll(metrics.substr(at + name.size()));
  };
  // This connection's I/O thread may still be connecting to Redis (then it decides locally,
  // degraded): wait until a new key is read by a round trip.
  int warm = 0;
  ASSERT_TRUE(waitFor(
      [&] {
        const std::int64_t before = unknownTrips();
        client.post("/shouldAllowRequest", quotaRequest("warm" + std::to_string(warm++), {"e5"}));
        return unknownTrips() > before;
      },
      seconds(10)))
      << a.log();
  const std::int64_t trips = unknownTrips();
  ASSERT_EQ(client.post("/shouldAllowRequest", quotaRequest("r", {"e1"})).status, 200);
  // e1 is known (and full), e3 never read: the request goes to Redis, op decide.
  HttpResponse r = client.post("/shouldAllowRequest", quotaRequest("r", {"e1", "e3"}));
  EXPECT_EQ(r.status, 200) << r.body << "\n" << a.log();
  EXPECT_EQ(unknownTrips(), trips + 2) << "e1, then e3 are read by round trips";
  HttpResponse e3 = client.post("/shouldAllowRequest", quotaRequest("r", {"e3"}));
  EXPECT_EQ(e3.status, 200);
  EXPECT_EQ(e3.header("X-Ratelimit-Remaining"), "1") << e3.body;
}

// count_rejected eventual limits record the attempt when a mixed request is denied, by the
// strict half or by the eventual half, as on a store of strict limits only.
TEST(EventualTest, CountRejectedEventualLimitsRecordDeniedMixedRequests) {
  awayFromMidnight();
  const std::string rules =
      "domain: ev\n"
      "descriptors:\n"
      "  - key: c\n"
      "    rate_limit: {unit: day, requests_per_unit: 5, consistency: eventual, "
      "count_rejected: true}\n"
      "  - key: s\n"
      "    rate_limit: {unit: day, requests_per_unit: 1}\n";
  RedisServer redis;
  SluiceProcess a(sidecar(redis, rules));
  ASSERT_TRUE(waitSynced(a)) << a.log();
  HttpClient client = a.client();
  const std::string both = quotaRequest("cr", {"c", "s"});
  EXPECT_EQ(client.post("/shouldAllowRequest", both).status, 200);
  // Denied by the strict limit: c records each attempt (2, 3).
  EXPECT_EQ(client.post("/shouldAllowRequest", both).status, 429);
  EXPECT_EQ(client.post("/shouldAllowRequest", both).status, 429);
  HttpResponse r = client.post("/shouldAllowRequest", quotaRequest("cr", {"c"}));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("X-Ratelimit-Remaining"), "1") << r.body;
  // c allows once more (5), then denies by itself (6, 7 recorded too).
  EXPECT_EQ(client.post("/shouldAllowRequest", quotaRequest("cr", {"c"})).status, 200);
  EXPECT_EQ(client.post("/shouldAllowRequest", both).status, 429);
  EXPECT_EQ(client.post("/shouldAllowRequest", both).status, 429);
  EXPECT_TRUE(waitFor([&] { return redisTotal(redis) == 7; }, seconds(5)))
      << redisTotal(redis) << " hits of c in Redis\n"
      << a.log();
}

TEST(EventualTest, RedisRestartMidLoadKeepsDecidingAndLosesNoHits) {
  awayFromMidnight();
  RedisServer redis;
  // Quiet keys off: the test finds every admitted hit in Redis (a quiet key's, up to its blind
  // allowance of 10 000 here, stay in the sidecar).
  const std::vector<std::string> every_hit{"--eventual-quiet-keys", "false"};
  SluiceProcess a(sidecar(redis, eventualRules(10'000'000), every_hit));
  SluiceProcess b(sidecar(redis, eventualRules(10'000'000), every_hit));
  ASSERT_TRUE(waitSynced(a)) << a.log();
  ASSERT_TRUE(waitSynced(b)) << b.log();
  Load load;
  const std::string body = request("restart");
  load.start(a, 2, body);
  load.start(b, 2, body);
  ASSERT_TRUE(waitFor([&] { return load.allowed.load() > 2'000; }, seconds(20)));
  redis.stop();
  // Both keep deciding locally, say so in /readyz, and keep their hits.
  EXPECT_TRUE(waitFor(
      [&] {
        json r = readyz(a);
        return r.is_object() && r["eventual"]["deciding_locally"] == true &&
               r["eventual"]["pending_hits"].get<std::int64_t>() > 0;
      },
      seconds(5)))
      << readyz(a).dump();
  const std::int64_t before = load.allowed.load();
  ASSERT_TRUE(waitFor([&] { return load.allowed.load() > before + 2'000; }, seconds(20)));
  redis.restart();
  EXPECT_TRUE(
      waitFor([&] { return readyz(a)["eventual"]["redis_reachable"] == true; }, seconds(5)));
  const std::int64_t after = load.allowed.load();
  ASSERT_TRUE(waitFor([&] { return load.allowed.load() > after + 2'000; }, seconds(20)));
  load.stop = true;
  load.join();
  EXPECT_EQ(load.other.load(), 0);
  EXPECT_EQ(load.denied.load(), 0);
  // Cumulative counts: everything admitted before, during and after the outage is in Redis.
  EXPECT_TRUE(waitFor([&] { return redisTotal(redis) == load.allowed.load(); }, seconds(5)))
      << redisTotal(redis) << " in Redis, " << load.allowed.load() << " admitted";
}

TEST(EventualTest, AnIdleKeysHitsSurviveARedisRestart) {
  awayFromMidnight();
  RedisServer redis;
  // Quiet keys off: its 50 hits go out (a quiet key's stay in the sidecar, Redis or not).
  SluiceProcess a(sidecar(redis, eventualRules(1'000'000), {"--eventual-quiet-keys", "false"}));
  ASSERT_TRUE(waitSynced(a)) << a.log();
  HttpClient client = a.client();
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(client.post("/shouldAllowRequest", request("idle")).status, 200);
  }
  ASSERT_TRUE(waitFor([&] { return redisTotal(redis) == 50; }, seconds(5))) << redisTotal(redis);
  // Redis restarts empty; the key is not used again, yet its count comes back with the first
  // sync on the new connection.
  redis.stop();
  redis.restart();
  EXPECT_TRUE(waitFor([&] { return redisTotal(redis) == 50; }, seconds(10)))
      << redisTotal(redis) << "\n"
      << a.log();
}

TEST(EventualTest, AnEventualSketchsCellsComeBackAfterARedisRestart) {
  awayFromMidnight();
  RedisServer redis;
  SluiceProcess a(sidecar(redis, sketchRules(1'000'000)));
  ASSERT_TRUE(waitSynced(a)) << a.log();
  HttpClient client = a.client();
  for (int i = 0; i < 40; ++i) {
    ASSERT_EQ(client.post("/shouldAllowRequest", request("sk", "user", "restart")).status, 200);
  }
  // The client's 3 cells hold its 40 hits each.
  ASSERT_TRUE(waitFor([&] { return redisTotal(redis) == 3 * 40; }, seconds(5)))
      << redisTotal(redis);
  // Redis restarts empty (the seed included): the cells' own counts come back with the first
  // sync on the new connection, and the sidecar keeps the seed it read (the same cells).
  redis.stop();
  redis.restart();
  EXPECT_TRUE(waitFor([&] { return redisTotal(redis) == 3 * 40; }, seconds(10)))
      << redisTotal(redis) << "\n"
      << a.log();
  HttpResponse r = client.post("/shouldAllowRequest", request("sk", "user", "restart"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("X-Ratelimit-Remaining"), "999959") << r.body;
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

/// Value of field `field` summed over the eventual hashes of `redis` (0 when absent).
std::int64_t fieldTotal(RedisServer& redis, const std::string& field) {
  std::int64_t total = 0;
  ReplyPtr keys = redis.command({"KEYS", "sluice:*:e*"});
  for (std::size_t i = 0; i < keys->elements; ++i) {
    ReplyPtr value = redis.command({"HGET", keys->element[i]->str, field});
    if (value->type == REDIS_REPLY_STRING) {
      total += std::stoll(value->str);
    }
  }
  return total;
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// Two regions, each with its own redis-server and one sidecar; each region reaches the
/// other's Redis through a FaultProxy adding `link` (50 ms by default) to every reply.
struct TwoRegions {
  explicit TwoRegions(std::int64_t limit, std::vector<std::string> extra = {},
                      milliseconds link = milliseconds(50))
      : TwoRegions(eventualRules(limit), std::move(extra), link) {}
  TwoRegions(const std::string& rules, std::vector<std::string> extra,
             milliseconds link = milliseconds(50))
      : to_a(redis_a.port()),
        to_b(redis_b.port()),
        a(sidecar(redis_a, rules, with(extra, {"--region", "a", "--regions", "b=" + to_b.url()}))),
        b(sidecar(redis_b, rules, with(extra, {"--region", "b", "--regions", "a=" + to_a.url()}))) {
    to_a.setLatency(link);
    to_b.setLatency(link);
  }
  RedisServer redis_a;
  RedisServer redis_b;
  FaultProxy to_a;
  FaultProxy to_b;
  SluiceProcess a;
  SluiceProcess b;
};

// One shared limit hammered from both regions at once: the admitted total lies in
// [L, 1.01 L]. Across regions the error is bounded by regions x rate x D (docs/eventual.md;
// D ~ 2 sync intervals + the link's round trip), so the test fixes the offered rate (2 000
// requests/s per region, 2 threads each; a full-speed rate would depend on the machine) and
// syncs every 20 ms: D ~ 0.1 s, 2 x 2 000 x 0.1 = 400 hits <= 1 % of L = 40 000.
// Takes ~10 s (L / 4 000 requests per second).
TEST(EventualRegionsTest, BothRegionsHammeringOneLimitAdmitWithinOnePercent) {
  awayFromMidnight();
  constexpr std::int64_t kLimit = 40'000;
  TwoRegions regions(kLimit, {"--sync-interval", "20ms"});
  ASSERT_TRUE(waitSynced(regions.a)) << regions.a.log();
  ASSERT_TRUE(waitSynced(regions.b)) << regions.b.log();
  Load load;
  const std::string body = request("regions-hammer");
  // Together the regions offer 15 % more than the limit.
  const std::int64_t per_thread = kLimit * 115 / 100 / 4;
  load.start(regions.a, 2, body, per_thread, 1'000);
  load.start(regions.b, 2, body, per_thread, 1'000);
  load.join();
  EXPECT_EQ(load.other.load(), 0) << regions.a.log() << regions.b.log();
  EXPECT_GE(load.allowed.load(), kLimit);
  EXPECT_LE(load.allowed.load(), kLimit + kLimit / 100);
  // Each Redis ends up with the other region's counter: a's Redis holds the whole count.
  EXPECT_TRUE(waitFor(
      [&] {
        return fieldTotal(regions.redis_a, "rb") + redisTotal(regions.redis_a) ==
               load.allowed.load();
      },
      seconds(10)))
      << fieldTotal(regions.redis_a, "rb") << " + " << redisTotal(regions.redis_a) << " vs "
      << load.allowed.load();
}

/// Both regions hammer one limit of L = 1 000 per day at full speed (4 connections each, as
/// fast as the sidecars answer: thousands of requests per second, so rate x delay is many
/// times L) through a link of `link`, until the admitted total has not moved for 2 s. Near the
/// limit each region holds at most 1 % of L that the other has not confirmed
/// (docs/eventual.md, "Regions: each region's share near the limit"), so the admitted total
/// lies in [L, 1.01 L] whatever the rate and the delay. Records the admitted total and when L
/// was reached (the price of the share: the last hits wait for confirmations).
void hammerBothRegionsAtFullSpeed(milliseconds link) {
  awayFromMidnight();
  constexpr std::int64_t kLimit = 1'000;
  TwoRegions regions(kLimit, {}, link);
  ASSERT_TRUE(waitSynced(regions.a)) << regions.a.log();
  ASSERT_TRUE(waitSynced(regions.b)) << regions.b.log();
  // Each sidecar has reached the other region's Redis once (replication connected).
  for (SluiceProcess* s : {&regions.a, &regions.b}) {
    const std::string other = s == &regions.a ? "b" : "a";
    ASSERT_TRUE(waitFor(
        [&] {
          json r = readyz(*s);
          return r.is_object() && r["eventual"]["regions"][other]["reachable"] == true;
        },
        seconds(10)))
        << readyz(*s).dump();
  }
  Load in_a;
  Load in_b;
  const std::string body = request("regions-full-speed");
  const auto begin = std::chrono::steady_clock::now();
  in_a.start(regions.a, 4, body);
  in_b.start(regions.b, 4, body);
  auto admitted = [&] { return in_a.allowed.load() + in_b.allowed.load(); };
  std::int64_t last = -1;
  auto last_change = begin;
  std::int64_t reached_ms = -1;
  while (std::chrono::steady_clock::now() - begin < seconds(90)) {
    std::this_thread::sleep_for(milliseconds(20));
    const auto now = std::chrono::steady_clock::now();
    const std::int64_t total = admitted();
    if (reached_ms < 0 && total >= kLimit) {
      reached_ms = std::chrono::duration_cast<milliseconds>(now - begin).count();
    }
    if (total != last) {
      last = total;
      last_change = now;
    } else if (total >= kLimit && now - last_change > seconds(2)) {
      break;
    }
  }
  in_a.stop = true;
  in_b.stop = true;
  in_a.join();
  in_b.join();
  const std::int64_t total = admitted();
  const std::int64_t requests = total + in_a.denied.load() + in_b.denied.load();
  EXPECT_EQ(in_a.other.load() + in_b.other.load(), 0) << regions.a.log() << regions.b.log();
  EXPECT_GE(total, kLimit);
  EXPECT_LE(total, kLimit + kLimit / 100);
  ::testing::Test::RecordProperty("admitted", static_cast<int>(total));
  ::testing::Test::RecordProperty("admitted_a", static_cast<int>(in_a.allowed.load()));
  ::testing::Test::RecordProperty("limit_reached_ms", static_cast<int>(reached_ms));
  ::testing::Test::RecordProperty("requests", static_cast<int>(requests));
  std::printf(
      "link %lld ms: admitted %lld of %lld (a %lld, b %lld), L reached after %lld ms, "
      "%lld requests\n",
      static_cast<long long>(link.count()), static_cast<long long>(total),
      static_cast<long long>(kLimit), static_cast<long long>(in_a.allowed.load()),
      static_cast<long long>(in_b.allowed.load()), static_cast<long long>(reached_ms),
      static_cast<long long>(requests));
  // Each Redis ends up with the whole count.
  EXPECT_TRUE(waitFor(
      [&] { return fieldTotal(regions.redis_a, "rb") + redisTotal(regions.redis_a) == total; },
      seconds(10)))
      << fieldTotal(regions.redis_a, "rb") << " + " << redisTotal(regions.redis_a) << " vs "
      << total;
}

TEST(EventualRegionsTest, BothRegionsAtFullSpeedThrough50msAdmitWithinOnePercent) {
  hammerBothRegionsAtFullSpeed(milliseconds(50));
}

TEST(EventualRegionsTest, BothRegionsAtFullSpeedThrough200msAdmitWithinOnePercent) {
  hammerBothRegionsAtFullSpeed(milliseconds(200));
}

// A sketch client used in both regions: each region's cells reach the other's Redis as
// that region's entries (`r<region>`), and each region decides on the sum.
TEST(EventualRegionsTest, BothRegionsCountOneSketchClientTogether) {
  awayFromMidnight();
  TwoRegions regions(sketchRules(1'000), {});
  ASSERT_TRUE(waitSynced(regions.a)) << regions.a.log();
  ASSERT_TRUE(waitSynced(regions.b)) << regions.b.log();
  // b reads the seed from a's Redis (region "a" sorts first) once its link to a is up.
  ASSERT_TRUE(waitFor(
      [&] {
        json r = readyz(regions.b);
        return r.is_object() && r["eventual"]["regions"]["a"]["reachable"] == true;
      },
      seconds(10)))
      << readyz(regions.b).dump();
  HttpClient ca = regions.a.client();
  HttpClient cb = regions.b.client();
  const std::string body = request("sk", "user", "both");
  for (int i = 0; i < 30; ++i) {
    ASSERT_EQ(ca.post("/shouldAllowRequest", body).status, 200) << regions.a.log();
  }
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(cb.post("/shouldAllowRequest", body).status, 200) << regions.b.log();
  }
  // Each region has its own seed (its own Redis), so its own cells: the other region's count
  // arrives in the cells of the replicating region's seed, d = 3 of them per client.
  EXPECT_TRUE(waitFor([&] { return fieldTotal(regions.redis_b, "ra") == 3 * 30; }, seconds(10)))
      << fieldTotal(regions.redis_b, "ra");
  EXPECT_TRUE(waitFor([&] { return fieldTotal(regions.redis_a, "rb") == 3 * 20; }, seconds(10)))
      << fieldTotal(regions.redis_a, "rb");
  // b decides on the shared count: 50 hits, its next one leaves 1000 - 51.
  EXPECT_TRUE(waitFor(
      [&] {
        HttpResponse r = cb.post("/shouldAllowRequest", body);
        return r.status == 200 && !r.header("X-Ratelimit-Remaining").empty() &&
               std::stoll(r.header("X-Ratelimit-Remaining")) <= 1'000 - 51;
      },
      seconds(10)));
}

/// Region a serves while cut off from b by `cut(on)` on both proxies, and both regions
/// converge when the link returns. Returns how long b's Redis took to get a's full count
/// after the link returned.
milliseconds cutAndReturn(const std::function<void(FaultProxy&, bool)>& cut) {
  awayFromMidnight();
  // Quiet keys off: the regions' few hits on a far key go out, to be replicated.
  TwoRegions regions(1'000'000, {"--eventual-quiet-keys", "false"});
  SluiceProcess& a = regions.a;
  SluiceProcess& b = regions.b;
  EXPECT_TRUE(waitSynced(a)) << a.log();
  EXPECT_TRUE(waitSynced(b)) << b.log();
  HttpClient ca = a.client();
  HttpClient cb = b.client();
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(ca.post("/shouldAllowRequest", request("regions")).status, 200);
  }
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(cb.post("/shouldAllowRequest", request("regions")).status, 200);
  }
  // Each region's Redis holds the other's counter: one shared count of 50.
  EXPECT_TRUE(waitFor([&] { return fieldTotal(regions.redis_b, "ra") == 30; }, seconds(5)));
  EXPECT_TRUE(waitFor([&] { return fieldTotal(regions.redis_a, "rb") == 20; }, seconds(5)));
  // And b decides on the shared count: its remaining says it has seen a's 30.
  int b_hits = 20;
  EXPECT_TRUE(waitFor(
      [&] {
        HttpResponse r = cb.post("/shouldAllowRequest", request("regions"));
        ++b_hits;
        const std::int64_t seen_from_a =
            1'000'000 - std::stoll(r.header("X-Ratelimit-Remaining")) - b_hits;
        return seen_from_a == 30;
      },
      seconds(5)));

  // Cut the link: region a keeps serving from its own Redis and its last values.
  cut(regions.to_a, true);
  cut(regions.to_b, true);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(ca.post("/shouldAllowRequest", request("regions")).status, 200);
  }
  EXPECT_TRUE(waitFor([&] { return readyz(a)["eventual"]["regions"]["b"]["reachable"] == false; },
                      seconds(10)))
      << readyz(a).dump();
  EXPECT_EQ(fieldTotal(regions.redis_b, "ra"), 30);
  EXPECT_TRUE(waitFor(
      [&] { return readyz(a)["eventual"]["regions"]["b"]["lag_seconds"].get<double>() > 0; },
      seconds(5)))
      << readyz(a).dump();

  // The link returns: b's Redis gets a's 70.
  cut(regions.to_a, false);
  cut(regions.to_b, false);
  const auto returned = std::chrono::steady_clock::now();
  EXPECT_TRUE(waitFor([&] { return fieldTotal(regions.redis_b, "ra") == 70; }, seconds(10)))
      << fieldTotal(regions.redis_b, "ra");
  const auto took =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - returned);
  EXPECT_TRUE(waitFor([&] { return readyz(a)["eventual"]["regions"]["b"]["reachable"] == true; },
                      seconds(5)))
      << readyz(a).dump();
  return took;
}

// A black-holed link (FaultProxy::setBlackhole: no FIN, no RST, every byte dropped), as in a
// partition that drops packets. The dead connection is found by its request deadline before
// it is reopened, so convergence takes longer than two sync intervals after the link
// returns (0.9 s measured); the test waits for it (10 s deadline) and records the time.
TEST(EventualRegionsTest, ARegionBlackHoledKeepsServingAndBothConvergeWhenItReturns) {
  const milliseconds took = cutAndReturn([](FaultProxy& p, bool on) { p.setBlackhole(on); });
  RecordProperty("convergence_ms", static_cast<int>(took.count()));
}

// A closed link (FaultProxy::setRefuse: every connection reset, every new one refused), as
// when the other region's Redis or its load balancer is down. The connection is retried
// within one sync interval; the bound of docs/eventual.md is two sync intervals (100 ms) plus
// the 50 ms link once it is back (0.1-0.5 s measured); the test waits for it (10 s deadline)
// and records the time.
TEST(EventualRegionsTest, ARegionWithItsLinkClosedKeepsServingAndBothConvergeWhenItReturns) {
  const milliseconds took = cutAndReturn([](FaultProxy& p, bool on) { p.setRefuse(on); });
  RecordProperty("convergence_ms", static_cast<int>(took.count()));
}

}  // namespace
}  // namespace sluice::test
