// `consistency: eventual` across regions whose Redis is a Redis Cluster (`--store
// redis_cluster`, `--regions NAME=cluster:URL+URL...`): real `sluice` processes, real
// three-master clusters started by each test. Each test takes a few seconds (one or two
// clusters to create); the cut-off test restarts a whole cluster (~5 s more).
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "store/redis/cluster_slots.hpp"
#include "support/eventual_cluster.hpp"
#include "support/http_client.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_server.hpp"
#include "support/sluice_process.hpp"
#include "support/wait.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr std::int64_t kLimit = 1'000'000;
constexpr std::int64_t kSketchLimit = 1'000;

/// One eventual counter per client (`k`) and one eventual sketch (`user`), per day.
std::string rules() {
  return "domain: ev\n"
         "descriptors:\n"
         "  - key: k\n"
         "    rate_limit:\n"
         "      unit: day\n"
         "      requests_per_unit: " +
         std::to_string(kLimit) +
         "\n"
         "      consistency: eventual\n"
         "  - key: user\n"
         "    rate_limit:\n"
         "      unit: day\n"
         "      requests_per_unit: " +
         std::to_string(kSketchLimit) +
         "\n"
         "      algorithm: sketch\n"
         "      sketch: {width: 1024, depth: 3}\n"
         "      consistency: eventual\n";
}

std::string request(const std::string& client, const std::string& key = "k",
                    const std::string& value = "x") {
  return json{{"domain", "ev"},
              {"clientId", client},
              {"descriptors", json::array({json::array({{{"key", key}, {"value", value}}})})}}
      .dump();
}

/// Waits until the UTC day has at least a minute left (day windows: no edge mid-test).
void awayFromMidnight() { awayFromWindowBoundary(std::chrono::hours(24), seconds(60)); }

/// `--regions` value of a region that is `cluster`: two of its nodes as seeds.
std::string clusterRegion(const std::string& name, RedisCluster& cluster) {
  return name + "=cluster:" + cluster.url(0) + "+" + cluster.url(1);
}

/// A sidecar of region `region` on its own Redis (`store`: redis or redis_cluster, `redis`:
/// its --redis) with the other regions `regions`.
SluiceOptions sidecar(const std::string& region, const std::string& store, const std::string& redis,
                      const std::string& regions) {
  SluiceOptions o;
  o.rule_files = {{"ev.yaml", rules()}};
  o.args = {"--threads", "2", "--store", store, "--redis", redis, "--region", region, "--regions",
            regions, "--redis-timeout-ms", "1000", "--failure-mode", "closed",
            // The tests count a few hits on far keys in every region: quiet keys (which keep
            // such hits until their window ends) are off.
            "--eventual-quiet-keys", "false"};
  return o;
}

json readyz(SluiceProcess& sluice) {
  try {
    HttpClient client = sluice.client();
    return json::parse(client.get("/readyz").body, nullptr, false);
  } catch (const std::exception& e) {
    return json();
  }
}

/// Waits until the sidecar's sync reaches its own Redis and its link to region `other` is up.
bool waitLinked(SluiceProcess& sluice, const std::string& other) {
  return waitFor(
      [&] {
        json r = readyz(sluice);
        return r.is_object() && r["eventual"].is_object() &&
               r["eventual"]["redis_reachable"] == true &&
               r["eventual"]["regions"][other]["reachable"] == true;
      },
      seconds(20));
}

/// Sum over the eventual hashes of `node` matching `pattern` of the fields `which` accepts.
std::int64_t sumFields(RedisServer& node, const std::function<bool(const std::string&)>& which,
                       const std::string& pattern) {
  std::int64_t total = 0;
  ReplyPtr keys = node.command({"KEYS", pattern});
  for (std::size_t i = 0; i < keys->elements; ++i) {
    ReplyPtr fields = node.command({"HGETALL", keys->element[i]->str});
    for (std::size_t j = 0; j + 1 < fields->elements; j += 2) {
      if (which(fields->element[j]->str)) {
        total += std::stoll(fields->element[j + 1]->str);
      }
    }
  }
  return total;
}

/// This region's own count in `node`: its sidecars' fields (`s<id>`).
std::int64_t ownTotal(RedisServer& node, const std::string& pattern = "sluice:*:e*") {
  return sumFields(
      node, [](const std::string& f) { return !f.empty() && f.front() == 's'; }, pattern);
}

/// Region `region`'s counter in `node` (field `r<region>`).
std::int64_t regionTotal(RedisServer& node, const std::string& region,
                         const std::string& pattern = "sluice:*:e*") {
  return sumFields(
      node, [&](const std::string& f) { return f == "r" + region; }, pattern);
}

/// The same over every master of a cluster (`field` empty: the own count).
std::int64_t clusterSum(RedisCluster& cluster, const std::string& region,
                        const std::string& pattern = "sluice:*:e*") {
  std::int64_t total = 0;
  for (int port : cluster.masterPorts()) {
    RedisServer& node = cluster.byPort(port);
    total += region.empty() ? ownTotal(node, pattern) : regionTotal(node, region, pattern);
  }
  return total;
}

/// Sends `n` requests (each must be allowed).
void hit(SluiceProcess& sluice, const std::string& body, int n) {
  HttpClient client = sluice.client();
  for (int i = 0; i < n; ++i) {
    const HttpResponse r = client.post("/shouldAllowRequest", body);
    ASSERT_EQ(r.status, 200) << r.body << "\n" << sluice.log();
  }
}

/// Waits until `sluice` decides `body` on a count of `total` hits besides its own probes:
/// each probe is one more hit, so the remaining count says what the sidecar has read.
bool waitDecidesOn(SluiceProcess& sluice, const std::string& body, std::int64_t limit,
                   std::int64_t& total) {
  HttpClient client = sluice.client();
  std::int64_t seen = -1;
  const bool ok = waitFor(
      [&] {
        const HttpResponse r = client.post("/shouldAllowRequest", body);
        ++total;
        const std::string remaining = r.header("X-Ratelimit-Remaining");
        if (r.status != 200 || remaining.empty()) {
          return false;
        }
        seen = limit - std::stoll(remaining);
        return seen == total;
      },
      seconds(10));
  if (!ok) {
    ADD_FAILURE() << "decides on " << seen << " hits, " << total << " admitted";
  }
  return ok;
}

/// Two regions, each a three-master cluster with one sidecar.
struct TwoClusterRegions {
  TwoClusterRegions()
      : cluster_a(3, 0),
        cluster_b(3, 0),
        a(sidecar("a", "redis_cluster", cluster_a.url(0) + "," + cluster_a.url(2),
                  clusterRegion("b", cluster_b))),
        b(sidecar("b", "redis_cluster", cluster_b.url(1), clusterRegion("a", cluster_a))) {}
  RedisCluster cluster_a;
  RedisCluster cluster_b;
  SluiceProcess a;
  SluiceProcess b;
};

// Two cluster regions: hits on clients of every master in both regions end up, in each
// region's cluster, on the master of the key's slot: the own sidecars' fields and the other
// region's counter, the exact global count; and each sidecar decides on it.
TEST(EventualRegionsClusterTest, TwoClusterRegionsConvergeToTheGlobalCountInBoth) {
  awayFromMidnight();
  TwoClusterRegions regions;
  ASSERT_TRUE(waitLinked(regions.a, "b")) << readyz(regions.a).dump() << regions.a.log();
  ASSERT_TRUE(waitLinked(regions.b, "a")) << readyz(regions.b).dump() << regions.b.log();
  const std::vector<int> masters_b = regions.cluster_b.masterPorts();
  ASSERT_EQ(masters_b.size(), 3U);
  std::vector<std::string> clients;
  for (int port : masters_b) {
    clients.push_back(clientOn(regions.cluster_b, port, "g"));
  }
  for (const std::string& id : clients) {
    hit(regions.a, request(id), 10);
    hit(regions.b, request(id), 7);
  }
  // Region b's cluster: each master holds its client's 7 own hits and a's 10.
  for (std::size_t m = 0; m < masters_b.size(); ++m) {
    RedisServer& node = regions.cluster_b.byPort(masters_b[m]);
    EXPECT_TRUE(
        waitFor([&] { return ownTotal(node) == 7 && regionTotal(node, "a") == 10; }, seconds(10)))
        << "master " << masters_b[m] << ": own " << ownTotal(node) << ", ra "
        << regionTotal(node, "a") << "\n"
        << regions.a.log();
  }
  // Region a's cluster: the same, the other way round.
  EXPECT_TRUE(waitFor(
      [&] {
        return clusterSum(regions.cluster_a, "") == 30 && clusterSum(regions.cluster_a, "b") == 21;
      },
      seconds(10)))
      << clusterSum(regions.cluster_a, "") << " own, " << clusterSum(regions.cluster_a, "b")
      << " from b\n"
      << regions.b.log();
  for (int port : regions.cluster_a.masterPorts()) {
    RedisServer& node = regions.cluster_a.byPort(port);
    EXPECT_EQ(ownTotal(node), 10) << "master " << port;
    EXPECT_EQ(regionTotal(node, "b"), 7) << "master " << port;
  }
  // Each sidecar decides on the global count (17 per client, plus its probes).
  std::int64_t total = 17;
  EXPECT_TRUE(waitDecidesOn(regions.a, request(clients[0]), kLimit, total));
  EXPECT_TRUE(waitDecidesOn(regions.b, request(clients[0]), kLimit, total));
}

// Mixed: region a is one redis-server, region b a cluster; each names the other in its
// --regions. Then a slot of b's cluster moves to another master: a's replication to the
// old master fails ("non local key"), the topology is read again, and the next replication
// brings a's whole count to the new master.
TEST(EventualRegionsClusterTest, ASingleRedisRegionAndAClusterRegionReplicateBothWays) {
  awayFromMidnight();
  RedisServer redis_a;
  RedisCluster cluster_b(3, 0);
  SluiceProcess a(sidecar("a", "redis", redis_a.url(), clusterRegion("b", cluster_b)));
  SluiceProcess b(sidecar("b", "redis_cluster", cluster_b.url(2), "a=" + redis_a.url()));
  ASSERT_TRUE(waitLinked(a, "b")) << readyz(a).dump() << a.log();
  ASSERT_TRUE(waitLinked(b, "a")) << readyz(b).dump() << b.log();
  const std::vector<int> masters = cluster_b.masterPorts();
  std::vector<std::string> clients;
  for (int port : masters) {
    clients.push_back(clientOn(cluster_b, port, "m"));
  }
  for (const std::string& id : clients) {
    hit(a, request(id), 10);
    hit(b, request(id), 7);
  }
  for (int port : masters) {
    RedisServer& node = cluster_b.byPort(port);
    EXPECT_TRUE(
        waitFor([&] { return ownTotal(node) == 7 && regionTotal(node, "a") == 10; }, seconds(10)))
        << "master " << port << ": own " << ownTotal(node) << ", ra " << regionTotal(node, "a")
        << "\n"
        << a.log();
  }
  EXPECT_TRUE(waitFor([&] { return ownTotal(redis_a) == 30 && regionTotal(redis_a, "b") == 21; },
                      seconds(10)))
      << ownTotal(redis_a) << " own, " << regionTotal(redis_a, "b") << " from b\n"
      << b.log();

  // The slot of clients[0] moves from masters[0] to masters[1] while region a sends.
  RedisServer& from = cluster_b.byPort(masters[0]);
  RedisServer& to = cluster_b.byPort(masters[1]);
  const int slot = redis::keyHashSlot(clients[0] + "|ev");
  const std::string pattern = "sluice:{" + clients[0] + "|ev}*";
  cluster_b.beginSlotMigration(slot, from, to);
  hit(a, request(clients[0]), 5);
  cluster_b.finishSlotMigration(slot, to);
  hit(a, request(clients[0]), 5);
  EXPECT_TRUE(waitFor([&] { return regionTotal(to, "a", pattern) == 20; }, seconds(15)))
      << regionTotal(to, "a", pattern) << " on the new master, " << regionTotal(from, "a", pattern)
      << " on the old one\n"
      << a.log();
  EXPECT_EQ(ownTotal(to, pattern), 7);
  // And region b decides on it: 27 hits, plus its probes.
  std::int64_t total = 27;
  EXPECT_TRUE(waitDecidesOn(b, request(clients[0]), kLimit, total));
  // How often a's replication to b failed meanwhile (the call to the old master, typically).
  RecordProperty(
      "region_b_unreachable",
      std::to_string(seriesValue(a, "sluice_eventual_region_unreachable_total{region=\"b\"}")));
}

// Region b's whole cluster goes down: region a keeps serving from its own cluster, says
// region b is unreachable with a growing lag, and region b's sidecar keeps deciding locally.
// When b's cluster comes back (empty: no persistence), both regions' counts converge in both
// clusters.
TEST(EventualRegionsClusterTest, AClusterRegionCutOffKeepsServingAndConvergesWhenItReturns) {
  awayFromMidnight();
  TwoClusterRegions regions;
  SluiceProcess& a = regions.a;
  SluiceProcess& b = regions.b;
  ASSERT_TRUE(waitLinked(a, "b")) << readyz(a).dump() << a.log();
  ASSERT_TRUE(waitLinked(b, "a")) << readyz(b).dump() << b.log();
  const std::string id = "cut";
  hit(a, request(id), 30);
  hit(b, request(id), 20);
  ASSERT_TRUE(waitFor([&] { return clusterSum(regions.cluster_b, "a") == 30; }, seconds(10)))
      << clusterSum(regions.cluster_b, "a");
  ASSERT_TRUE(waitFor([&] { return clusterSum(regions.cluster_a, "b") == 20; }, seconds(10)))
      << clusterSum(regions.cluster_a, "b");

  for (auto& node : regions.cluster_b.nodes()) {
    node->stop();
  }
  // Both keep serving: a from its own cluster, b from its views (its Redis is gone).
  hit(a, request(id), 40);
  hit(b, request(id), 15);
  EXPECT_TRUE(waitFor(
      [&] {
        json r = readyz(a);
        return r.is_object() && r["eventual"]["regions"]["b"]["reachable"] == false &&
               r["eventual"]["regions"]["b"]["lag_seconds"].get<double>() > 0;
      },
      seconds(10)))
      << readyz(a).dump();
  EXPECT_EQ(readyz(a)["eventual"]["redis_reachable"], true);
  EXPECT_GE(seriesValue(a, "sluice_eventual_region_unreachable_total{region=\"b\"}"), 1);
  EXPECT_GT(seriesValue(a, "sluice_eventual_replication_lag_seconds{region=\"b\"}"), 0);
  EXPECT_TRUE(
      waitFor([&] { return readyz(b)["eventual"]["redis_reachable"] == false; }, seconds(10)))
      << readyz(b).dump();
  hit(a, request(id), 10);

  // b's cluster returns, empty: a sends every value again (its connection was renewed), and
  // b's sidecar its own counts.
  for (auto& node : regions.cluster_b.nodes()) {
    node->restart();
  }
  regions.cluster_b.waitOk(seconds(20));
  const auto back = std::chrono::steady_clock::now();
  EXPECT_TRUE(waitFor(
      [&] {
        return clusterSum(regions.cluster_b, "a") == 80 && clusterSum(regions.cluster_b, "") == 35;
      },
      seconds(15)))
      << clusterSum(regions.cluster_b, "a") << " from a, " << clusterSum(regions.cluster_b, "")
      << " own\n"
      << a.log() << b.log();
  EXPECT_TRUE(waitFor([&] { return clusterSum(regions.cluster_a, "b") == 35; }, seconds(10)))
      << clusterSum(regions.cluster_a, "b");
  // From every node of b answering cluster_state:ok to both clusters holding every count.
  RecordProperty("convergence_ms",
                 static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now() - back)
                                      .count()));
  EXPECT_EQ(clusterSum(regions.cluster_a, ""), 80);
  EXPECT_TRUE(waitLinked(a, "b")) << readyz(a).dump();
  EXPECT_TRUE(waitLinked(b, "a")) << readyz(b).dump();
  std::int64_t total = 115;
  EXPECT_TRUE(waitDecidesOn(b, request(id), kLimit, total));
  EXPECT_TRUE(waitDecidesOn(a, request(id), kLimit, total));
}

// One eventual sketch client used in two cluster regions: the seed lives in region a's
// cluster (a sorts first), so both regions name the client's cells alike; each region's
// cells reach the other's cluster as its entries, and each decides on the sum.
TEST(EventualRegionsClusterTest, ASketchClientIsCountedTogetherAcrossClusterRegions) {
  awayFromMidnight();
  TwoClusterRegions regions;
  ASSERT_TRUE(waitLinked(regions.a, "b")) << readyz(regions.a).dump() << regions.a.log();
  ASSERT_TRUE(waitLinked(regions.b, "a")) << readyz(regions.b).dump() << regions.b.log();
  const std::string body = request("sk", "user", "u1");
  hit(regions.a, body, 30);
  hit(regions.b, body, 20);
  const std::string cells = "sluice:{|ske.*";
  EXPECT_TRUE(
      waitFor([&] { return clusterSum(regions.cluster_b, "a", cells) == 3 * 30; }, seconds(10)))
      << clusterSum(regions.cluster_b, "a", cells) << "\n"
      << regions.a.log();
  EXPECT_TRUE(
      waitFor([&] { return clusterSum(regions.cluster_a, "b", cells) == 3 * 20; }, seconds(10)))
      << clusterSum(regions.cluster_a, "b", cells) << "\n"
      << regions.b.log();
  EXPECT_EQ(clusterSum(regions.cluster_a, "", cells), 3 * 30);
  EXPECT_EQ(clusterSum(regions.cluster_b, "", cells), 3 * 20);
  // One seed, in region a's cluster: b never set its own.
  int seeds_a = 0;
  for (int port : regions.cluster_a.masterPorts()) {
    seeds_a += regions.cluster_a.byPort(port).command({"EXISTS", "sluice:sketch-seed"})->integer;
  }
  int seeds_b = 0;
  for (int port : regions.cluster_b.masterPorts()) {
    seeds_b += regions.cluster_b.byPort(port).command({"EXISTS", "sluice:sketch-seed"})->integer;
  }
  EXPECT_EQ(seeds_a, 1);
  EXPECT_EQ(seeds_b, 0);
  // Both decide on the 50 hits together.
  std::int64_t total = 50;
  EXPECT_TRUE(waitDecidesOn(regions.b, body, kSketchLimit, total));
  EXPECT_TRUE(waitDecidesOn(regions.a, body, kSketchLimit, total));
}

}  // namespace
}  // namespace sluice::test
