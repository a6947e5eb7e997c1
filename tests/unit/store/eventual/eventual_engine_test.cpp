// The eventual engine on simulated time: its sync loop, the replication between regions, a
// cut region link and a Redis restart, driven by a ManualExecutor against real redis-servers
// (RedisLink: only the network is simulated).
#include "store/eventual/eventual_engine.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sluice/common/manual_executor.hpp"
#include "store/eventual/eventual_script.hpp"
#include "support/redis_server.hpp"
#include "unit/store/eventual/redis_link.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using test::RedisLink;
using test::RedisServer;

constexpr auto kInterval = 50ms;

/// One sidecar's engine in `region`, its links to each region's Redis kept for the test.
struct Sidecar {
  Metrics metrics;
  std::map<std::string, std::shared_ptr<RedisLink>> links;  ///< by region name
  std::unique_ptr<EventualEngine> engine;
};

class EventualEngineTest : public ::testing::Test {
 protected:
  EventualEngineTest() {
    limit_.key = "client-1|api";
    limit_.params.algorithm = Algorithm::kFixedWindow;
    limit_.params.limit = 100;
    limit_.params.window_us = 3600 * kMicrosPerSecond;
    limit_.params.consistency = Consistency::kEventual;
    refs_ = {EventualLimitRef{0, &limit_}};
  }

  /// A started sidecar of `region` whose own Redis is servers_[region]; `others` are the
  /// other regions it replicates to.
  std::unique_ptr<Sidecar> sidecar(const std::string& region,
                                   const std::vector<std::string>& others = {},
                                   std::size_t max_keys = 200'000) {
    auto s = std::make_unique<Sidecar>();
    EventualOptions options;
    options.sync_interval = kInterval;
    options.max_keys = max_keys;
    options.region = region;
    options.quiet_keys = quiet_keys_;
    for (const std::string& name : others) {
      EventualRegion r;
      r.name = name;
      options.regions.push_back(r);
    }
    RedisOptions local;
    local.key_prefix = "t";
    Sidecar* raw = s.get();
    auto backends = [this, raw, region](const EventualRegion* other,
                                        Metrics&) -> std::shared_ptr<redis::RedisBackend> {
      const std::string name = other != nullptr ? other->name : region;
      auto link =
          std::make_shared<RedisLink>(executor_, server(name), eventual::composeEventualScript());
      raw->links[name] = link;
      return link;
    };
    s->engine =
        std::make_unique<EventualEngine>(options, local, clock_, executor_, backends, s->metrics);
    s->engine->start();
    executor_.runReady();
    return s;
  }

  RedisServer& server(const std::string& region) {
    auto& slot = servers_[region];
    if (!slot) {
      slot = std::make_unique<RedisServer>();
    }
    return *slot;
  }

  /// Admits `n` hits on the sidecar's view (decided locally).
  void admit(Sidecar& s, int n) {
    for (int i = 0; i < n; ++i) {
      EventualEngine::Local local = s.engine->decideLocally(refs_, 1, true, true);
      ASSERT_TRUE(local.decided);
      ASSERT_TRUE(local.allowed);
    }
  }

  /// What the sidecar's view says remains, without charging.
  std::int64_t remaining(Sidecar& s) {
    EventualEngine::Local local = s.engine->decideLocally(refs_, 0, true, true);
    EXPECT_TRUE(local.decided);
    return local.outcomes.empty() ? -1 : local.outcomes.front().remaining;
  }

  /// What the sidecar's view says remains once a sync has read the key again: a sync reads
  /// the keys touched since the last one, and a key far from its limit with nothing unsent
  /// may wait up to a second for it (docs/eventual.md, "Cold keys").
  std::int64_t readFresh(Sidecar& s) {
    remaining(s);
    intervals(22);
    return remaining(s);
  }

  /// Lets `n` sync intervals pass.
  void intervals(int n) { executor_.advance(n * kInterval); }

  /// A limit of `limit` per `window`, far above what the tests admit (a blind allowance of
  /// 0.1 % of it).
  void largeLimit(std::int64_t limit, Micros window_us) {
    limit_.params.limit = limit;
    limit_.params.window_us = window_us;
  }

  /// A sidecar that decided the key once every 100 ms over 4 windows of a second, from 10 ms
  /// into the first (L = 1 000 000: a blind allowance of 1 000), with Redis's command counts
  /// reset before its first decision.
  std::unique_ptr<Sidecar> coldKeyOverFourWindows() {
    largeLimit(1'000'000, kMicrosPerSecond);
    clock_.set((clock_.nowMicros() / kMicrosPerSecond + 1) * kMicrosPerSecond + 10'000);
    auto s = sidecar("local");
    server("local").command({"CONFIG", "RESETSTAT"});
    for (int i = 0; i < 40; ++i) {
      admit(*s, 1);
      executor_.advance(100ms);
    }
    return s;
  }

  /// The sidecars' own counts in Redis: every entry of every hash (fields "s<id>").
  std::int64_t ownHitsInRedis() {
    std::int64_t total = 0;
    test::ReplyPtr keys = server("local").command({"KEYS", "*"});
    EXPECT_TRUE(keys && keys->type == REDIS_REPLY_ARRAY);
    for (std::size_t k = 0; keys && k < keys->elements; ++k) {
      test::ReplyPtr hash = server("local").command(
          {"HGETALL", std::string(keys->element[k]->str, keys->element[k]->len)});
      for (std::size_t f = 0; hash && f + 1 < hash->elements; f += 2) {
        if (hash->element[f]->str[0] == 's') {
          total += std::stoll(std::string(hash->element[f + 1]->str));
        }
      }
    }
    return total;
  }

  double counter(Sidecar& s, const std::string& name, const Labels& labels = {}) {
    return static_cast<double>(s.metrics.counter(name, labels).value());
  }

  /// `--eventual-quiet-keys` of the sidecars the test starts.
  bool quiet_keys_ = true;
  ManualClock clock_;
  ManualExecutor executor_{clock_};
  std::map<std::string, std::unique_ptr<RedisServer>> servers_;
  StoreLimit limit_;
  std::vector<EventualLimitRef> refs_;
};

TEST_F(EventualEngineTest, ASyncSharesTheHitsOfOneSidecarWithAnother) {
  auto a = sidecar("local");
  auto b = sidecar("local");
  admit(*a, 30);
  EXPECT_EQ(a->engine->pendingHits(), 30);
  EXPECT_EQ(remaining(*b), 100);

  intervals(1);  // a sends its 30 hits
  EXPECT_EQ(a->engine->pendingHits(), 0);
  EXPECT_GE(counter(*a, "eventual_syncs_total", {{"result", "ok"}}), 1);
  EXPECT_EQ(readFresh(*b), 70);
  admit(*b, 5);
  intervals(1);
  EXPECT_EQ(readFresh(*a), 65);
}

TEST_F(EventualEngineTest, ReplicationCarriesARegionsHitsToAnother) {
  auto eu = sidecar("eu", {"us"});
  auto us = sidecar("us", {"eu"});
  admit(*eu, 40);
  admit(*us, 1);
  intervals(3);  // each syncs, then replicates its region's count to the other's Redis
  EXPECT_EQ(readFresh(*us), 59);
  EXPECT_EQ(readFresh(*eu), 59);
  EXPECT_NE(eu->engine->statusJson().find("\"us\":{\"reachable\":true"), std::string::npos)
      << eu->engine->statusJson();
}

TEST_F(EventualEngineTest, ACutRegionLinkKeepsTheUpdatesUntilItReturns) {
  auto eu = sidecar("eu", {"us"});
  auto us = sidecar("us", {"eu"});
  intervals(1);  // both links answered once
  eu->links["us"]->cut(true);
  admit(*eu, 40);
  admit(*us, 1);
  intervals(10);
  EXPECT_EQ(readFresh(*us), 99);  // nothing crossed the cut link
  EXPECT_EQ(readFresh(*eu), 59);  // us' hit did: only eu's link to us is cut
  EXPECT_NE(eu->engine->statusJson().find("\"us\":{\"reachable\":false"), std::string::npos)
      << eu->engine->statusJson();
  EXPECT_EQ(counter(*eu, "eventual_region_unreachable_total", {{"region", "us"}}), 1);
  EXPECT_GT(eu->metrics.gauge("eventual_replication_lag_seconds", {{"region", "us"}}).value(), 0.3);

  eu->links["us"]->cut(false);
  intervals(3);
  EXPECT_EQ(readFresh(*us), 59);
  EXPECT_EQ(eu->metrics.gauge("eventual_replication_lag_seconds", {{"region", "us"}}).value(), 0);
}

TEST_F(EventualEngineTest, ARedisThatRestartedEmptyGetsTheOwnCountsBack) {
  auto a = sidecar("local");
  admit(*a, 25);
  intervals(1);
  EXPECT_EQ(a->engine->pendingHits(), 0);

  server("local").stop();
  a->links["local"]->cut(true);
  admit(*a, 5);
  intervals(2);
  EXPECT_NE(a->engine->statusJson().find("\"redis_reachable\":false"), std::string::npos);
  EXPECT_EQ(counter(*a, "eventual_redis_unreachable_total"), 1);
  EXPECT_EQ(a->engine->pendingHits(), 5);

  server("local").restart();  // empty: no persistence
  a->links["local"]->reconnect();
  a->links["local"]->cut(false);
  intervals(2);  // a sends all its 30 hits again, not only the 5 unconfirmed
  EXPECT_EQ(a->engine->pendingHits(), 0);
  auto b = sidecar("local");
  remaining(*b);
  intervals(2);
  EXPECT_EQ(remaining(*b), 70);
}

TEST_F(EventualEngineTest, ARenewedConnectionSendsAKeysConfirmedHitsAgain) {
  largeLimit(1'000'000, 3600 * kMicrosPerSecond);  // blind allowance: 1 000
  auto a = sidecar("local");
  admit(*a, 1);
  intervals(1);
  admit(*a, 1'000);  // past its allowance: out with the next sync
  intervals(2);
  EXPECT_EQ(ownHitsInRedis(), 1'001);
  admit(*a, 10);  // within the allowance: they wait
  intervals(2);
  EXPECT_EQ(a->engine->pendingHits(), 10);
  server("local").restart();  // empty: no persistence
  a->links["local"]->reconnect();
  // The 1 001 Redis had confirmed go out again, with the 10 that waited.
  intervals(22);
  EXPECT_EQ(ownHitsInRedis(), 1'011);
  EXPECT_EQ(a->engine->pendingHits(), 0);
}

TEST_F(EventualEngineTest, ARenewedConnectionSendsAQuietKeysFewConfirmedHitsAgain) {
  // A window of 10 s, started 10 ms ago: a key this test decides at thousands a second is
  // still far from L = 1 000 000 over the rest of it (blind allowance: 1 000).
  constexpr Micros kWindow = 10 * kMicrosPerSecond;
  largeLimit(1'000'000, kWindow);
  clock_.set((clock_.nowMicros() / kWindow + 1) * kWindow + 10'000);
  auto a = sidecar("local");
  admit(*a, 1);
  intervals(1);
  EXPECT_EQ(counter(*a, "eventual_keys_synced_total"), 0);  // quiet from its first hit
  admit(*a, 500);  // more than half its blind allowance used blind: read by the next sync
  intervals(2);
  EXPECT_EQ(counter(*a, "eventual_keys_synced_total"), 1);
  EXPECT_EQ(ownHitsInRedis(), 0);  // read only: its hits, within the allowance, wait
  EXPECT_EQ(a->engine->pendingHits(), 501);
  // Without the mark to go out again (Slot::resend), a renewed connection would leave the key
  // quiet with all its hits within its allowance, and Redis would not see them before the
  // window ends, 8 s later: they go out, fewer than the allowance.
  server("local").restart();  // empty: no persistence
  a->links["local"]->reconnect();
  intervals(22);
  EXPECT_EQ(ownHitsInRedis(), 501);
  EXPECT_EQ(a->engine->pendingHits(), 0);
  admit(*a, 10);  // quiet: they wait for the window's end
  intervals(22);
  EXPECT_EQ(a->engine->pendingHits(), 10);
  server("local").restart();
  a->links["local"]->reconnect();
  intervals(22);  // the 501 Redis had confirmed go out again, with the 10 that waited
  EXPECT_EQ(ownHitsInRedis(), 511);
  EXPECT_EQ(a->engine->pendingHits(), 0);
}

TEST_F(EventualEngineTest, StopSendsTheLastHitsBeforeTheLinksClose) {
  auto a = sidecar("local");
  admit(*a, 12);
  a->engine->stop();
  executor_.runReady();  // the last sync, then the links close
  EXPECT_EQ(a->engine->pendingHits(), 0);
  EXPECT_FALSE(a->links["local"]->ready());
  auto restarted = sidecar("local");
  remaining(*restarted);
  intervals(2);
  EXPECT_EQ(remaining(*restarted), 88);
}

TEST_F(EventualEngineTest, TheLoopRunsOnlyOnTheExecutorsTime) {
  auto a = sidecar("local");
  admit(*a, 3);
  const std::uint64_t sent = a->links["local"]->callsSent();
  executor_.runReady();
  EXPECT_EQ(a->links["local"]->callsSent(), sent);  // no time passed: no sync
  executor_.advance(kInterval - 1us);
  EXPECT_EQ(a->links["local"]->callsSent(), sent);
  executor_.advance(1us);
  EXPECT_EQ(a->links["local"]->callsSent(), sent + 1);
}

TEST_F(EventualEngineTest, AKeyFarFromItsLimitIsSyncedOncePerWindowNotPerDecision) {
  quiet_keys_ = false;
  largeLimit(1'000'000, kMicrosPerSecond);
  // Start 10 ms into a window.
  clock_.set((clock_.nowMicros() / kMicrosPerSecond + 1) * kMicrosPerSecond + 10'000);
  auto a = sidecar("local");
  for (int i = 0; i < 40; ++i) {  // 4 s, one decision every 100 ms
    admit(*a, 1);
    executor_.advance(100ms);
  }
  // One sync per window (the first, for a key never sent, then the first after each window
  // ends), not one per decision or per 250 ms.
  const double synced = counter(*a, "eventual_keys_synced_total");
  EXPECT_GE(synced, 4);
  EXPECT_LE(synced, 6);
}

TEST_F(EventualEngineTest, AColdKeyWritesEachWindowOnceItHasEnded) {
  // A sliding window's hits are read in the next window: they go out once it has ended.
  limit_.params.algorithm = Algorithm::kSlidingWindowCounter;
  auto a = coldKeyOverFourWindows();
  // The first sync reads the key without writing its first hit; each later one goes out once a
  // window has ended, writes that window's hits and reads the new window without writing the
  // hit that woke it. So one hash write per ended window (3, or 4 once the last one has gone
  // out), not two.
  const long long hsets = server("local").commandCalls("hset");
  EXPECT_GE(hsets, 3);
  EXPECT_LE(hsets, 4);
  EXPECT_LE(a->engine->pendingHits(), 10);  // the last window's hits at most
  intervals(22);
  EXPECT_EQ(a->engine->pendingHits(), 0);
}

TEST_F(EventualEngineTest, AColdFixedWindowKeysHitsAreWrittenOnlyWhileTheWindowLasts) {
  quiet_keys_ = false;
  auto a = coldKeyOverFourWindows();
  intervals(22);
  // Far from its limit, the key is read about once a second and writes what its current
  // window holds then; what a window held at its end expires with it, not sent (no decision
  // reads an ended fixed window) and not counted as dropped.
  EXPECT_EQ(a->engine->pendingHits(), 0);
  EXPECT_EQ(counter(*a, "eventual_dropped_hits_total"), 0);
  EXPECT_LE(server("local").commandCalls("hset"), 4);
  std::int64_t written = 0;
  test::ReplyPtr keys = server("local").command({"KEYS", "*"});
  ASSERT_TRUE(keys && keys->type == REDIS_REPLY_ARRAY);
  for (std::size_t k = 0; k < keys->elements; ++k) {
    test::ReplyPtr hash = server("local").command(
        {"HGETALL", std::string(keys->element[k]->str, keys->element[k]->len)});
    ASSERT_TRUE(hash && hash->type == REDIS_REPLY_ARRAY);
    for (std::size_t f = 1; f < hash->elements; f += 2) {
      const std::int64_t value = std::stoll(std::string(hash->element[f]->str));
      EXPECT_LE(value, 10);  // one window's hits at most
      written += value;
    }
  }
  EXPECT_LT(written, 40);
}

TEST_F(EventualEngineTest, AFarKeyIsSentAtLeastOnceASecond) {
  quiet_keys_ = false;  // a quiet key is not (AQuietKeyIsNeverReadAndKeepsItsHits)
  largeLimit(1'000'000, 3600 * kMicrosPerSecond);
  auto a = sidecar("local");
  auto b = sidecar("local");
  for (int i = 0; i < 40; ++i) {  // 4 s, one decision every 100 ms
    admit(*a, 1);
    executor_.advance(100ms);
  }
  const double synced = counter(*a, "eventual_keys_synced_total");
  EXPECT_GE(synced, 4);
  EXPECT_LE(synced, 6);
  intervals(22);  // a second after a's last send, the rest goes out
  EXPECT_EQ(a->engine->pendingHits(), 0);
  EXPECT_EQ(readFresh(*b), 1'000'000 - 40);
}

TEST_F(EventualEngineTest, AQuietKeyIsNeverReadAndKeepsItsHitsUntilItsWindowEnds) {
  auto a = coldKeyOverFourWindows();  // L = 1 000 000 per second: a blind allowance of 1 000
  // Neither read nor written: each window's hits, blind and fewer than half the allowance,
  // expire with it.
  EXPECT_EQ(counter(*a, "eventual_keys_synced_total"), 0);
  EXPECT_EQ(server("local").commandCalls("evalsha"), 0);
  EXPECT_EQ(server("local").commandCalls("hset"), 0);
  EXPECT_EQ(counter(*a, "eventual_dropped_hits_total"), 0);
  EXPECT_LE(a->engine->pendingHits(), 10);  // the current window's
  admit(*a, 5);
  intervals(2);
  EXPECT_EQ(a->engine->pendingHits(), 5);
  // Kept on purpose: no sync lag.
  EXPECT_EQ(a->metrics.gauge("eventual_sync_lag_seconds").value(), 0.0);
  // Not decided again, its hits expire with their window (seen by the sweep, which visits
  // every key within 64 intervals).
  intervals(70);
  EXPECT_EQ(a->engine->pendingHits(), 0);
  EXPECT_EQ(server("local").commandCalls("hset"), 0);
}

TEST_F(EventualEngineTest, QuietKeysNoLongerDecidedAreLetGoWithTheirHits) {
  largeLimit(1'000'000, kMicrosPerSecond);
  clock_.set((clock_.nowMicros() / kMicrosPerSecond + 1) * kMicrosPerSecond + 10'000);
  auto a = sidecar("local");
  std::vector<StoreLimit> limits(50, limit_);
  for (std::size_t i = 0; i < limits.size(); ++i) {
    limits[i].key = "client-" + std::to_string(i) + "|api";
  }
  auto decideAll = [&] {
    for (const StoreLimit& limit : limits) {
      const std::vector<EventualLimitRef> refs{EventualLimitRef{0, &limit}};
      EXPECT_TRUE(a->engine->decideLocally(refs, 1, true, true).allowed);
    }
  };
  decideAll();
  intervals(2);  // quiet from their first hit: never read
  decideAll();
  intervals(2);
  EXPECT_EQ(counter(*a, "eventual_keys_synced_total"), 0);
  EXPECT_EQ(a->engine->pendingHits(), 100);
  EXPECT_EQ(a->metrics.gauge("eventual_keys").value(), 50);
  // Not decided again: their hits expire with the window, and the keys are let go (idle for
  // two windows, then found by the sweep, which visits every key within 64 intervals).
  intervals(120);
  EXPECT_EQ(a->engine->pendingHits(), 0);
  EXPECT_EQ(a->metrics.gauge("eventual_keys").value(), 0);
  EXPECT_EQ(counter(*a, "eventual_keys_synced_total"), 0);
  EXPECT_EQ(server("local").commandCalls("hset"), 0);
}

TEST_F(EventualEngineTest, AQuietKeyGoesOutOncePastItsBlindAllowanceAndIsQuietAgain) {
  largeLimit(1'000'000, 3600 * kMicrosPerSecond);  // blind allowance: 1 000
  auto a = sidecar("local");
  auto b = sidecar("local");
  admit(*a, 1);
  intervals(1);  // a key never read is quiet from its first hit
  EXPECT_EQ(counter(*a, "eventual_keys_synced_total"), 0);
  for (int i = 0; i < 40; ++i) {  // 40 s, a hit a second: far, few hits: quiet
    admit(*a, 1);
    intervals(20);
  }
  EXPECT_EQ(counter(*a, "eventual_keys_synced_total"), 0);
  EXPECT_EQ(remaining(*b), 1'000'000);
  admit(*a, 960);  // 1 001 unsent: out with the next sync
  intervals(1);
  EXPECT_EQ(counter(*a, "eventual_keys_synced_total"), 1);
  EXPECT_EQ(a->engine->pendingHits(), 0);
  EXPECT_EQ(ownHitsInRedis(), 1'001);
  // A sidecar new to the key is quiet too: it reads the key, and sees them, once it has used
  // half its blind allowance (its misses meanwhile are within that allowance).
  auto c = sidecar("local");
  admit(*c, 501);
  intervals(2);
  EXPECT_EQ(counter(*c, "eventual_keys_synced_total"), 1);
  EXPECT_EQ(remaining(*c), 1'000'000 - 1'001 - 501);
}

TEST_F(EventualEngineTest, AStaleQuietKeyIsReadBeforeItsBlindAllowanceRunsOut) {
  largeLimit(1'000'000, 3600 * kMicrosPerSecond);  // blind allowance: 1 000
  auto a = sidecar("local");
  admit(*a, 1);
  intervals(1);
  intervals(30);  // never read: its decisions use the blind allowance
  admit(*a, 400);
  intervals(1);
  EXPECT_EQ(counter(*a, "eventual_keys_synced_total"), 0);
  admit(*a, 100);  // more than half the allowance used blind: read at the next sync
  intervals(1);
  EXPECT_EQ(counter(*a, "eventual_keys_synced_total"), 1);
  EXPECT_EQ(a->engine->pendingHits(), 501);  // read only: within the allowance, they wait
  intervals(30);                             // stale again: a fresh allowance
  admit(*a, 501);
  intervals(1);
  EXPECT_EQ(counter(*a, "eventual_keys_synced_total"), 2);  // read, and sent
  EXPECT_EQ(counter(*a, "eventual_round_trips_total", {{"reason", "stale"}}), 0);
  EXPECT_EQ(counter(*a, "eventual_round_trips_total", {{"reason", "unknown"}}), 0);
  EXPECT_EQ(a->engine->pendingHits(), 0);
}

TEST_F(EventualEngineTest, AWaitingKeyGoesOutOncePastItsBlindAllowance) {
  quiet_keys_ = false;  // a waiting key, not a quiet one (AQuietKeyGoesOutOncePast...)
  largeLimit(1'000'000, 3600 * kMicrosPerSecond);  // blind allowance: 1 000
  auto a = sidecar("local");
  admit(*a, 1);
  intervals(1);  // a key never read is read at once; its hit, within its allowance, waits
  EXPECT_EQ(a->engine->pendingHits(), 1);
  admit(*a, 999);
  intervals(5);  // far from its limit, within its allowance: it waits
  EXPECT_EQ(a->engine->pendingHits(), 1000);
  admit(*a, 1);  // 1 001 unsent: out with the next sync
  intervals(1);
  EXPECT_EQ(a->engine->pendingHits(), 0);
  admit(*a, 10);
  intervals(19);
  EXPECT_EQ(a->engine->pendingHits(), 10);
  intervals(2);  // a second after its last send
  EXPECT_EQ(a->engine->pendingHits(), 0);
}

TEST_F(EventualEngineTest, StopSendsTheHitsOfKeysThatWait) {
  largeLimit(1'000'000, 3600 * kMicrosPerSecond);
  auto a = sidecar("local");
  admit(*a, 1);
  intervals(1);
  admit(*a, 10);
  intervals(2);  // far from its limit: the key waits (its first hit too: it was only read)
  EXPECT_EQ(a->engine->pendingHits(), 11);
  a->engine->stop();
  executor_.runReady();
  EXPECT_EQ(a->engine->pendingHits(), 0);
  EXPECT_EQ(ownHitsInRedis(), 11);
}

TEST_F(EventualEngineTest, KeysEvictedWhileTheyWaitOrSyncAreLeftAlone) {
  quiet_keys_ = false;  // every hit goes out: none is left pending at the end
  largeLimit(1'000'000, 3600 * kMicrosPerSecond);
  // One key at most: a new key evicts one of its shard's, whether that one is queued for the
  // next sync, waits for a later one, or is in a sync whose reply has not come (or never
  // comes: the link is cut in some rounds).
  auto a = sidecar("local", {}, 1);
  std::vector<StoreLimit> limits(300, limit_);
  for (std::size_t i = 0; i < limits.size(); ++i) {
    limits[i].key = "client-" + std::to_string(i) + "|api";
  }
  for (int round = 0; round < 8; ++round) {
    a->links["local"]->cut(round % 3 == 1);
    for (std::size_t i = 0; i < limits.size(); ++i) {
      const std::vector<EventualLimitRef> refs{EventualLimitRef{0, &limits[i]}};
      EXPECT_TRUE(a->engine->decideLocally(refs, 1, true, true).allowed);
      if (i % 50 == 0) {
        intervals(round % 2 == 0 ? 1 : 7);
      }
    }
  }
  a->links["local"]->cut(false);
  intervals(30);
  EXPECT_GT(counter(*a, "eventual_dropped_hits_total"), 0);
  EXPECT_EQ(a->engine->pendingHits(), 0);
}

}  // namespace
}  // namespace sluice
