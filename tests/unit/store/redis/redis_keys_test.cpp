#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "sluice/rules/bucket_key.hpp"
#include "sluice/store/redis_store.hpp"

namespace sluice {
namespace {

// The hash tag Redis Cluster uses: the bytes between the first '{' and the next '}'.
std::string hashTag(const std::string& key) {
  auto open = key.find('{');
  auto close = key.find('}', open + 1);
  return key.substr(open + 1, close - open - 1);
}

std::string redisKey(std::string_view prefix, std::string_view client, std::string_view bucket) {
  return BucketKey::redisKey(prefix, BucketKey::storeKey(client, bucket));
}

TEST(RedisKeysTest, TagsEveryKeyOfARequestWithTheEscapedClientAndDomain) {
  std::string a = redisKey("sluice", "user 1", "auth:type=login;i0;fw");
  std::string b = redisKey("sluice", "user 1", "auth:ip=1.2.3.4;i0;tb");
  EXPECT_EQ(hashTag(a), hashTag(b));
  EXPECT_EQ(hashTag(a), escapeKeyPart("user 1") + "|auth");
  EXPECT_EQ(a, "sluice:{user%201|auth}:type=login;i0;fw");
}

TEST(RedisKeysTest, TheClientIdAppearsOnce) {
  const std::string key = redisKey("sluice", "user-123", "auth:auth_type=login;i0;fw");
  EXPECT_EQ(key.find("user-123"), key.rfind("user-123")) << key;
}

TEST(RedisKeysTest, NoClientGivesATagOfTheDomainAlone) {
  EXPECT_EQ(redisKey("p", "", "d;i0;fw"), "p:{|d};i0;fw");
}

TEST(RedisKeysTest, HostileClientIdsNeverShareAKeyOrBreakTheTag) {
  std::vector<std::string> clients = {"",     "a", "a}",  "{a", "a}:{b", "a:b", "a b",
                                      "a\nb", "é", "%41", "A",  "}{",    "a_b", "a%7Db",
                                      "*",    "?", "[x]", "\\", "a|b",   "|"};
  std::set<std::string> keys;
  for (const auto& c : clients) {
    std::string key = redisKey("sluice", c, "d:k=v;i0;fw");
    EXPECT_TRUE(keys.insert(key).second) << "collision for client '" << c << "'";
    // Exactly one '{' and one '}' in the key: the tag can never be hijacked.
    EXPECT_EQ(std::count(key.begin(), key.end(), '{'), 1) << key;
    EXPECT_EQ(std::count(key.begin(), key.end(), '}'), 1) << key;
  }
}

TEST(RedisKeysTest, BracesInThePrefixAreNeutralised) {
  EXPECT_EQ(BucketKey::redisPrefix("my{app}"), "my%7Bapp%7D");
  EXPECT_EQ(redisKey(BucketKey::redisPrefix("my{app}"), "c", "k;i0;fw"), "my%7Bapp%7D:{c|k};i0;fw");
}

TEST(RedisKeysTest, ResetPrefixesMapToRedisKeyPrefixes) {
  const std::vector<std::string> prefixes = BucketKey::domainPrefixes("u 1", "auth");
  ASSERT_EQ(prefixes.size(), 2u);
  EXPECT_EQ(BucketKey::redisKey("s", prefixes[0]), "s:{u%201|auth}:");
  EXPECT_EQ(BucketKey::redisKey("s", prefixes[1]), "s:{u%201|auth};");
  EXPECT_TRUE(
      redisKey("s", "u 1", "auth:k=v;i0;fw").starts_with(BucketKey::redisKey("s", prefixes[0])));
  EXPECT_TRUE(
      redisKey("s", "u 1", "auth;i0;fw").starts_with(BucketKey::redisKey("s", prefixes[1])));
  EXPECT_FALSE(
      redisKey("s", "u 1", "auth2;i0;fw").starts_with(BucketKey::redisKey("s", prefixes[1])));
}

}  // namespace
}  // namespace sluice
