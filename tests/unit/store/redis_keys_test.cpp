#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "sluice/rules/rules.hpp"
#include "sluice/store/redis_store.hpp"

namespace sluice {
namespace {

// The hash tag Redis Cluster uses: the bytes between the first '{' and the next '}'.
std::string hashTag(const std::string& key) {
  auto open = key.find('{');
  auto close = key.find('}', open + 1);
  return key.substr(open + 1, close - open - 1);
}

TEST(RedisKeysTest, TagsEveryKeyOfAClientWithTheEscapedClient) {
  std::string a = redisBucketKey("sluice", "user 1", "auth:type=login:i0:fixed_window");
  std::string b = redisBucketKey("sluice", "user 1", "auth:ip=1.2.3.4:i0:token_bucket");
  EXPECT_EQ(hashTag(a), hashTag(b));
  EXPECT_EQ(hashTag(a), escapeKeyPart("user 1"));
  EXPECT_TRUE(a.starts_with("sluice:{"));
}

TEST(RedisKeysTest, NoClientGivesAnEmptyTag) { EXPECT_EQ(redisBucketKey("p", "", "k"), "p:{}:k"); }

TEST(RedisKeysTest, HostileClientIdsNeverShareAKeyOrBreakTheTag) {
  std::vector<std::string> clients = {"",    "a", "a}", "{a",  "a}:{b", "a:b", "a b", "a\nb", "é",
                                      "%41", "A", "}{", "a_b", "a%7Db", "*",   "?",   "[x]",  "\\"};
  std::set<std::string> keys;
  for (const auto& c : clients) {
    std::string key = redisBucketKey("sluice", c, "d:k=v:i0:fixed_window");
    EXPECT_TRUE(keys.insert(key).second) << "collision for client '" << c << "'";
    // Exactly one '{' and one '}' in the key: the tag can never be hijacked.
    EXPECT_EQ(std::count(key.begin(), key.end(), '{'), 1) << key;
    EXPECT_EQ(std::count(key.begin(), key.end(), '}'), 1) << key;
  }
}

TEST(RedisKeysTest, BracesInThePrefixAreNeutralised) {
  std::string key = redisBucketKey("my{app}", "c", "k");
  EXPECT_EQ(key, "my%7Bapp%7D:{c}:k");
}

}  // namespace
}  // namespace sluice
