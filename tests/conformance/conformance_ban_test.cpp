// The penalty box (docs/bans.md) on the memory store (C++: src/limiter/ban.cpp) and a real
// redis-server (Lua: 85_ban.lua): the same ladder, to the microsecond, then random traces
// over algorithms, shadow limits, two limits, reports and envoy's counting compared field by
// field, with the Redis store's local cache on and off, and the admin reset lifting a ban.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "conformance/conformance_harness.hpp"
#include "sluice/store/limit_override.hpp"

namespace sluice::conformance {
namespace {

constexpr Micros kSec = kMicrosPerSecond;

std::string show(const Outcome& o) {
  return str(o) + "{banned=" + std::to_string(o.banned) + " step=" + std::to_string(o.ban_step) +
         "}";
}

bool sameBan(const Outcome& a, const Outcome& b) {
  return sameOutcome(a, b) && a.banned == b.banned && a.ban_step == b.ban_step;
}

StoreLimit banned(const std::string& bucket, Algorithm algorithm, std::int64_t limit, Micros window,
                  std::int64_t after, Micros duration, std::int64_t backoff_milli, Micros max) {
  StoreLimit l;
  l.key = bucket;
  l.params.algorithm = algorithm;
  l.params.limit = limit;
  l.params.window_us = window;
  if (algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kLeakyBucket) {
    l.params.burst = limit;
  }
  l.params.ban = BanParams{after, duration, backoff_milli, max, 5 * duration, window};
  return l;
}

class ConformanceBanTest : public ::testing::TestWithParam<bool> {
 protected:
  ConformanceBanTest() : pair_(testPrefix(), GetParam()) {}

  /// Runs `request` on both stores and expects the same answer; returns it.
  StoreResponse both(const StoreRequest& request, const std::string& where) {
    Result<StoreResponse> m = pair_.run(pair_.memory(), request);
    Result<StoreResponse> r = pair_.run(pair_.redis(), request);
    EXPECT_TRUE(m.ok() && r.ok()) << where << (r.ok() ? "" : r.error().message);
    if (!m.ok() || !r.ok()) {
      return {};
    }
    EXPECT_EQ(m->allowed, r->allowed) << where;
    EXPECT_EQ(m->outcomes.size(), r->outcomes.size()) << where;
    for (std::size_t i = 0; i < std::min(m->outcomes.size(), r->outcomes.size()); ++i) {
      EXPECT_TRUE(sameBan(m->outcomes[i], r->outcomes[i]))
          << where << " limit " << i << ": memory " << show(m->outcomes[i]) << " redis "
          << show(r->outcomes[i]);
    }
    return *m;
  }

  void reset(const std::vector<std::string>& prefixes) {
    for (Store* store : {&pair_.memory(), &pair_.redis()}) {
      std::optional<Result<std::size_t>> done;
      store->reset(prefixes, [&](Result<std::size_t> r) { done.emplace(std::move(r)); });
      ASSERT_TRUE(test::runUntil(pair_.io(), [&] { return done.has_value(); }));
    }
  }

  /// Sets `value` for `rule`'s slot in `tag` (a client and domain) on both stores.
  void setOverride(const std::string& tag, const std::string& rule, StoredOverridePtr value) {
    for (Store* store : {&pair_.memory(), &pair_.redis()}) {
      std::optional<Result<bool>> done;
      store->setOverride({tag, overrideRuleField(rule)}, value, 10,
                         [&](Result<bool> r) { done.emplace(std::move(r)); });
      ASSERT_TRUE(test::runUntil(pair_.io(), [&] { return done.has_value(); }));
      ASSERT_TRUE(done->ok()) << done->error().message;
    }
  }

  StorePair pair_;
};

TEST_P(ConformanceBanTest, TheLadderIsTheSameOnBothStores) {
  StoreLimit limit = banned("api:user=m;i0;fw", Algorithm::kFixedWindow, 2, 60 * kSec, 3, 10 * kSec,
                            1500, 25 * kSec);
  limit.params.ban.forgive_us = 3600 * kSec;  // each round comes back after 61 s
  const StoreRequest request = clientRequest({limit}, 1, "m");
  std::vector<Micros> lengths;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 8; ++i) {
      const StoreResponse r =
          both(request, "round " + std::to_string(round) + " #" + std::to_string(i));
      if (!r.outcomes.empty() && r.outcomes[0].ban_step > 0) {
        lengths.push_back(r.outcomes[0].retry_after_us);
      }
      pair_.clock().advance(std::chrono::microseconds(137'001));
    }
    pair_.clock().advance(std::chrono::microseconds(61 * kSec));
  }
  // 10 s, 15 s, 22.5 s, then the max.
  EXPECT_EQ(lengths, (std::vector<Micros>{10 * kSec, 15 * kSec, 22'500'000, 25 * kSec}));
}

TEST_P(ConformanceBanTest, TheResetLiftsABanOnBothStores) {
  const StoreLimit limit = banned("api:user=r;i0;fw", Algorithm::kFixedWindow, 1, 60 * kSec, 2,
                                  30 * kSec, 2000, 60 * kSec);
  const StoreRequest request = clientRequest({limit}, 1, "r");
  for (int i = 0; i < 3; ++i) {
    both(request, "flood " + std::to_string(i));
  }
  EXPECT_TRUE(both(request, "banned").outcomes.at(0).banned);
  reset(BucketKey::domainPrefixes("r", "api"));
  EXPECT_TRUE(both(request, "after the reset").allowed);
}

TEST_P(ConformanceBanTest, ABannedLoneLimitIsRefusedOnOneReadWithoutItsOverride) {
  static const std::string kRule = "login";
  StoreLimit limit = banned("api:user=o;nlogin;fw", Algorithm::kFixedWindow, 5, 60 * kSec, 2,
                            30 * kSec, 2000, 60 * kSec);
  limit.override_rule = &kRule;
  const StoreRequest request = clientRequest({limit}, 1, "o");
  auto lowered = std::make_shared<StoredOverride>();
  lowered->params = limit.params;
  lowered->params.limit = 1;
  lowered->requests_per_unit = 1;
  lowered->unit = TimeUnit::kMinute;
  lowered->reason = "abuse";
  lowered->record_json = R"({"domain":"api","rule":"login","clientId":"o"})";
  setOverride("o|api", kRule, lowered);
  // The override's limit of 1 decides (and says so) until the ban starts.
  EXPECT_EQ(both(request, "allowed").overrides.size(), 1u);
  for (int i = 0; i < 2; ++i) {
    both(request, "flood " + std::to_string(i));
  }
  sharedRedis().command({"CONFIG", "RESETSTAT"});
  const StoreResponse memory = both(request, "banned");
  ASSERT_TRUE(memory.outcomes.at(0).banned);
  EXPECT_TRUE(memory.overrides.empty());
  Result<StoreResponse> redis = pair_.run(pair_.redis(), request);
  ASSERT_TRUE(redis.ok());
  EXPECT_TRUE(redis->outcomes.at(0).banned);
  EXPECT_TRUE(redis->overrides.empty());
  // Two banned answers from Redis (or its local cache): the ban key's MGET each, nothing else.
  EXPECT_LE(sharedRedis().commandCalls("mget"), 2);
  EXPECT_EQ(sharedRedis().commandCalls("hmget"), 0);
  EXPECT_EQ(sharedRedis().commandCalls("set"), 0);
}

TEST_P(ConformanceBanTest, EnvoysCountingIsRefusedFromTheLocalCacheDuringABan) {
  const StoreLimit limit = banned("api:user=e;i0;fw", Algorithm::kFixedWindow, 1, 60 * kSec, 2,
                                  30 * kSec, 2000, 60 * kSec);
  StoreRequest request = clientRequest({limit}, 1, "e");
  request.charge = Charge::kEvery;
  Counter& hits = pair_.metrics().counter("local_cache_hits_total");
  for (int i = 0; i < 3; ++i) {
    both(request, "flood " + std::to_string(i));  // the third starts the ban
  }
  // Counted denials are never answered locally; a ban, which charges nothing, is.
  EXPECT_EQ(hits.value(), 0u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(both(request, "banned " + std::to_string(i)).outcomes.at(0).banned);
    pair_.clock().advance(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(hits.value(), GetParam() ? 3u : 0u);
  // Past the ban, the next request asks Redis again, and both stores agree.
  pair_.clock().advance(std::chrono::seconds(30));
  EXPECT_FALSE(both(request, "after the ban").outcomes.at(0).banned);
}

TEST_P(ConformanceBanTest, RandomTracesAgree) {
  std::mt19937_64 random(20261126);
  const Algorithm algorithms[] = {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog,
                                  Algorithm::kSlidingWindowCounter, Algorithm::kTokenBucket,
                                  Algorithm::kLeakyBucket};
  int bans_started = 0;
  int banned_answers = 0;
  for (int trace = 0; trace < 10; ++trace) {
    const Algorithm algorithm = algorithms[trace % 5];
    const std::string client = "t" + std::to_string(trace);
    StoreLimit first = banned("api:user=x;i0;" + std::to_string(trace), algorithm, 3, 2 * kSec,
                              2 + trace % 3, 3 * kSec, 1000 + 250 * (trace % 5), 20 * kSec);
    first.shadow = trace == 7;
    first.params.count_rejected = trace == 2;
    StoreLimit second = banned("api:path=/;i1;" + std::to_string(trace), Algorithm::kFixedWindow, 5,
                               4 * kSec, 4, 2 * kSec, 2000, 8 * kSec);
    for (int step = 0; step < 120; ++step) {
      const int kind = static_cast<int>(random() % 10);
      std::vector<StoreLimit> limits{first};
      if (kind >= 7) {
        limits.push_back(second);
      }
      StoreRequest request =
          clientRequest(limits, 1 + static_cast<std::int64_t>(random() % 2), client);
      request.charge = kind == 1   ? Charge::kReport
                       : kind == 2 ? Charge::kEvery
                                   : Charge::kAllOrNothing;
      const StoreResponse r =
          both(request, "trace " + std::to_string(trace) + " step " + std::to_string(step));
      for (const Outcome& o : r.outcomes) {
        bans_started += o.ban_step > 0 ? 1 : 0;
        banned_answers += o.banned ? 1 : 0;
      }
      pair_.clock().advance(std::chrono::microseconds(
          static_cast<Micros>(random() % 4 == 0 ? random() % (6 * kSec) : random() % 300'000)));
    }
  }
  // The traces do reach the penalty box, and its refusals.
  EXPECT_GT(bans_started, 10);
  EXPECT_GT(banned_answers, 50);
}

INSTANTIATE_TEST_SUITE_P(LocalCache, ConformanceBanTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "CacheOn" : "CacheOff"; });

}  // namespace
}  // namespace sluice::conformance
