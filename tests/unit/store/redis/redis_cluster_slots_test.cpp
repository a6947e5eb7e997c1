#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sluice/rules/rules.hpp"
#include "sluice/store/redis_store.hpp"
#include "store/redis/cluster_slots.hpp"

namespace sluice::redis {
namespace {

Reply integer(long long value) {
  Reply r;
  r.type = Reply::Type::kInteger;
  r.integer = value;
  return r;
}

Reply string(std::string value) {
  Reply r;
  r.type = Reply::Type::kString;
  r.str = std::move(value);
  return r;
}

Reply array(std::vector<Reply> elements) {
  Reply r;
  r.type = Reply::Type::kArray;
  r.elements = std::move(elements);
  return r;
}

// A node as Redis 7.0 sends it over RESP2: host, port, id, and the (empty) metadata map.
Reply node(const std::string& host, int port, const std::string& id) {
  return array({string(host), integer(port), string(id), array({})});
}

TEST(ClusterSlotsTest, Crc16IsXmodem) {
  EXPECT_EQ(crc16("123456789"), 0x31C3);
  EXPECT_EQ(crc16(""), 0);
}

// Values from CLUSTER KEYSLOT of Redis 7.0.15.
TEST(ClusterSlotsTest, KeyHashSlotMatchesRedis) {
  EXPECT_EQ(keyHashSlot("123456789"), 12739);
  EXPECT_EQ(keyHashSlot("somekey"), 11058);
  EXPECT_EQ(keyHashSlot("foo"), 12182);
  EXPECT_EQ(keyHashSlot("bar"), 5061);
  EXPECT_EQ(keyHashSlot("hello"), 866);
  EXPECT_EQ(keyHashSlot(""), 0);
}

// The hash tag examples of the Redis Cluster specification.
TEST(ClusterSlotsTest, HashTagIsBetweenTheFirstOpeningAndTheNextClosingBrace) {
  EXPECT_EQ(keyHashSlot("{user1000}.following"), 3443);
  EXPECT_EQ(keyHashSlot("{user1000}.followers"), 3443);
  EXPECT_EQ(keyHashSlot("foo{bar}{zap}"), keyHashSlot("bar"));
  EXPECT_EQ(keyHashSlot("foo{{bar}}zap"), keyHashSlot("{bar"));
  EXPECT_EQ(keyHashSlot("foo{{bar}}zap"), 4015);
}

TEST(ClusterSlotsTest, EmptyOrUnclosedTagHashesTheWholeKey) {
  EXPECT_EQ(keyHashSlot("foo{}{bar}"), 8363);
  EXPECT_EQ(keyHashSlot("{bar"), 4015);
  EXPECT_EQ(keyHashSlot("bar}"), 6624);
}

TEST(ClusterSlotsTest, AllKeysOfOneRequestShareTheSlotOfClientAndDomain) {
  const std::string key =
      BucketKey::redisKey("sluice", BucketKey::storeKey("user-123", "auth:auth_type=login;i0;fw"));
  EXPECT_EQ(key, "sluice:{user-123|auth}:auth_type=login;i0;fw");
  EXPECT_EQ(keyHashSlot(key), keyHashSlot("user-123|auth"));
  EXPECT_EQ(
      keyHashSlot(BucketKey::redisKey("sluice", BucketKey::storeKey("user-123", "auth;i0;tb"))),
      keyHashSlot(key));
}

TEST(ClusterSlotsTest, KeysWithoutAClientAreTaggedWithTheirDomain) {
  const std::string a =
      BucketKey::redisKey("sluice", BucketKey::storeKey("", "auth:auth_type=login;i0;fw"));
  const std::string b =
      BucketKey::redisKey("sluice", BucketKey::storeKey("", "auth:path=%2Fx;n1;tb"));
  const std::string domain_level =
      BucketKey::redisKey("sluice", BucketKey::storeKey("", "auth;i0;fw"));
  EXPECT_EQ(a, "sluice:{|auth}:auth_type=login;i0;fw");
  EXPECT_EQ(keyHashSlot(a), keyHashSlot(b));
  EXPECT_EQ(keyHashSlot(a), keyHashSlot(domain_level));
  EXPECT_EQ(keyHashSlot(a), 8960);
}

TEST(ClusterSlotsTest, ClusterKeysOfDistinctClientsAndBucketsNeverCollide) {
  // An escaped client never contains '|', which ends the client part of the tag.
  EXPECT_NE(BucketKey::redisKey("p", BucketKey::storeKey("", "a;i0;fw")),
            BucketKey::redisKey("p", BucketKey::storeKey("|a", "a;i0;fw")));
  EXPECT_NE(BucketKey::redisKey("p", BucketKey::storeKey("", "a;i0;fw")),
            BucketKey::redisKey("p", BucketKey::storeKey("", "a;i1;fw")));
  EXPECT_EQ(BucketKey::redisKey(BucketKey::redisPrefix("p{x}"), BucketKey::storeKey("", "a;i0")),
            "p%7Bx%7D:{|a};i0");
}

TEST(ClusterSlotsTest, ParsesClusterSlotsOfRedis7) {
  Reply reply = array({
      array({integer(5461), integer(10922), node("127.0.0.1", 7001, "b"),
             node("127.0.0.1", 7004, "e")}),
      array(
          {integer(0), integer(5460), node("127.0.0.1", 7000, "a"), node("127.0.0.1", 7003, "d")}),
      array({integer(10923), integer(16383), node("127.0.0.1", 7002, "c")}),
  });
  auto topology = parseClusterSlots(reply, "10.0.0.1");
  ASSERT_TRUE(topology) << topology.error().message;
  ASSERT_EQ(topology->ranges.size(), 3u);
  EXPECT_EQ(topology->ranges[0].first, 0);
  EXPECT_EQ(topology->ranges[0].last, 5460);
  EXPECT_EQ(topology->ranges[0].master, (ClusterNode{"127.0.0.1", 7000, "a"}));
  ASSERT_EQ(topology->ranges[0].replicas.size(), 1u);
  EXPECT_EQ(topology->ranges[0].replicas[0].address(), "127.0.0.1:7003");
  EXPECT_TRUE(topology->ranges[2].replicas.empty());
  EXPECT_TRUE(topology->coversAllSlots());
  EXPECT_EQ(topology->describe(),
            "0-5460 127.0.0.1:7000, 5461-10922 127.0.0.1:7001, 10923-16383 127.0.0.1:7002");
}

TEST(ClusterSlotsTest, EmptyHostMeansTheQueriedNodesHostAndUnknownReplicasAreSkipped) {
  Reply reply =
      array({array({integer(0), integer(16383), node("", 7000, "a"), node("?", 7003, "d")})});
  auto topology = parseClusterSlots(reply, "10.0.0.1");
  ASSERT_TRUE(topology) << topology.error().message;
  EXPECT_EQ(topology->ranges[0].master.address(), "10.0.0.1:7000");
  EXPECT_TRUE(topology->ranges[0].replicas.empty());
}

TEST(ClusterSlotsTest, OlderRepliesWithoutNodeIdsParse) {
  Reply reply =
      array({array({integer(0), integer(16383), array({string("127.0.0.1"), integer(7000)})})});
  auto topology = parseClusterSlots(reply, "");
  ASSERT_TRUE(topology) << topology.error().message;
  EXPECT_EQ(topology->ranges[0].master.id, "");
}

TEST(ClusterSlotsTest, GapsAreReportedAsIncomplete) {
  Reply reply = array({array({integer(0), integer(100), node("h", 1, "a")}),
                       array({integer(102), integer(16383), node("h", 2, "b")})});
  auto topology = parseClusterSlots(reply, "");
  ASSERT_TRUE(topology);
  EXPECT_FALSE(topology->coversAllSlots());
  auto empty = parseClusterSlots(array({}), "");
  ASSERT_TRUE(empty);
  EXPECT_FALSE(empty->coversAllSlots());
}

TEST(ClusterSlotsTest, MalformedRepliesAreErrors) {
  EXPECT_FALSE(parseClusterSlots(string("ERR"), ""));
  EXPECT_FALSE(
      parseClusterSlots(array({array({integer(0), integer(16384), node("h", 1, "a")})}), ""));
  EXPECT_FALSE(parseClusterSlots(array({array({integer(5), integer(4), node("h", 1, "a")})}), ""));
  EXPECT_FALSE(parseClusterSlots(array({array({integer(0), integer(1)})}), ""));
  EXPECT_FALSE(parseClusterSlots(array({array({integer(0), integer(1), node("h", 0, "a")})}), ""));
  EXPECT_FALSE(parseClusterSlots(array({array({integer(0), integer(1), node("?", 1, "a")})}), ""));
  auto bad = parseClusterSlots(array({array({integer(0), integer(1), string("x")})}), "");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::kScript);
}

TEST(ClusterSlotsTest, ParsesMovedAndAsk) {
  auto moved = parseRedirect("MOVED 3999 127.0.0.1:6381");
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->kind, Redirect::Kind::kMoved);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->host, "127.0.0.1");
  EXPECT_EQ(moved->port, 6381);
  auto ask = parseRedirect("ASK 1 ::1:7000");
  ASSERT_TRUE(ask);
  EXPECT_EQ(ask->kind, Redirect::Kind::kAsk);
  EXPECT_EQ(ask->host, "::1");
  EXPECT_EQ(ask->port, 7000);
  auto unknown_host = parseRedirect("MOVED 7 :7001");
  ASSERT_TRUE(unknown_host);
  EXPECT_EQ(unknown_host->host, "");
}

TEST(ClusterSlotsTest, OtherErrorsAreNoRedirect) {
  EXPECT_FALSE(parseRedirect("ERR unknown command"));
  EXPECT_FALSE(parseRedirect("MOVED"));
  EXPECT_FALSE(parseRedirect("MOVED 16384 h:1"));
  EXPECT_FALSE(parseRedirect("MOVED 1 h"));
  EXPECT_FALSE(parseRedirect("MOVED 1 h:0"));
  EXPECT_FALSE(parseRedirect("MOVED x h:1"));
  EXPECT_FALSE(parseRedirect("TRYAGAIN Multiple keys request during rehashing of slot"));
}

TEST(ClusterSlotsTest, SeedsAreCommaSeparatedUrls) {
  RedisOptions base;
  base.key_prefix = "p";
  auto seeds = parseRedisClusterUrls("redis://127.0.0.1:7000,redis://h2:7001/0", base);
  ASSERT_TRUE(seeds) << seeds.error().message;
  ASSERT_EQ(seeds->size(), 2u);
  EXPECT_EQ((*seeds)[0].port, 7000);
  EXPECT_EQ((*seeds)[1].host, "h2");
  EXPECT_EQ((*seeds)[1].key_prefix, "p");
}

TEST(ClusterSlotsTest, SeedsMustBeTcpOnDatabaseZeroWithOneSetOfCredentials) {
  auto db = parseRedisClusterUrls("redis://h:1/1");
  ASSERT_FALSE(db);
  EXPECT_EQ(db.error().message, "seed 1 ('redis://h:1/1'): Redis Cluster has database 0 only");
  EXPECT_FALSE(parseRedisClusterUrls("unix:///tmp/redis.sock"));
  EXPECT_FALSE(parseRedisClusterUrls("redis://a:pw@h:1,redis://h:2"));
  EXPECT_TRUE(parseRedisClusterUrls("redis://a:pw@h:1,redis://a:pw@h:2"));
  EXPECT_FALSE(parseRedisClusterUrls("redis://h:1,"));
  EXPECT_FALSE(parseRedisClusterUrls(""));
}

}  // namespace
}  // namespace sluice::redis
