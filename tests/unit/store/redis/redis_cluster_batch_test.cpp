// Batches on a real Redis Cluster: one per hash slot, each bounded in flight on its own
// (RedisOptions::max_batches_in_flight), so that a slow master makes its own slots' decisions
// wait in bigger batches while the other masters' slots go on as before.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sluice/common/metrics.hpp"
#include "sluice/rules/bucket_key.hpp"
#include "sluice/store/redis_store.hpp"
#include "store/redis/cluster_slots.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_server.hpp"

namespace sluice {
namespace {

using std::chrono::milliseconds;

/// One hit of a fixed window of 100 for `client` (no window ends during the test).
StoreRequest hitOf(const std::string& client) {
  StoreLimit l;
  l.key = BucketKey::storeKey(client, "d:k");
  l.params.algorithm = Algorithm::kFixedWindow;
  l.params.limit = 100;
  l.params.window_us = 10 * 86400 * kMicrosPerSecond;
  return StoreRequest{{l}, 1};
}

/// The master serving the slot of `client`'s bucket.
int ownerOfClient(test::RedisCluster& cluster, const RedisOptions& options,
                  const std::string& client) {
  const StoreRequest hit = hitOf(client);
  const std::string key =
      BucketKey::redisKey(BucketKey::redisPrefix(options.key_prefix), hit.limits[0].key);
  return cluster.ownerOf(redis::keyHashSlot(key));
}

/// A client id (of `prefix`) whose bucket lives on the master on `port`, or not on it.
std::string clientOf(test::RedisCluster& cluster, const RedisOptions& options,
                     const std::string& prefix, int port, bool on) {
  for (int i = 0; i < 10'000; ++i) {
    const std::string id = prefix + std::to_string(i);
    if ((ownerOfClient(cluster, options, id) == port) == on) {
      return id;
    }
  }
  throw std::runtime_error("no client id for port " + std::to_string(port));
}

TEST(RedisClusterBatchTest, AHeldSlotsDecisionsWaitTogetherWhileOtherSlotsGoOn) {
  // The master of client `slow` holds every call (CLIENT PAUSE) while that of `fast` answers
  // at once. With one batch in flight per slot (the default), the turns' decisions for
  // `slow` wait and go as one call once the first is answered, while each turn's decisions
  // for `fast` go at its end; without the bound (0) every turn's batches go. Every decision
  // is answered once, in order.
  test::RedisCluster cluster(3, 0);
  for (const std::size_t in_flight : {std::size_t{1}, std::size_t{0}}) {
    SCOPED_TRACE("max_batches_in_flight " + std::to_string(in_flight));
    boost::asio::io_context io;
    Metrics metrics;
    RedisOptions base;
    base.key_prefix = "batch" + std::to_string(in_flight);
    base.request_timeout = milliseconds(10'000);
    base.stall_timeout = milliseconds(10'000);
    base.max_batches_in_flight = in_flight;
    auto seeds = parseRedisClusterUrls(cluster.url(0), base);
    ASSERT_TRUE(seeds);
    SystemClock clock;
    StorePtr store = makeRedisClusterStore(io, *seeds, metrics, clock);
    ASSERT_TRUE(test::runUntil(
        io, [&] { return store->healthy(); }, milliseconds(5000)));
    const int held_port = cluster.masterPorts().front();
    const std::string slow = clientOf(cluster, base, "slow", held_port, true);
    const std::string fast = clientOf(cluster, base, "fast", held_port, false);
    Counter& calls = metrics.counter("redis_script_calls_total", {{"store", "redis_cluster"}});
    std::vector<std::optional<Result<StoreResponse>>> slow_results(9);
    std::vector<std::optional<Result<StoreResponse>>> fast_results(9);
    auto answered = [](const auto& results, std::size_t n) {
      return std::all_of(results.begin(), results.begin() + static_cast<std::ptrdiff_t>(n),
                         [](const auto& r) { return r.has_value(); });
    };
    ASSERT_TRUE(cluster.byPort(held_port).command({"CLIENT", "PAUSE", "1500", "ALL"}));
    for (std::size_t turn = 0; turn < 3; ++turn) {
      for (std::size_t i = 3 * turn; i < 3 * turn + 3; ++i) {
        store->evaluate(hitOf(slow), [&slow_results, i](Result<StoreResponse> r) {
          slow_results[i].emplace(std::move(r));
        });
        store->evaluate(hitOf(fast), [&fast_results, i](Result<StoreResponse> r) {
          fast_results[i].emplace(std::move(r));
        });
      }
      io.poll();  // the end of the turn
      // The other master answers this turn's call while the held one does not.
      ASSERT_TRUE(test::runUntil(io, [&] { return answered(fast_results, 3 * turn + 3); }));
      EXPECT_FALSE(slow_results[0].has_value());
      EXPECT_EQ(calls.value(), in_flight == 1 ? turn + 2 : 2 * (turn + 1));
    }
    ASSERT_TRUE(test::runUntil(
        io, [&] { return answered(slow_results, slow_results.size()); }, milliseconds(10'000)));
    EXPECT_EQ(calls.value(), in_flight == 1 ? 5u : 6u);
    for (const auto* results : {&slow_results, &fast_results}) {
      for (std::size_t i = 0; i < results->size(); ++i) {
        const auto& r = *(*results)[i];
        ASSERT_TRUE(r.ok()) << i << ": " << r.error().message;
        EXPECT_TRUE(r->allowed);
        EXPECT_EQ(r->outcomes[0].remaining, 99 - static_cast<std::int64_t>(i)) << i;
      }
    }
  }
}

}  // namespace
}  // namespace sluice
