// `sketch` limits on a real Redis Cluster: one sketch shard per hash slot, tagged into the
// slot of the request's other keys, so a request mixing a sketch and exact limits is one
// atomic script call and never a cross-slot error.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <set>
#include <string>

#include "sluice/common/metrics.hpp"
#include "sluice/limiter/sketch.hpp"
#include "sluice/rules/bucket_key.hpp"
#include "sluice/store/redis_store.hpp"
#include "store/redis/cluster_slots.hpp"
#include "store/redis/redis_sketch.hpp"
#include "support/redis_cluster.hpp"

namespace sluice {
namespace {

using std::chrono::milliseconds;

StoreLimit sketchLimit(std::string key, std::int64_t limit) {
  StoreLimit l;
  l.key = std::move(key);
  l.params.algorithm = Algorithm::kSketch;
  l.params.limit = limit;
  l.params.window_us = 3600 * kMicrosPerSecond;
  l.params.sketch.width = 1 << 20;
  l.params.sketch.depth = 4;
  l.params.sketch.counter_bits = sketchCounterBits(limit);
  auto identity = std::make_shared<SketchIdentity>();
  identity->key = "d:ip:i0:w1048576d4b8m0k0";
  identity->domain = "d";
  identity->rule = "per_ip";
  l.params.sketch.identity = identity;
  return l;
}

StoreLimit fixedWindow(std::string key, std::int64_t limit) {
  StoreLimit l;
  l.key = std::move(key);
  l.params.algorithm = Algorithm::kFixedWindow;
  l.params.limit = limit;
  l.params.window_us = 3600 * kMicrosPerSecond;
  return l;
}

TEST(RedisClusterSketchTest, SlotTagsCoverEverySlot) {
  for (int slot = 0; slot < redis::kClusterSlots; slot += 97) {
    EXPECT_EQ(redis::keyHashSlot("x:{" + redis::slotTag(slot) + "}:y"), slot);
  }
  EXPECT_EQ(redis::clusterShardWidth(1 << 20), 64U);
  EXPECT_EQ(redis::clusterShardWidth(1000), 16U);
}

TEST(RedisClusterSketchTest, ShardsLandInTheSlotOfTheRequestAndLimitPerClient) {
  test::RedisCluster cluster(3, 0);
  boost::asio::io_context io;
  Metrics metrics;
  RedisOptions base;
  base.request_timeout = milliseconds(2000);
  auto seeds = parseRedisClusterUrls(cluster.url(0), base);
  ASSERT_TRUE(seeds);
  SystemClock clock;
  StorePtr store = makeRedisClusterStore(io, *seeds, metrics, clock);
  ASSERT_TRUE(test::runUntil(
      io, [&] { return store->healthy(); }, milliseconds(5000)));
  std::set<int> slots;
  for (int c = 0; c < 12; ++c) {
    StoreRequest request;
    const std::string client = "client" + std::to_string(c);
    request.limits = {sketchLimit(client + "|d:ip", 2), fixedWindow(client + "|d:f", 100)};
    for (int i = 0; i < 2; ++i) {
      auto r = test::evaluateOnce(io, *store, request);
      ASSERT_TRUE(r) << r.error().message;
      EXPECT_TRUE(r->allowed) << c << " " << i;
    }
    auto denied = test::evaluateOnce(io, *store, request);
    ASSERT_TRUE(denied) << denied.error().message;
    EXPECT_FALSE(denied->allowed);
    EXPECT_FALSE(denied->outcomes[0].allowed);
    slots.insert(redis::keyHashSlot(BucketKey::redisKey("sluice", request.limits[0].key)));
  }
  EXPECT_GT(slots.size(), 6U);  // the clients' shards are spread over slots (and masters)
}

}  // namespace
}  // namespace sluice
