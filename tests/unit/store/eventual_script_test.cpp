// The eventual script's decide op (a tight key's round trip) against a real redis-server:
// quota-mode entries decide with the store's semantics (include/sluice/store/store.hpp), not
// as shadow limits. And EventualEngine::requestAllowed, the same rule on the C++ side.
#include "store/eventual/eventual_script.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "store/eventual/eventual_engine.hpp"
#include "support/redis_server.hpp"

namespace sluice {
namespace {

using test::RedisServer;
using test::ReplyPtr;

constexpr std::int64_t kNow = 1'700'000'000'000'000;  // us
constexpr std::int64_t kDay = 86'400'000'000;

struct Entry {
  std::string hash;
  std::int64_t limit = 0;
  int quota_group = -1;
  bool shadow = false;
};

/// One op-1 (decide) call of cost 1 on fixed_window entries by writer "s1"; returns the reply
/// numbers (15 per entry).
std::vector<std::int64_t> decide(RedisServer& redis, const std::vector<Entry>& entries) {
  std::vector<std::string> argv = {"EVAL", eventual::composeEventualScript(),
                                   std::to_string(2 * entries.size())};
  for (const Entry& e : entries) {
    argv.push_back(e.hash);
    argv.push_back(e.hash + ":prev");
  }
  argv.push_back(std::to_string(kNow));
  argv.push_back("s1");
  for (const Entry& e : entries) {
    const int flags = (e.shadow ? 2 : 0) | (e.quota_group + 1) * 4;
    for (std::int64_t v : {std::int64_t{1}, std::int64_t{0}, e.limit, kDay, std::int64_t{0},
                           std::int64_t{0}, std::int64_t{0}, std::int64_t{0}, std::int64_t{1},
                           std::int64_t{flags}, std::int64_t{0}, std::int64_t{0}}) {
      argv.push_back(std::to_string(v));
    }
  }
  ReplyPtr reply = redis.command(argv);
  EXPECT_EQ(reply->type, REDIS_REPLY_STRING) << (reply->str != nullptr ? reply->str : "");
  std::vector<std::int64_t> out;
  std::istringstream in(std::string(reply->str, reply->len));
  for (std::int64_t v; in >> v;) {
    out.push_back(v);
  }
  EXPECT_EQ(out.size(), entries.size() * eventual::kScriptReplyStride);
  return out;
}

std::int64_t stored(RedisServer& redis, const std::string& hash) {
  ReplyPtr r = redis.command({"HGET", hash, "s1"});
  return r->type == REDIS_REPLY_STRING ? std::stoll(r->str) : 0;
}

bool allowedAt(const std::vector<std::int64_t>& v, std::size_t i) {
  return v[i * eventual::kScriptReplyStride] != 0;
}
std::int64_t chargedAt(const std::vector<std::int64_t>& v, std::size_t i) {
  return v[i * eventual::kScriptReplyStride + 5];
}

TEST(EventualScriptTest, QuotaGroupsDecideLikeTheRequestScript) {
  RedisServer redis;
  // Group 0 has 1 hit, group 1 has 3: the request passes while one group has room.
  const std::vector<Entry> both = {{"qa", 1, 0}, {"qb", 3, 1}};
  std::vector<bool> answers;
  for (int i = 0; i < 5; ++i) {
    std::vector<std::int64_t> v = decide(redis, both);
    const bool qa = allowedAt(v, 0);
    const bool qb = allowedAt(v, 1);
    // Charged only what allowed, and only when the request is allowed.
    EXPECT_EQ(chargedAt(v, 0), qa && (qa || qb) ? 1 : 0) << i;
    EXPECT_EQ(chargedAt(v, 1), qb && (qa || qb) ? 1 : 0) << i;
    answers.push_back(qa || qb);
  }
  EXPECT_EQ(answers, (std::vector<bool>{true, true, true, false, false}));
  EXPECT_EQ(stored(redis, "qa"), 1);
  EXPECT_EQ(stored(redis, "qb"), 3);
}

TEST(EventualScriptTest, AnOrdinaryDenialStillDeniesAQuotaRequest) {
  RedisServer redis;
  // An ordinary limit of 1 next to a quota group with room: its denial denies, and the quota
  // entry is not charged.
  const std::vector<Entry> both = {{"plain", 1, -1}, {"quota", 10, 0}};
  std::vector<std::int64_t> first = decide(redis, both);
  EXPECT_EQ(chargedAt(first, 0), 1);
  EXPECT_EQ(chargedAt(first, 1), 1);
  std::vector<std::int64_t> second = decide(redis, both);
  EXPECT_FALSE(allowedAt(second, 0));
  EXPECT_TRUE(allowedAt(second, 1));
  EXPECT_EQ(chargedAt(second, 1), 0);
  EXPECT_EQ(stored(redis, "quota"), 1);
}

TEST(EventualScriptTest, AShadowQuotaLimitNeverFailsItsGroup) {
  RedisServer redis;
  const std::vector<Entry> entries = {{"shadowed", 1, 0, true}};
  decide(redis, entries);
  std::vector<std::int64_t> v = decide(redis, entries);
  EXPECT_FALSE(allowedAt(v, 0));
  // The request is allowed (the group's only limit is shadow), the denied entry not charged.
  EXPECT_EQ(chargedAt(v, 0), 0);
  EXPECT_EQ(stored(redis, "shadowed"), 1);
}

TEST(EventualRequestAllowedTest, StoreSemantics) {
  std::vector<StoreLimit> limits(3);
  limits[0].quota_group = 0;
  limits[1].quota_group = 1;
  limits[2].quota_group = -1;
  std::vector<EventualLimitRef> refs;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    refs.push_back(EventualLimitRef{i, &limits[i]});
  }
  auto outcomes = [](bool a, bool b, bool c) {
    std::vector<Outcome> o(3);
    o[0].allowed = a;
    o[1].allowed = b;
    o[2].allowed = c;
    return o;
  };
  EXPECT_TRUE(EventualEngine::requestAllowed(refs, outcomes(true, true, true), {}));
  EXPECT_TRUE(EventualEngine::requestAllowed(refs, outcomes(false, true, true), {}));
  EXPECT_TRUE(EventualEngine::requestAllowed(refs, outcomes(true, false, true), {}));
  EXPECT_FALSE(EventualEngine::requestAllowed(refs, outcomes(false, false, true), {}));
  EXPECT_FALSE(EventualEngine::requestAllowed(refs, outcomes(true, true, false), {}));
  // A strict limit's group that may still pass keeps the request open.
  EXPECT_TRUE(EventualEngine::requestAllowed(refs, outcomes(false, false, true), {7}));
  EXPECT_FALSE(EventualEngine::requestAllowed(refs, outcomes(false, false, true), {0}));
  limits[1].shadow = true;
  EXPECT_TRUE(EventualEngine::requestAllowed(refs, outcomes(false, false, true), {}));
}

}  // namespace
}  // namespace sluice
