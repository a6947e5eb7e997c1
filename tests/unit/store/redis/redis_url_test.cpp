#include <gtest/gtest.h>

#include "sluice/store/failover_store.hpp"
#include "sluice/store/redis_store.hpp"

namespace sluice {
namespace {

TEST(RedisUrlTest, ParsesHostPortAndDb) {
  auto o = parseRedisUrl("redis://10.0.0.5:6380/3");
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->host, "10.0.0.5");
  EXPECT_EQ(o->port, 6380);
  EXPECT_EQ(o->db, 3);
  EXPECT_TRUE(o->user.empty());
  EXPECT_TRUE(o->password.empty());
}

TEST(RedisUrlTest, DefaultsPortAndDb) {
  auto o = parseRedisUrl("redis://cache.internal");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->host, "cache.internal");
  EXPECT_EQ(o->port, 6379);
  EXPECT_EQ(o->db, 0);
}

TEST(RedisUrlTest, ParsesUserAndPercentEncodedPassword) {
  auto o = parseRedisUrl("redis://alice:p%40ss%3Aw%2Frd@127.0.0.1:7000/1");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->user, "alice");
  EXPECT_EQ(o->password, "p@ss:w/rd");
  EXPECT_EQ(o->port, 7000);
  EXPECT_EQ(o->db, 1);
}

TEST(RedisUrlTest, PasswordWithoutUser) {
  auto a = parseRedisUrl("redis://:secret@host:1/0");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->user, "");
  EXPECT_EQ(a->password, "secret");
  auto b = parseRedisUrl("redis://secret@host");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->password, "secret");
}

TEST(RedisUrlTest, ParsesIpv6) {
  auto o = parseRedisUrl("redis://[::1]:6390/2");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->host, "::1");
  EXPECT_EQ(o->port, 6390);
  EXPECT_EQ(o->db, 2);
}

TEST(RedisUrlTest, ParsesUnixSocketWithDb) {
  auto o = parseRedisUrl("unix:///var/run/redis/redis.sock?db=4");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->unix_path, "/var/run/redis/redis.sock");
  EXPECT_EQ(o->db, 4);
}

TEST(RedisUrlTest, KeepsNonUrlFieldsOfBase) {
  RedisOptions base;
  base.key_prefix = "edge";
  base.request_timeout = std::chrono::milliseconds(5);
  auto o = parseRedisUrl("redis://h:1/0", base);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->key_prefix, "edge");
  EXPECT_EQ(o->request_timeout, std::chrono::milliseconds(5));
}

TEST(RedisUrlTest, RejectsBadUrlsWithAReason) {
  for (const char* bad : {"localhost:6379", "http://h", "redis://h:0", "redis://h:70000",
                          "redis://h:12x", "redis://h/db", "redis://", "unix://", "unix://host/x",
                          "redis://h/0?bogus=1", "redis://%zz@h", "rediss://h", "redis://[::1"}) {
    auto o = parseRedisUrl(bad);
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.error().kind, ErrorKind::kInvalidArgument);
    EXPECT_NE(o.error().message.find(bad), std::string::npos) << o.error().message;
  }
}

TEST(FailureModeTest, ParsesAndNames) {
  for (auto mode : {FailureMode::kOpen, FailureMode::kClosed, FailureMode::kLocal}) {
    auto parsed = parseFailureMode(failureModeName(mode));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, mode);
  }
  EXPECT_FALSE(parseFailureMode("sometimes").ok());
}

}  // namespace
}  // namespace sluice
