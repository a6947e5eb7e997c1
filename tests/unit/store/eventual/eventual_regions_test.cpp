// `--regions` parsing (parseEventualRegions): one Redis or a Redis Cluster per region.
#include <gtest/gtest.h>

#include <string>

#include "sluice/store/eventual_store.hpp"

namespace sluice {
namespace {

RedisOptions base() {
  RedisOptions b;
  b.key_prefix = "p";
  b.request_timeout = std::chrono::milliseconds(250);
  return b;
}

TEST(EventualRegionsParseTest, OneRedisPerRegion) {
  auto regions = parseEventualRegions("eu=redis://10.1.0.5:6379/2,us=redis://h:1", "local", base());
  ASSERT_TRUE(regions) << regions.error().message;
  ASSERT_EQ(regions->size(), 2U);
  EXPECT_EQ((*regions)[0].name, "eu");
  EXPECT_EQ((*regions)[0].redis.host, "10.1.0.5");
  EXPECT_EQ((*regions)[0].redis.db, 2);
  EXPECT_EQ((*regions)[0].redis.key_prefix, "p");
  EXPECT_TRUE((*regions)[0].cluster_seeds.empty());
  EXPECT_EQ((*regions)[1].redis.port, 1);
}

TEST(EventualRegionsParseTest, AClusterRegionListsItsSeedsJoinedByPlus) {
  auto regions = parseEventualRegions(
      "eu=cluster:redis://u:p%2Bw@10.1.0.5:7000+redis://u:p%2Bw@10.1.0.6:7001,us=redis://h:1",
      "local", base());
  ASSERT_TRUE(regions) << regions.error().message;
  ASSERT_EQ(regions->size(), 2U);
  const EventualRegion& eu = (*regions)[0];
  ASSERT_EQ(eu.cluster_seeds.size(), 2U);
  EXPECT_EQ(eu.cluster_seeds[0].host, "10.1.0.5");
  EXPECT_EQ(eu.cluster_seeds[0].port, 7000);
  EXPECT_EQ(eu.cluster_seeds[1].host, "10.1.0.6");
  EXPECT_EQ(eu.cluster_seeds[1].port, 7001);
  EXPECT_EQ(eu.cluster_seeds[1].password, "p+w");  // a '+' in a URL is written %2B
  EXPECT_EQ(eu.cluster_seeds[1].request_timeout, std::chrono::milliseconds(250));
  EXPECT_EQ(eu.redis.host, "10.1.0.5");
  EXPECT_TRUE((*regions)[1].cluster_seeds.empty());

  // One seed is a cluster too.
  auto one = parseEventualRegions("eu=cluster:redis://10.1.0.5:7000", "local", base());
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ((*one)[0].cluster_seeds.size(), 1U);
}

void expectError(const std::string& text, const std::string& part) {
  auto regions = parseEventualRegions(text, "local", base());
  ASSERT_FALSE(regions) << text;
  EXPECT_NE(regions.error().message.find(part), std::string::npos)
      << text << " -> " << regions.error().message;
}

TEST(EventualRegionsParseTest, MalformedValuesNameTheRegionAndTheSeed) {
  expectError("eu=cluster:", "region \"eu\": \"cluster:\" needs one or more seed URLs");
  expectError("eu=cluster:redis://a:7000+redis://b:x",
              "region \"eu\": cluster seed 2 ('redis://b:x')");
  expectError("eu=cluster:redis://a:7000+", "region \"eu\": cluster seed 2 ('')");
  expectError("eu=cluster:redis://a:7000/3", "Redis Cluster has database 0 only");
  expectError("eu=cluster:unix:///tmp/r.sock", "a cluster is reached over TCP");
  expectError("eu=cluster:redis://u:a@h:1+redis://u:b@h:2", "same user and password");
  expectError("eu=redis://a:7000+redis://b:7000", "NAME=cluster:URL+URL");
  expectError("eu=redis://a:1,local=redis://b:1", "region \"local\" is this sidecar's own region");
  expectError("eu=redis://a:1,eu=cluster:redis://b:1", "region \"eu\" is listed twice");
  expectError("eu", "must be NAME=URL");
}

}  // namespace
}  // namespace sluice
