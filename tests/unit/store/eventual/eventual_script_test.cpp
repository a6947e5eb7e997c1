// The eventual script's decide op (a tight key's round trip) against a real redis-server:
// quota-mode entries decide with the store's semantics (include/sluice/store/store.hpp), not
// as shadow limits. And EventualEngine::requestAllowed, the same rule on the C++ side.
#include "store/eventual/eventual_script.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
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
  /// Regions: this region's count the other regions confirmed, and the cap beyond it.
  std::int64_t confirmed = 0;
  std::int64_t cap = 0;
  std::int64_t regions = 0;  ///< the share's divisor (0: the cap only)
};

/// One op-1 (decide) call of cost 1 on fixed_window entries by writer "s1"; returns the reply
/// numbers (15 per entry).
/// `keys_in_args`: no key declared, the keys after the entries (a Redis Cluster sync).
std::vector<std::int64_t> decide(RedisServer& redis, const std::vector<Entry>& entries,
                                 bool keys_in_args = false) {
  std::vector<std::string> argv = {"EVAL", eventual::composeEventualScript(),
                                   keys_in_args ? "0" : std::to_string(2 * entries.size())};
  std::vector<std::string> keys;
  for (const Entry& e : entries) {
    keys.push_back(e.hash);
    keys.push_back(e.hash + ":prev");
  }
  if (!keys_in_args) {
    argv.insert(argv.end(), keys.begin(), keys.end());
  }
  argv.push_back(std::to_string(kNow));
  argv.push_back("s1");
  for (const Entry& e : entries) {
    const int flags = (e.shadow ? 2 : 0) | (e.quota_group + 1) * 4;
    for (std::int64_t v :
         {std::int64_t{1}, std::int64_t{0}, e.limit, kDay, std::int64_t{0}, std::int64_t{0},
          std::int64_t{0}, e.regions, std::int64_t{1}, std::int64_t{flags}, e.confirmed, e.cap}) {
      argv.push_back(std::to_string(v));
    }
  }
  if (keys_in_args) {
    argv.insert(argv.end(), keys.begin(), keys.end());
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

// Regions, near the limit: a region holds at most `cap` hits beyond what the other regions
// confirmed of its count (its sidecars' fields); past it the request is denied, uncharged,
// while the limit itself has room, and allowed again once more is confirmed.
TEST(EventualScriptTest, ARegionsHitsBeyondTheConfirmedCountAreCapped) {
  RedisServer redis;
  // Another sidecar of this region holds 5 hits, the other region 100 (field rb).
  redis.command({"HSET", "capped", "s2", "5", "rb", "100"});
  Entry e{"capped", 1'000};
  e.confirmed = 3;
  e.cap = 4;
  std::vector<bool> answers;
  for (int i = 0; i < 4; ++i) {
    std::vector<std::int64_t> v = decide(redis, {e});
    answers.push_back(allowedAt(v, 0));
    EXPECT_EQ(chargedAt(v, 0), allowedAt(v, 0) ? 1 : 0) << i;
  }
  // 5 + 1 + 1 - 3 = 4 <= 4: two pass, then 5 + 3 - 3 > 4.
  EXPECT_EQ(answers, (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(stored(redis, "capped"), 2);
  std::vector<std::int64_t> denied = decide(redis, {e});
  EXPECT_GT(denied[3], 0);        // retry_after: after the next confirmation
  EXPECT_LE(denied[3], 100'000);  // at most 100 ms
  // The other region confirmed 7: room for 4 more (11 - 7 = 4).
  e.confirmed = 7;
  int allowed = 0;
  for (int i = 0; i < 6; ++i) {
    allowed += allowedAt(decide(redis, {e}), 0) ? 1 : 0;
  }
  EXPECT_EQ(allowed, 4);
  // No cap (one region, or a key that is not tight): only the limit counts.
  e.cap = 0;
  EXPECT_TRUE(allowedAt(decide(redis, {e}), 0));
}

// With the number of regions, a fixed_window region may hold its share of what remains when
// that is more than the cap: (L - confirmed - the other regions' counts) / regions.
TEST(EventualScriptTest, ARegionMayHoldItsShareOfWhatRemains) {
  RedisServer redis;
  redis.command({"HSET", "shared", "s2", "10", "rb", "30"});
  Entry e{"shared", 100};
  e.confirmed = 10;
  e.cap = 2;
  e.regions = 2;
  int allowed = 0;
  for (int i = 0; i < 40; ++i) {
    allowed += allowedAt(decide(redis, {e}), 0) ? 1 : 0;
  }
  // (100 - 10 - 30) / 2 = 30 beyond the 10 confirmed.
  EXPECT_EQ(allowed, 30);
  EXPECT_EQ(stored(redis, "shared"), 30);
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

TEST(EventualScriptTest, KeysAfterTheEntriesDecideLikeDeclaredKeys) {
  // A cluster's sync names the keys of many slots in the arguments: the same answers, the
  // same hashes written.
  RedisServer redis;
  const std::vector<Entry> declared = {{"d1", 2}, {"d2", 5, 0}, {"d3", 9}};
  const std::vector<Entry> in_args = {{"a1", 2}, {"a2", 5, 0}, {"a3", 9}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(decide(redis, declared), decide(redis, in_args, true)) << i;
  }
  EXPECT_EQ(stored(redis, "a1"), stored(redis, "d1"));
  EXPECT_EQ(stored(redis, "a2"), stored(redis, "d2"));
  EXPECT_EQ(stored(redis, "a3"), 2);
}

TEST(EventualScriptTest, TheSketchSeedIsSetOnceThenRead) {
  RedisServer redis;
  const std::string script = eventual::composeEventualScript();
  const std::string first(32, 'a');
  ReplyPtr set = redis.command({"EVAL", script, "1", "seed", "sketch-seed", first});
  ASSERT_EQ(set->type, REDIS_REPLY_STRING);
  EXPECT_EQ(std::string(set->str, set->len), first);
  ReplyPtr again =
      redis.command({"EVAL", script, "1", "seed", "sketch-seed", std::string(32, 'b')});
  ASSERT_EQ(again->type, REDIS_REPLY_STRING);
  EXPECT_EQ(std::string(again->str, again->len), first);
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

/// One sketch cell entry (op 2) of a call: `own` is the writer's cumulative count it sends.
struct Cell {
  std::string hash;
  std::int64_t own = 0;
};

/// One call by `writer` deciding a client of a sketch of limit `limit` (cost 1, W = 1 day)
/// on `cells` (one per row); returns the reply numbers (15 per cell).
std::vector<std::int64_t> decideSketch(RedisServer& redis, const std::string& writer,
                                       std::int64_t limit, const std::vector<Cell>& cells) {
  std::vector<std::string> argv = {"EVAL", eventual::composeEventualScript(),
                                   std::to_string(2 * cells.size())};
  for (const Cell& c : cells) {
    argv.push_back(c.hash);
    argv.push_back(c.hash + ":prev");
  }
  argv.push_back(std::to_string(kNow));
  argv.push_back(writer);
  for (std::size_t row = 0; row < cells.size(); ++row) {
    // op 2, sliding_window_counter, L, W, burst = row, value, prev value, acked = depth,
    // cost, flags, tat.
    for (std::int64_t v :
         {std::int64_t{2}, std::int64_t{2}, limit, kDay, static_cast<std::int64_t>(row),
          cells[row].own, std::int64_t{0}, static_cast<std::int64_t>(cells.size()), std::int64_t{1},
          std::int64_t{0}, std::int64_t{0}, std::int64_t{0}}) {
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
  EXPECT_EQ(out.size(), cells.size() * eventual::kScriptReplyStride);
  return out;
}

std::int64_t storedOf(RedisServer& redis, const std::string& hash, const std::string& writer) {
  ReplyPtr r = redis.command({"HGET", hash, writer});
  return r->type == REDIS_REPLY_STRING ? std::stoll(r->str) : 0;
}

TEST(EventualScriptTest, ASketchClientIsDecidedOnItsSmallestSummedCell) {
  RedisServer redis;
  // Another writer has 3 hits in the client's row-0 cell (collisions) and 1 in its row-1
  // cell: the client's count is min(3, 1) = 1, so with L = 5 writer s1 gets 4 more.
  redis.command({"HSET", "cell0", "s2", "3"});
  redis.command({"HSET", "cell1", "s2", "1"});
  std::vector<bool> answers;
  for (int i = 0; i < 6; ++i) {
    std::vector<std::int64_t> v = decideSketch(redis, "s1", 5, {{"cell0", 0}, {"cell1", 0}});
    // Both cells carry the client's decision.
    EXPECT_EQ(allowedAt(v, 0), allowedAt(v, 1)) << i;
    EXPECT_EQ(v[1], v[eventual::kScriptReplyStride + 1]) << i;  // remaining
    EXPECT_EQ(chargedAt(v, 0), allowedAt(v, 0) ? 1 : 0) << i;
    EXPECT_EQ(chargedAt(v, 1), allowedAt(v, 1) ? 1 : 0) << i;
    answers.push_back(allowedAt(v, 0));
  }
  EXPECT_EQ(answers, (std::vector<bool>{true, true, true, true, false, false}));
  EXPECT_EQ(storedOf(redis, "cell0", "s1"), 4);
  EXPECT_EQ(storedOf(redis, "cell1", "s1"), 4);
  // The other writer's entries are never touched.
  EXPECT_EQ(storedOf(redis, "cell0", "s2"), 3);
  EXPECT_EQ(storedOf(redis, "cell1", "s2"), 1);
}

TEST(EventualScriptTest, ASketchChargeIsConservativeAndSentCountsAreRaisedFirst) {
  RedisServer redis;
  // s1 sends own counts 2 and 0 (its local sketch): they are raised first, then the charge
  // raises each own cell to min(own) + cost = 1: row 0 (already 2) is not charged.
  std::vector<std::int64_t> v = decideSketch(redis, "s1", 10, {{"cell0", 2}, {"cell1", 0}});
  EXPECT_TRUE(allowedAt(v, 0));
  EXPECT_EQ(chargedAt(v, 0), 0);
  EXPECT_EQ(chargedAt(v, 1), 1);
  EXPECT_EQ(storedOf(redis, "cell0", "s1"), 2);
  EXPECT_EQ(storedOf(redis, "cell1", "s1"), 1);
  // A replay of the same sent counts changes nothing but the new charge.
  v = decideSketch(redis, "s1", 10, {{"cell0", 2}, {"cell1", 1}});
  EXPECT_EQ(chargedAt(v, 0), 0);
  EXPECT_EQ(chargedAt(v, 1), 1);
  EXPECT_EQ(storedOf(redis, "cell0", "s1"), 2);
  EXPECT_EQ(storedOf(redis, "cell1", "s1"), 2);
}

/// One synced key: its algorithm's arguments (the main layout's op 0 and the sync layout's).
struct SyncCase {
  int algorithm = 0;  ///< 0 fixed_window, 2 sliding_window_counter, 3 token_bucket
  std::int64_t limit = 1'000;
  std::int64_t window = 60'000'000;
  std::int64_t burst = 0;
  std::int64_t value = 0;
  std::int64_t prev_value = 0;
  std::int64_t acked = 0;
  std::int64_t tat_us = 0;
  std::int64_t tat_rem = 0;
};

/// One sync call by "s1" of `cases` on the hashes `<prefix><i>` and `<prefix><i>:prev`, in the
/// main layout (op 0) or the sync layout; returns the reply's numbers.
std::vector<std::int64_t> syncCall(RedisServer& redis, const std::vector<SyncCase>& cases,
                                   const std::string& prefix, bool sync_layout, bool keys_in_args) {
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    keys.push_back(prefix + std::to_string(i));
    keys.push_back(prefix + std::to_string(i) + ":prev");
  }
  std::vector<std::string> argv = {"EVAL", eventual::composeEventualScript(),
                                   keys_in_args ? "0" : std::to_string(keys.size())};
  if (!keys_in_args) {
    argv.insert(argv.end(), keys.begin(), keys.end());
  }
  argv.push_back(std::to_string(kNow));
  argv.push_back("s1");
  if (sync_layout) {
    argv.emplace_back(eventual::kSyncLayout);
  }
  auto put = [&argv](std::initializer_list<std::int64_t> values) {
    for (std::int64_t v : values) {
      argv.push_back(std::to_string(v));
    }
  };
  for (const SyncCase& c : cases) {
    if (!sync_layout) {
      put({0, c.algorithm, c.limit, c.window, c.burst, c.value, c.prev_value, c.acked, 0, 0,
           c.tat_us, c.tat_rem});
    } else if (c.algorithm == 3) {
      put({3, c.limit, c.window, c.burst, c.value, c.acked, c.tat_us, c.tat_rem});
    } else {
      put({c.algorithm, c.window, c.value, c.prev_value});
    }
  }
  if (keys_in_args) {
    argv.insert(argv.end(), keys.begin(), keys.end());
  }
  ReplyPtr reply = redis.command(argv);
  EXPECT_EQ(reply->type, REDIS_REPLY_STRING) << (reply->str != nullptr ? reply->str : "");
  std::vector<std::int64_t> out;
  if (reply->type == REDIS_REPLY_STRING) {
    std::istringstream in(std::string(reply->str, reply->len));
    for (std::int64_t v; in >> v;) {
      out.push_back(v);
    }
  }
  return out;
}

std::vector<std::string> hashOf(RedisServer& redis, const std::string& key) {
  ReplyPtr r = redis.command({"HGETALL", key});
  std::vector<std::string> fields;
  for (std::size_t i = 0; i < r->elements; ++i) {
    fields.emplace_back(r->element[i]->str, r->element[i]->len);
  }
  std::sort(fields.begin(), fields.end());
  return fields;
}

// The engine's syncs use the shorter sync layout: it must read and write exactly what the
// main layout's op 0 does, with or without declared keys (a Redis Cluster's calls).
TEST(EventualScriptTest, TheSyncLayoutSyncsAsOpZeroDoes) {
  RedisServer redis;
  const std::vector<SyncCase> cases = {
      {0, 1'000, 60'000'000, 0, 7, 0},             // fixed_window, a new count
      {0, 1'000, 60'000'000, 0, 0, 5},             // the previous window's hits only
      {0, 1'000, 60'000'000, 0, 2, 0},             // below the stored own count: unchanged
      {2, 1'000, 60'000'000, 0, 4, 3},             // sliding_window_counter
      {2, 1'000, 60'000'000, 0, 0, 0},             // read only (reads the previous window)
      {3, 100, 60'000'000, 20, 6, 0, 2, kNow, 5},  // token_bucket
      {3, 100, 60'000'000, 0, 1, 0, 0, 0, 0},      // token_bucket, burst = L
      {0, 1'000'000, 1'000'000, 0, 1'234'567, 0},  // a count past 10^6
  };
  for (bool keys_in_args : {false, true}) {
    const std::string main = keys_in_args ? "mk" : "m";
    const std::string sync = keys_in_args ? "sk" : "s";
    for (const std::string& prefix : {main, sync}) {
      // Other writers' fields, and an own count ahead of the third case's value.
      for (std::size_t i = 0; i < cases.size(); ++i) {
        const std::string key = prefix + std::to_string(i);
        redis.command({"HSET", key, "s2", "11", "rx", "4"});
        redis.command({"HSET", key + ":prev", "s3", "9"});
      }
      redis.command({"HSET", prefix + "2", "s1", "6"});
    }
    const std::vector<std::int64_t> a = syncCall(redis, cases, main, false, keys_in_args);
    const std::vector<std::int64_t> b = syncCall(redis, cases, sync, true, keys_in_args);
    ASSERT_EQ(a.size(), cases.size() * eventual::kScriptReplyStride);
    ASSERT_EQ(b.size(), cases.size() * eventual::kSyncReplyStride);
    for (std::size_t i = 0; i < cases.size(); ++i) {
      for (int f = 0; f < eventual::kSyncReplyStride; ++f) {
        EXPECT_EQ(a[i * eventual::kScriptReplyStride + eventual::kOthers + f],
                  b[i * eventual::kSyncReplyStride + f])
            << "case " << i << " field " << f << (keys_in_args ? " keys in args" : "");
      }
      const eventual::KeyReading ra = eventual::readingOf(&a[i * eventual::kScriptReplyStride], 7);
      const eventual::KeyReading rb =
          eventual::syncReadingOf(&b[i * eventual::kSyncReplyStride], 7);
      EXPECT_EQ(ra.others, rb.others);
      EXPECT_EQ(ra.own, rb.own);
      EXPECT_EQ(ra.prev_own, rb.prev_own);
      EXPECT_EQ(ra.tat.a, rb.tat.a);
      const std::string n = std::to_string(i);
      EXPECT_EQ(hashOf(redis, main + n), hashOf(redis, sync + n)) << i;
      EXPECT_EQ(hashOf(redis, main + n + ":prev"), hashOf(redis, sync + n + ":prev")) << i;
    }
    // What the cases wrote: the new count, the previous window's, never a lower own count.
    EXPECT_EQ(hashOf(redis, sync + "0"),
              (std::vector<std::string>{"11", "4", "7", "rx", "s1", "s2"}));
    EXPECT_EQ(stored(redis, sync + "1:prev"), 5);
    EXPECT_EQ(stored(redis, sync + "2"), 6);
    EXPECT_EQ(stored(redis, sync + "7"), 1'234'567);
  }
}

TEST(EventualSketchCellsTest, OneSeedHashesAClientToTheSameCellsEverywhere) {
  StoreLimit limit;
  limit.key = "client|api|user=alice";
  limit.params.algorithm = Algorithm::kSketch;
  limit.params.consistency = Consistency::kEventual;
  limit.params.sketch.width = 1024;
  limit.params.sketch.depth = 3;
  auto identity = std::make_shared<SketchIdentity>();
  identity->key = "api:api.user:i0:w1024d3";
  limit.params.sketch.identity = identity;
  ASSERT_TRUE(EventualEngine::isSketch(limit));
  // Two sidecars with the seed from Redis: the same d cells, one per row.
  const SketchHasher one(0x0123456789abcdefULL, 0x0fedcba987654321ULL);
  const SketchHasher two(0x0123456789abcdefULL, 0x0fedcba987654321ULL);
  const std::vector<std::string> keys = EventualEngine::sketchCellKeys(one, limit);
  ASSERT_EQ(keys.size(), 3U);
  EXPECT_EQ(keys, EventualEngine::sketchCellKeys(two, limit));
  const SketchCells cells = one.cells(limit.key, 1024, 3, 0, 0);
  for (std::size_t row = 0; row < keys.size(); ++row) {
    EXPECT_EQ(keys[row], EventualEngine::sketchTag(limit.params.sketch) + ":" + one.fingerprint() +
                             ":api:api.user:i0:w1024d3:" + std::to_string(row) + "." +
                             std::to_string(cells.columns[row]));
  }
  // One tag per rule: "ske." and 4 hex digits, a cluster slot for all of the rule's cells.
  const std::string tag = EventualEngine::sketchTag(limit.params.sketch);
  EXPECT_EQ(tag.size(), 8U);
  EXPECT_TRUE(tag.starts_with("ske.")) << tag;
  // Another seed names other cells (its fingerprint): sidecars of different seeds never
  // add up each other's counts.
  const SketchHasher other(1, 2);
  EXPECT_NE(EventualEngine::sketchCellKeys(other, limit)[0].substr(0, 13), keys[0].substr(0, 13));
  // Not a sketch: no cells.
  StoreLimit counter = limit;
  counter.params.algorithm = Algorithm::kFixedWindow;
  EXPECT_FALSE(EventualEngine::isSketch(counter));
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
