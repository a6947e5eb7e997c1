// `consistency: eventual` on `--store redis_cluster`: real `sluice` processes on a real Redis
// Cluster (three masters started by each test).
#include "support/eventual_cluster.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/redis/cluster_slots.hpp"
#include "support/http_client.hpp"
#include "support/load.hpp"
#include "support/redis_cluster.hpp"
#include "support/sluice_process.hpp"
#include "support/wait.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

/// One eventual counter per client (`k`), one eventual sketch (`user`), one strict limit.
std::string clusterRules(std::int64_t limit, std::int64_t sketch_limit = 1'000) {
  return "domain: ev\n"
         "descriptors:\n"
         "  - key: k\n"
         "    rate_limit:\n"
         "      unit: day\n"
         "      requests_per_unit: " +
         std::to_string(limit) +
         "\n"
         "      consistency: eventual\n"
         "  - key: user\n"
         "    rate_limit:\n"
         "      unit: day\n"
         "      requests_per_unit: " +
         std::to_string(sketch_limit) +
         "\n"
         "      algorithm: sketch\n"
         "      sketch: {width: 1024, depth: 3}\n"
         "      consistency: eventual\n"
         "  - key: s\n"
         "    rate_limit:\n"
         "      unit: day\n"
         "      requests_per_unit: 1000\n";
}

std::string request(const std::string& client,
                    const std::vector<std::pair<std::string, std::string>>& entries) {
  json descriptors = json::array();
  for (const auto& [key, value] : entries) {
    descriptors.push_back(json::array({{{"key", key}, {"value", value}}}));
  }
  return json{{"domain", "ev"}, {"clientId", client}, {"descriptors", descriptors}}.dump();
}

/// Waits until the UTC day has at least `margin` left (day windows: no edge mid-test).
void awayFromMidnight(seconds margin = seconds(60)) {
  const std::time_t into_day = std::time(nullptr) % 86'400;
  if (86'400 - into_day < margin.count()) {
    std::this_thread::sleep_for(seconds(86'400 - into_day + 1));
  }
}

SluiceOptions sidecar(const std::string& seeds, const std::string& rules) {
  SluiceOptions o;
  o.rule_files = {{"ev.yaml", rules}};
  // The tests count a few hits on far keys on every master: quiet keys (which keep such hits
  // until their window ends) are off.
  o.args = {"--threads",
            "2",
            "--store",
            "redis_cluster",
            "--redis",
            seeds,
            "--redis-timeout-ms",
            "1000",
            "--failure-mode",
            "closed",
            "--eventual-quiet-keys",
            "false"};
  return o;
}

/// Waits until the sidecar's eventual sync has reached the cluster.
bool waitSynced(SluiceProcess& sluice) {
  return waitFor(
      [&] {
        HttpClient client = sluice.client();
        json r = json::parse(client.get("/readyz").body, nullptr, false);
        return r.is_object() && r["eventual"].is_object() &&
               r["eventual"]["redis_reachable"] == true;
      },
      seconds(20));
}

/// Sum of the sidecars' entries in the eventual hashes of one node (its keys only).
std::int64_t nodeTotal(RedisServer& node, const std::string& pattern = "sluice:*:e*") {
  std::int64_t total = 0;
  ReplyPtr keys = node.command({"KEYS", pattern});
  for (std::size_t i = 0; i < keys->elements; ++i) {
    ReplyPtr fields = node.command({"HGETALL", keys->element[i]->str});
    for (std::size_t j = 0; j + 1 < fields->elements; j += 2) {
      const std::string name = fields->element[j]->str;
      if (!name.empty() && name.front() == 's') {
        total += std::stoll(fields->element[j + 1]->str);
      }
    }
  }
  return total;
}

/// The same over every master of the cluster.
std::int64_t clusterTotal(RedisCluster& cluster, const std::string& pattern = "sluice:*:e*") {
  std::int64_t total = 0;
  for (int port : cluster.masterPorts()) {
    total += nodeTotal(cluster.byPort(port), pattern);
  }
  return total;
}

TEST(EventualClusterTest, ThreeSidecarsOnOneKeyAdmitWithinOnePercentAndEveryMasterIsSynced) {
  awayFromMidnight();
  constexpr std::int64_t kLimit = 10'000;
  RedisCluster cluster(3, 0);
  const std::vector<int> masters = cluster.masterPorts();
  ASSERT_EQ(masters.size(), 3U);
  // Different seeds: no sidecar needs its seed to own the keys it syncs.
  SluiceProcess a(sidecar(cluster.url(0), clusterRules(kLimit)));
  SluiceProcess b(sidecar(cluster.url(1), clusterRules(kLimit)));
  SluiceProcess c(sidecar(cluster.url(2) + "," + cluster.url(0), clusterRules(kLimit)));
  for (SluiceProcess* s : {&a, &b, &c}) {
    ASSERT_TRUE(waitSynced(*s)) << s->log();
  }
  // Far from their limits, clients on every master: decided locally, and each sidecar's sync
  // reaches every master (one call per master, keys of many slots).
  std::vector<std::string> quiet;
  for (int port : masters) {
    for (int i = 0; i < 3; ++i) {
      quiet.push_back(clientOn(cluster, port, "q" + std::to_string(i) + "-"));
    }
  }
  std::int64_t quiet_allowed = 0;
  for (SluiceProcess* s : {&a, &b, &c}) {
    HttpClient client = s->client();
    for (const std::string& id : quiet) {
      for (int i = 0; i < 10; ++i) {
        ASSERT_EQ(client.post("/shouldAllowRequest", request(id, {{"k", "x"}})).status, 200)
            << s->log();
        ++quiet_allowed;
      }
    }
  }
  std::int64_t per_master[3] = {0, 0, 0};
  EXPECT_TRUE(waitFor(
      [&] {
        std::int64_t sum = 0;
        for (std::size_t m = 0; m < masters.size(); ++m) {
          per_master[m] = nodeTotal(cluster.byPort(masters[m]));
          sum += per_master[m];
        }
        return sum == quiet_allowed;
      },
      seconds(10)))
      << per_master[0] << " + " << per_master[1] << " + " << per_master[2] << " in Redis, "
      << quiet_allowed << " admitted\n"
      << a.log();
  for (std::size_t m = 0; m < masters.size(); ++m) {
    EXPECT_EQ(per_master[m], quiet_allowed / 3) << "master " << masters[m];
  }

  // One key hammered by the three sidecars together: within [L, 1.01 L].
  const std::string hammer = clientOn(cluster, masters[1], "hammer");
  const std::int64_t before = clusterTotal(cluster);
  Load load;
  const std::string body = request(hammer, {{"k", "x"}});
  for (SluiceProcess* s : {&a, &b, &c}) {
    load.start(*s, 3, body, (kLimit + 3'000) / 3 / 3);
  }
  load.join();
  EXPECT_EQ(load.other.load(), 0) << a.log();
  EXPECT_GE(load.allowed.load(), kLimit);
  EXPECT_LE(load.allowed.load(), kLimit + kLimit / 100);
  EXPECT_TRUE(
      waitFor([&] { return clusterTotal(cluster) - before == load.allowed.load(); }, seconds(10)))
      << clusterTotal(cluster) - before << " in Redis, " << load.allowed.load() << " admitted";
  // Most decisions were local; near the limit the key went to round trips. Counted over the
  // three sidecars: which of them got there first depends on the scheduler.
  EXPECT_GT(seriesTotal({&a, &b, &c}, "sluice_eventual_local_decisions_total{mode=\"synced\"}"), 0);
  EXPECT_GT(seriesTotal({&a, &b, &c}, "sluice_eventual_round_trips_total{reason=\"tight\"}"), 0);
  RecordProperty("admitted", std::to_string(load.allowed.load()));
}

TEST(EventualClusterTest, ASketchAndACounterInDifferentSlotsAreAllOrNothing) {
  awayFromMidnight();
  RedisCluster cluster(3, 0);
  SluiceProcess a(sidecar(cluster.url(0), clusterRules(1'000, 5)));
  ASSERT_TRUE(waitSynced(a)) << a.log();
  // The sketch's cells share one slot (the rule's tag, {|ske.<4 hex>}); the client's counter
  // is in another (checked below on the keys written).
  const std::string client_id = "mixed";
  HttpClient client = a.client();
  const std::string both = request(client_id, {{"user", "u1"}, {"k", "x"}});
  int allowed = 0;
  for (int i = 0; i < 12; ++i) {
    const HttpResponse r = client.post("/shouldAllowRequest", both);
    ASSERT_TRUE(r.status == 200 || r.status == 429) << r.status << " " << r.body << a.log();
    allowed += r.status == 200 ? 1 : 0;
  }
  // The sketch (5 per day) decides; the counter is charged for the admitted requests only.
  EXPECT_EQ(allowed, 5);
  EXPECT_TRUE(
      waitFor([&] { return clusterTotal(cluster, "sluice:{mixed|ev}*") == 5; }, seconds(10)))
      << clusterTotal(cluster, "sluice:{mixed|ev}*") << "\n"
      << a.log();
  // The client's 3 cells, on the master of the rule's tag, hold the 5 hits each.
  EXPECT_TRUE(
      waitFor([&] { return clusterTotal(cluster, "sluice:{|ske.*") == 3 * 5; }, seconds(10)))
      << clusterTotal(cluster, "sluice:{|ske.*");
  std::set<int> cell_slots;
  for (int port : cluster.masterPorts()) {
    ReplyPtr keys = cluster.byPort(port).command({"KEYS", "sluice:{|ske.*"});
    for (std::size_t i = 0; i < keys->elements; ++i) {
      cell_slots.insert(redis::keyHashSlot(keys->element[i]->str));
    }
  }
  ASSERT_EQ(cell_slots.size(), 1U);
  EXPECT_NE(*cell_slots.begin(), redis::keyHashSlot("{" + client_id + "|ev}"));
  // The seed every sidecar of the cluster shares.
  RedisServer& seed_owner =
      cluster.byPort(cluster.ownerOf(redis::keyHashSlot("sluice:sketch-seed")));
  EXPECT_EQ(seed_owner.command({"GET", "sluice:sketch-seed"})->type, REDIS_REPLY_STRING);
}

TEST(EventualClusterTest, AMasterThatRestartsEmptyGetsItsCountsBack) {
  awayFromMidnight();
  RedisCluster cluster(3, 0);
  const std::vector<int> masters = cluster.masterPorts();
  SluiceProcess a(sidecar(cluster.url(0), clusterRules(1'000)));
  ASSERT_TRUE(waitSynced(a)) << a.log();
  std::vector<std::string> ids;
  for (int port : masters) {
    ids.push_back(clientOn(cluster, port, "r"));
  }
  HttpClient client = a.client();
  for (const std::string& id : ids) {
    for (int i = 0; i < 20; ++i) {
      ASSERT_EQ(client.post("/shouldAllowRequest", request(id, {{"k", "x"}})).status, 200);
    }
  }
  RedisServer& victim = cluster.byPort(masters[2]);
  ASSERT_TRUE(waitFor([&] { return nodeTotal(victim) == 20; }, seconds(10))) << nodeTotal(victim);
  // The master restarts empty (no persistence) with its slots (nodes.conf): the sidecar sees
  // the connection renewed and sends its own counts again.
  victim.stop();
  victim.restart();
  cluster.waitOk(seconds(20));
  EXPECT_TRUE(waitFor([&] { return nodeTotal(victim) == 20; }, seconds(20)))
      << nodeTotal(victim) << "\n"
      << a.log();
  EXPECT_TRUE(waitFor([&] { return clusterTotal(cluster) == 60; }, seconds(10)))
      << clusterTotal(cluster);
  // It kept deciding meanwhile, and does afterwards.
  EXPECT_EQ(client.post("/shouldAllowRequest", request(ids[2], {{"k", "x"}})).status, 200);
}

// One master down: the keys of the others keep their round trips near the limit, so two
// sidecars hammering a key of a healthy master still admit within [L, 1.01 L]; the down
// master's keys are decided locally and keep their hits. The 1 % is docs/eventual.md's bound
// for a steady rate (one that does not more than double within ~200 ms): the load is paced,
// 6 x 250 requests/s (~5 s), not closed-loop. At full speed the rate is the machine's, and
// a slow build's stalls and bursts are steps the margin does not cover (a TSan sluice once
// admitted 5 089 of L = 5 000 that way). Deciding the healthy master's keys locally, the bug
// this test was written for, admits far more at this rate too (R x ~0.1 s ~ 150 over L).
TEST(EventualClusterTest, AMasterDownLeavesTheOtherMastersKeysExact) {
  awayFromMidnight();
  constexpr std::int64_t kLimit = 5'000;
  RedisCluster cluster(3, 0);
  const std::vector<int> masters = cluster.masterPorts();
  // Without a replica to take over, Redis Cluster's default (full coverage) stops every master
  // once the dead one is declared failed (CLUSTERDOWN): then nothing is reachable. With
  // partial coverage the other masters keep serving their slots, the case tested here.
  for (int port : masters) {
    cluster.byPort(port).command({"CONFIG", "SET", "cluster-require-full-coverage", "no"});
  }
  SluiceProcess a(sidecar(cluster.url(0), clusterRules(kLimit)));
  SluiceProcess b(sidecar(cluster.url(1), clusterRules(kLimit)));
  ASSERT_TRUE(waitSynced(a)) << a.log();
  ASSERT_TRUE(waitSynced(b)) << b.log();
  const std::string lost = clientOn(cluster, masters[2], "down");
  cluster.byPort(masters[2]).stop();
  // Both sidecars touch a key of the dead master: its syncs fail, and they say so.
  for (SluiceProcess* s : {&a, &b}) {
    HttpClient client = s->client();
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(client.post("/shouldAllowRequest", request(lost, {{"k", "x"}})).status, 200);
    }
    EXPECT_TRUE(waitFor(
        [&] {
          HttpClient c = s->client();
          json r = json::parse(c.get("/readyz").body, nullptr, false);
          return r.is_object() && r["eventual"]["redis_reachable"] == false;
        },
        seconds(10)))
        << s->log();
  }
  Load load;
  const std::string body = request(clientOn(cluster, masters[0], "alive"), {{"k", "x"}});
  for (SluiceProcess* s : {&a, &b}) {
    load.start(*s, 3, body, (kLimit + 2'000) / 2 / 3, 250);
  }
  load.join();
  RecordProperty("admitted", static_cast<int>(load.allowed.load()));
  EXPECT_EQ(load.other.load(), 0) << a.log();
  EXPECT_GE(load.allowed.load(), kLimit);
  EXPECT_LE(load.allowed.load(), kLimit + kLimit / 100);
  EXPECT_GT(seriesTotal({&a, &b}, "sluice_eventual_round_trips_total{reason=\"tight\"}"), 0);
}

TEST(EventualClusterTest, KeysFollowTheirSlotWhenItMigrates) {
  awayFromMidnight();
  RedisCluster cluster(3, 0);
  const std::vector<int> masters = cluster.masterPorts();
  RedisServer& from = cluster.byPort(masters[0]);
  RedisServer& to = cluster.byPort(masters[1]);
  const std::string id = clientOn(cluster, from.port(), "m");
  const int slot = redis::keyHashSlot(id + "|ev");
  SluiceProcess a(sidecar(cluster.url(2), clusterRules(1'000)));
  ASSERT_TRUE(waitSynced(a)) << a.log();
  HttpClient client = a.client();
  const std::string body = request(id, {{"k", "x"}});
  const std::string pattern = "sluice:{" + id + "|ev}*";
  auto hits = [&](int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(client.post("/shouldAllowRequest", body).status, 200) << a.log();
    }
  };
  hits(10);
  ASSERT_TRUE(waitFor([&] { return nodeTotal(from, pattern) == 10; }, seconds(10)));
  // Keys moved to `to` while the slot is still `from`'s, then the slot itself: the sync's
  // call to `from` (its keys named in the arguments, no MOVED to follow) fails, the topology
  // is read again, and the next syncs go to `to` with the whole own count (cumulative).
  cluster.beginSlotMigration(slot, from, to);
  hits(10);
  cluster.finishSlotMigration(slot, to);
  hits(10);
  EXPECT_TRUE(waitFor([&] { return nodeTotal(to, pattern) == 30; }, seconds(15)))
      << nodeTotal(to, pattern) << " on the new master\n"
      << a.log();
  EXPECT_EQ(client.post("/shouldAllowRequest", body).header("X-Ratelimit-Remaining"), "969");
  RecordProperty("failed_syncs",
                 std::to_string(seriesValue(a, "sluice_eventual_syncs_total{result=\"failed\"}")));
}

}  // namespace
}  // namespace sluice::test
