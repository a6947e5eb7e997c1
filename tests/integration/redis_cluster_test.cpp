// Real `sluice` processes on a real Redis Cluster started by each test (--store redis_cluster).
#include "support/redis_cluster.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/redis/cluster_slots.hpp"
#include "support/http_client.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr int kLimit = 5;

const char* const kClusterRules = R"(domain: cl
descriptors:
  - key: k
    rate_limit:
      unit: day
      requests_per_unit: 5
  - key: multi
    value: tight
    rate_limit:
      unit: day
      requests_per_unit: 1
  - key: multi
    value: loose
    rate_limit:
      unit: day
      requests_per_unit: 10
)";

// Exactness, not latency: a generous deadline so that a loaded machine does not turn
// answers into 503s (a call past its deadline may still have been counted).
SluiceOptions sidecar(const std::string& seeds) {
  SluiceOptions o;
  o.rule_files = {{"cl.yaml", kClusterRules}};
  o.args = {"--threads",          "2",    "--store",        "redis_cluster", "--redis", seeds,
            "--redis-timeout-ms", "1000", "--failure-mode", "closed"};
  return o;
}

std::string request(const std::string& client) {
  return json{{"domain", "cl"},
              {"clientId", client},
              {"descriptors", json::array({json::array({{{"key", "k"}, {"value", "x"}}})})}}
      .dump();
}

bool waitReady(SluiceProcess& sluice, std::chrono::seconds timeout = std::chrono::seconds(10)) {
  HttpClient client = sluice.client();
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (client.get("/readyz").status == 200) {
      return true;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

/// A client id whose bucket keys (hash-tagged with "id|cl") live in a slot that the master
/// on `port` serves.
std::string clientOn(RedisCluster& cluster, int port, const std::string& prefix) {
  for (int i = 0; i < 10'000; ++i) {
    std::string id = prefix + std::to_string(i);
    if (cluster.ownerOf(redis::keyHashSlot(id + "|cl")) == port) {
      return id;
    }
  }
  throw std::runtime_error("no client id on port " + std::to_string(port));
}

TEST(RedisClusterTest, TwoSidecarsAdmitExactlyTheLimitForClientsOnEveryMaster) {
  RedisCluster cluster(3, 0);
  // Different seeds: neither sidecar needs its seed to own the keys it serves.
  SluiceProcess a(sidecar(cluster.url(0)));
  SluiceProcess b(sidecar(cluster.url(1) + "," + cluster.url(2)));
  ASSERT_TRUE(waitReady(a)) << a.log();
  ASSERT_TRUE(waitReady(b)) << b.log();

  constexpr int kClients = 12;
  std::set<int> masters_used;
  for (int c = 0; c < kClients; ++c) {
    masters_used.insert(cluster.ownerOf(redis::keyHashSlot("c" + std::to_string(c) + "|cl")));
  }
  ASSERT_EQ(masters_used.size(), 3u) << "the clients' keys must span every master";

  constexpr int kPerClient = 3 * kLimit;
  std::atomic<int> next{0}, other{0};
  std::mutex mutex;
  std::map<int, int> allowed, denied;
  std::vector<std::thread> threads;
  for (SluiceProcess* sluice : {&a, &b}) {
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, sluice] {
        HttpClient client = sluice->client();
        for (int i = next.fetch_add(1); i < kClients * kPerClient; i = next.fetch_add(1)) {
          const int c = i % kClients;
          HttpResponse r = client.post("/shouldAllowRequest", request("c" + std::to_string(c)));
          std::lock_guard lock(mutex);
          if (r.status == 200) {
            ++allowed[c];
          } else if (r.status == 429) {
            ++denied[c];
          } else {
            ++other;
          }
        }
      });
    }
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(other.load(), 0) << a.log() << b.log();
  for (int c = 0; c < kClients; ++c) {
    EXPECT_EQ(allowed[c], kLimit) << "client c" << c;
    EXPECT_EQ(denied[c], kPerClient - kLimit) << "client c" << c;
  }
}

TEST(RedisClusterTest, AMultiLimitRequestWithoutAClientIsAllOrNothingOnOneSlot) {
  RedisCluster cluster(3, 0);
  SluiceProcess a(sidecar(cluster.url(0)));
  SluiceProcess b(sidecar(cluster.url(2)));
  ASSERT_TRUE(waitReady(a)) << a.log();
  ASSERT_TRUE(waitReady(b)) << b.log();
  auto descriptor = [](const char* value) {
    return json::array({{{"key", "multi"}, {"value", value}}});
  };
  const std::string both =
      json{{"domain", "cl"},
           {"descriptors", json::array({descriptor("tight"), descriptor("loose")})}}
          .dump();
  const std::string loose =
      json{{"domain", "cl"}, {"descriptors", json::array({descriptor("loose")})}}.dump();
  HttpClient ca = a.client();
  HttpClient cb = b.client();
  HttpResponse first = ca.post("/shouldAllowRequest", both);
  ASSERT_EQ(first.status, 200) << first.body << a.log();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(cb.post("/shouldAllowRequest", both).status, 429);
  }
  HttpResponse r = ca.post("/shouldAllowRequest", loose);
  ASSERT_EQ(r.status, 200) << r.body;
  // 10 - the first request - this one: the five denied requests charged nothing.
  EXPECT_EQ(r.header("X-Ratelimit-Remaining"), "8") << r.body;
}

TEST(RedisClusterTest, FollowsAskDuringASlotMigrationAndMovedAfterIt) {
  RedisCluster cluster(3, 0);
  const std::vector<int> masters = cluster.masterPorts();
  RedisServer& from = cluster.byPort(masters[0]);
  RedisServer& to = cluster.byPort(masters[1]);
  const std::string client = clientOn(cluster, from.port(), "m");
  const int slot = redis::keyHashSlot(client + "|cl");
  SluiceProcess sluice(sidecar(cluster.url(2)));
  ASSERT_TRUE(waitReady(sluice)) << sluice.log();
  HttpClient http = sluice.client();
  auto remaining = [&] {
    HttpResponse r = http.post("/shouldAllowRequest", request(client));
    return r.status == 200 ? r.header("X-Ratelimit-Remaining") : std::to_string(-r.status);
  };
  EXPECT_EQ(remaining(), "4");
  EXPECT_EQ(remaining(), "3");

  // The bucket now lives on `to` while the slot is still `from`'s: `from` answers ASK.
  cluster.beginSlotMigration(slot, from, to);
  EXPECT_EQ(remaining(), "2") << sluice.log();
  EXPECT_GE(familyTotal(sluice, "sluice_redis_cluster_redirects_total", "kind=\"ask\""), 1);
  EXPECT_EQ(familyTotal(sluice, "sluice_redis_cluster_redirects_total", "kind=\"moved\""), 0);

  // The slot is `to`'s: `from` answers MOVED, and the sidecar's map follows.
  cluster.finishSlotMigration(slot, to);
  EXPECT_EQ(remaining(), "1") << sluice.log();
  EXPECT_GE(familyTotal(sluice, "sluice_redis_cluster_redirects_total", "kind=\"moved\""), 1);
  EXPECT_EQ(remaining(), "0");
  EXPECT_EQ(remaining(), "-429");
  EXPECT_EQ(familyTotal(sluice, "sluice_store_errors_total"), 0) << sluice.log();
}

TEST(RedisClusterTest, SurvivesAManualFailoverAndAKilledMaster) {
  RedisCluster cluster(3, 1);
  const int first_master = cluster.masterPorts()[0];
  const std::string client = clientOn(cluster, first_master, "f");
  const int slot = redis::keyHashSlot(client + "|cl");
  SluiceProcess sluice(sidecar(cluster.url(1)));
  ASSERT_TRUE(waitReady(sluice)) << sluice.log();
  HttpClient http = sluice.client();
  auto post = [&] { return http.post("/shouldAllowRequest", request(client)); };
  EXPECT_EQ(post().header("X-Ratelimit-Remaining"), "4");

  // Manual failover: the replica takes over without losing a write; the old master
  // answers MOVED and the sidecar follows without a single failed request.
  const int promoted = cluster.replicaOf(first_master);
  ASSERT_GT(promoted, 0);
  cluster.byPort(promoted).command({"CLUSTER", "FAILOVER"});
  cluster.waitOk(std::chrono::seconds(15), slot, promoted);
  ASSERT_EQ(cluster.ownerOf(slot), promoted);
  HttpResponse after_manual = post();
  EXPECT_EQ(after_manual.status, 200) << after_manual.body << sluice.log();
  EXPECT_EQ(after_manual.header("X-Ratelimit-Remaining"), "3");

  // Kill the new master once its replica (the old master) has every write: the cluster
  // promotes the replica, and the sidecar finds it by re-reading the topology.
  const auto replica_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (cluster.replicaOf(promoted) != first_master &&
         std::chrono::steady_clock::now() < replica_deadline) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_EQ(cluster.replicaOf(promoted), first_master);
  // Replication is asynchronous: without this, a loaded machine kills the master before its
  // replica has the sidecar's writes, and the cluster itself loses them.
  ASSERT_TRUE(cluster.waitReplicated(promoted, first_master, std::chrono::seconds(10)));
  cluster.byPort(promoted).stop();

  const auto killed = std::chrono::steady_clock::now();
  int failed = 0;
  HttpResponse r;
  while (std::chrono::steady_clock::now() - killed < std::chrono::seconds(20)) {
    r = post();
    if (r.status == 200) {
      break;
    }
    EXPECT_EQ(r.status, 503) << r.body;  // --failure-mode closed
    ++failed;
    std::this_thread::sleep_for(milliseconds(50));
  }
  const auto recovered_after =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - killed);
  ASSERT_EQ(r.status, 200) << sluice.log();
  std::cout << "recovered " << recovered_after.count() << " ms after the kill, " << failed
            << " request(s) answered 503 meanwhile\n";
  cluster.waitOk(std::chrono::seconds(15), slot, first_master);
  EXPECT_EQ(r.header("X-Ratelimit-Remaining"), "2") << r.body;
  EXPECT_EQ(post().header("X-Ratelimit-Remaining"), "1");
  EXPECT_EQ(post().header("X-Ratelimit-Remaining"), "0");
  EXPECT_EQ(post().status, 429);
  EXPECT_TRUE(waitReady(sluice)) << sluice.log();
  EXPECT_NE(sluice.log().find("redis cluster: failover detected: slots"), std::string::npos)
      << sluice.log();
  EXPECT_GE(familyTotal(sluice, "sluice_redis_cluster_failovers_total"), 1);
}

TEST(RedisClusterTest, LocalModeDecidesFromMemoryWhileAMasterIsDownThenGoesBackToTheCluster) {
  RedisCluster cluster(3, 1);
  const int master = cluster.masterPorts()[1];
  const std::string client = clientOn(cluster, master, "l");
  SluiceOptions options = sidecar(cluster.url(0));
  options.args.back() = "local";
  SluiceProcess sluice(options);
  ASSERT_TRUE(waitReady(sluice)) << sluice.log();
  HttpClient http = sluice.client();
  auto post = [&] { return http.post("/shouldAllowRequest", request(client)); };
  for (const char* expected : {"4", "3"}) {
    HttpResponse before = post();
    EXPECT_EQ(before.header("X-Ratelimit-Remaining"), expected) << before.body;
    EXPECT_EQ(before.header("X-Sluice-Degraded"), "") << before.body << sluice.log();
  }
  const int replica = cluster.replicaOf(master);
  ASSERT_GT(replica, 0);
  // The replica has both writes before its master goes (replication is asynchronous).
  ASSERT_TRUE(cluster.waitReplicated(master, replica, std::chrono::seconds(10)));
  cluster.byPort(master).stop();

  // The memory store answers (its own bucket: 4 left after the first local charge).
  HttpResponse local = post();
  EXPECT_EQ(local.status, 200) << local.body;
  EXPECT_EQ(local.header("X-Sluice-Degraded"), "true");
  EXPECT_EQ(local.header("X-Ratelimit-Remaining"), "4");

  // Checks (hits 0) consume nothing, wherever they are answered.
  json check_body = json::parse(request(client));
  check_body["hits"] = 0;
  const auto killed = std::chrono::steady_clock::now();
  HttpResponse r;
  while (std::chrono::steady_clock::now() - killed < std::chrono::seconds(20)) {
    r = http.post("/shouldAllowRequest", check_body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.header("X-Sluice-Degraded").empty()) {
      break;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  // Back on the cluster, where only the two requests made before the failover counted.
  ASSERT_TRUE(r.header("X-Sluice-Degraded").empty()) << sluice.log();
  EXPECT_EQ(r.header("X-Ratelimit-Remaining"), "3") << r.body << sluice.log();
  EXPECT_EQ(post().header("X-Ratelimit-Remaining"), "2");
  EXPECT_EQ(familyTotal(sluice, "sluice_store_failure_mode_activations_total", "mode=\"local\""), 1)
      << sluice.log();
}

}  // namespace
}  // namespace sluice::test
