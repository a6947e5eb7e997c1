#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sluice/common/metrics.hpp"
#include "sluice/rules/bucket_key.hpp"
#include "sluice/store/redis_store.hpp"
#include "store/redis/cluster_slots.hpp"
#include "support/free_port.hpp"
#include "support/redis_cluster.hpp"

namespace sluice {
namespace {

using std::chrono::milliseconds;
using test::RedisCluster;
using test::runFor;
using test::runUntil;

StoreLimit fixedWindow(std::string key, std::int64_t limit) {
  StoreLimit l;
  l.key = std::move(key);
  l.params.algorithm = Algorithm::kFixedWindow;
  l.params.limit = limit;
  l.params.window_us = 3600 * kMicrosPerSecond;
  return l;
}

StoreRequest request(std::vector<StoreLimit> limits, std::string client) {
  StoreRequest r;
  r.limits = std::move(limits);
  for (StoreLimit& l : r.limits) {
    l.key = BucketKey::storeKey(client, l.key);
  }
  return r;
}

class RedisClusterStoreTest : public ::testing::Test {
 protected:
  void open(const std::string& seeds) {
    RedisOptions base;
    base.request_timeout = milliseconds(1000);
    auto parsed = parseRedisClusterUrls(seeds, base);
    ASSERT_TRUE(parsed) << parsed.error().message;
    store_ = makeRedisClusterStore(io_, *parsed, metrics_, clock_);
  }

  bool waitHealthy() {
    return runUntil(
        io_, [&] { return store_->healthy(); }, milliseconds(5000));
  }

  Result<StoreResponse> call(const StoreRequest& request) {
    return test::evaluateOnce(io_, *store_, request);
  }

  boost::asio::io_context io_;
  Metrics metrics_;
  SystemClock clock_;
  StorePtr store_;
};

TEST_F(RedisClusterStoreTest, FindsTheClusterThroughAnyReachableSeed) {
  RedisCluster cluster(3, 0);
  const std::string dead = "redis://127.0.0.1:" + std::to_string(test::freeLoopbackPort());
  open(dead + "," + cluster.url(2));
  ASSERT_TRUE(waitHealthy());
  EXPECT_EQ(store_->kind(), "redis_cluster");
  auto r = call(request({fixedWindow("d:k=v;i0;fixed_window", 2)}, "someone"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->allowed);
  EXPECT_EQ(r->outcomes[0].remaining, 1);
}

TEST_F(RedisClusterStoreTest, RefundsReportsAndCountedRequestsWorkOnTheCluster) {
  RedisCluster cluster(3, 0);
  open(cluster.url(0));
  ASSERT_TRUE(waitHealthy());
  const StoreLimit tokens = fixedWindow("llm:user=u;i0;fixed_window", 1000);
  StoreRequest charge = request({tokens}, "c");
  charge.cost = 800;
  ASSERT_EQ(call(charge)->outcomes[0].remaining, 200);
  StoreRequest refund = request({tokens}, "c");
  refund.limits[0].refund = true;
  refund.cost = 500;
  auto r = call(refund);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->allowed);
  EXPECT_EQ(r->outcomes[0].remaining, 700);
  StoreRequest report = request({tokens}, "c");
  report.charge = Charge::kReport;
  report.cost = 900;
  r = call(report);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->allowed) << "a report never denies";
  EXPECT_EQ(r->outcomes[0].remaining, 0);
  StoreRequest counted = request({tokens}, "c");
  counted.charge = Charge::kEvery;
  r = call(counted);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->allowed);
  refund.cost = 201;
  EXPECT_EQ(call(refund)->outcomes[0].remaining, 0) << "1201 - 201 = 1000 of 1000";
  refund.cost = 1;
  EXPECT_EQ(call(refund)->outcomes[0].remaining, 1);
}

TEST_F(RedisClusterStoreTest, AuthenticatesOnEveryNodeWithTheSeedsPassword) {
  RedisCluster cluster(3, 0, "s3cret");
  open("redis://:s3cret@127.0.0.1:" + std::to_string(cluster.nodes()[1]->port()));
  ASSERT_TRUE(waitHealthy());
  std::set<int> masters;
  for (int i = 0; i < 12; ++i) {
    const std::string client = "a" + std::to_string(i);
    masters.insert(cluster.ownerOf(redis::keyHashSlot(client + "|d")));
    auto r = call(request({fixedWindow("d:k=v;i0;fixed_window", 2)}, client));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->allowed);
  }
  EXPECT_EQ(masters.size(), 3u);
}

TEST_F(RedisClusterStoreTest, ResetRemovesTheBucketsOnEveryMaster) {
  RedisCluster cluster(3, 0);
  open(cluster.url(0));
  ASSERT_TRUE(waitHealthy());
  constexpr int kClients = 30;
  std::set<int> masters;
  for (int i = 0; i < kClients; ++i) {
    const std::string client = "r" + std::to_string(i);
    masters.insert(cluster.ownerOf(redis::keyHashSlot(client + "|d")));
    auto r = call(request({fixedWindow("d:k=v;i0;fixed_window", 2)}, client));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->outcomes[0].remaining, 1);
  }
  ASSERT_EQ(masters.size(), 3u);
  auto other = call(request({fixedWindow("e:k=v;i0;fixed_window", 2)}, "r0"));
  ASSERT_TRUE(other) << other.error().message;

  // Every client's buckets of domain d (reset prefixes are store-key prefixes: client first).
  std::vector<std::string> prefixes;
  for (int i = 0; i < kClients; ++i) {
    prefixes.push_back(BucketKey::storeKey("r" + std::to_string(i), "d:"));
  }
  std::optional<Result<std::size_t>> removed;
  store_->reset(prefixes, [&](Result<std::size_t> r) { removed.emplace(std::move(r)); });
  ASSERT_TRUE(runUntil(io_, [&] { return removed.has_value(); }));
  ASSERT_TRUE(*removed) << removed->error().message;
  EXPECT_EQ(**removed, static_cast<std::size_t>(kClients));

  auto fresh = call(request({fixedWindow("d:k=v;i0;fixed_window", 2)}, "r7"));
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->outcomes[0].remaining, 1);
  auto kept = call(request({fixedWindow("e:k=v;i0;fixed_window", 2)}, "r0"));
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->outcomes[0].remaining, 0);
}

TEST_F(RedisClusterStoreTest, ARequestWhoseKeysSpanSlotsIsRefusedNotSplit) {
  RedisCluster cluster(3, 0);
  open(cluster.url(0));
  ASSERT_TRUE(waitHealthy());
  // No client: each key is tagged with its first part, here two different ones.
  auto r =
      call(request({fixedWindow("a;i0;fixed_window", 2), fixedWindow("b;i0;fixed_window", 2)}, ""));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(r.error().message, "redis cluster: the keys of one request span hash slots");
}

TEST_F(RedisClusterStoreTest, ABatchOfOneSlotFollowsAskAndMovedAndAnswersEachRequestInOrder) {
  RedisCluster cluster(3, 0);
  const std::vector<int> masters = cluster.masterPorts();
  test::RedisServer& from = cluster.byPort(masters[0]);
  test::RedisServer& to = cluster.byPort(masters[1]);
  const std::string bucket = "cl;i0;fixed_window";
  auto slotOf = [&](const std::string& client) {
    return redis::keyHashSlot(
        BucketKey::redisKey(BucketKey::redisPrefix("sluice"), BucketKey::storeKey(client, bucket)));
  };
  auto clientOn = [&](int port, const std::string& prefix) {
    for (int i = 0; i < 10'000; ++i) {
      std::string id = prefix + std::to_string(i);
      if (cluster.ownerOf(slotOf(id)) == port) {
        return id;
      }
    }
    ADD_FAILURE() << "no client on port " << port;
    return prefix;
  };
  const std::string moving = clientOn(from.port(), "m");
  const std::string staying = clientOn(masters[2], "s");
  open(cluster.url(2));
  ASSERT_TRUE(waitHealthy());

  // Three requests of each client in one turn: one batch per slot, answers in order.
  auto turn = [&](std::int64_t expected_first) {
    std::vector<std::optional<Result<StoreResponse>>> results(6);
    for (int i = 0; i < 6; ++i) {
      const std::string& client = i < 3 ? moving : staying;
      store_->evaluate(
          request({fixedWindow(bucket, 20)}, client),
          [&results, i](Result<StoreResponse> r) { results[i].emplace(std::move(r)); });
    }
    ASSERT_TRUE(runUntil(io_, [&] {
      return std::all_of(results.begin(), results.end(),
                         [](const auto& r) { return r.has_value(); });
    }));
    for (int i = 0; i < 6; ++i) {
      ASSERT_TRUE(*results[i]) << i << ": " << results[i]->error().message;
      EXPECT_TRUE((*results[i])->allowed);
      EXPECT_EQ((*results[i])->outcomes[0].remaining, expected_first - i % 3) << "request " << i;
    }
  };
  Counter& calls = metrics_.counter("redis_script_calls_total", {{"store", "redis_cluster"}});
  turn(19);
  EXPECT_EQ(calls.value(), 2u);  // one per slot

  // The moving client's bucket is on `to` while its slot is still `from`'s: ASK.
  cluster.beginSlotMigration(slotOf(moving), from, to);
  turn(16);
  // The slot is `to`'s: `from` answers MOVED and the batch follows, counted once.
  cluster.finishSlotMigration(slotOf(moving), to);
  turn(13);
  EXPECT_EQ(calls.value(), 6u);
  EXPECT_GE(metrics_.counter("redis_cluster_redirects_total", {{"kind", "moved"}}).value(), 1u);
}

}  // namespace
}  // namespace sluice
