#include "sluice/limiter/eventual.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "sluice/common/clock.hpp"

namespace sluice::eventual {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

LimitParams fixedWindow(std::int64_t limit, Micros window_us) {
  LimitParams p;
  p.algorithm = Algorithm::kFixedWindow;
  p.limit = limit;
  p.window_us = window_us;
  p.consistency = Consistency::kEventual;
  return p;
}

GCounter counter(std::initializer_list<std::pair<std::string, std::int64_t>> entries) {
  GCounter c;
  for (const auto& [name, value] : entries) {
    c.raise(name, value);
  }
  return c;
}

/// A model of what the eventual script reads: the window's hash (and the previous one's), one
/// field per writer.
struct HashReading {
  std::int64_t window = kNoWindow;
  GCounter cur;
  GCounter prev;
};

/// Flattens a hash reading as the script does for the sidecar whose field is `own`, then
/// merges it.
void merge(View& view, const LimitParams& params, const HashReading& hashes, std::string_view own,
           Micros now, Micros latency_us, const Tuning& tuning) {
  KeyReading r;
  r.window = hashes.window;
  r.own = hashes.cur.value(own);
  r.others = hashes.cur.sum() - r.own;
  r.writers = hashes.cur.writers() - (r.own > 0 ? 1 : 0);
  r.prev_own = hashes.prev.value(own);
  r.prev_others = hashes.prev.sum() - r.prev_own;
  merge(view, params, r, now, latency_us, tuning);
}

TEST(GCounterTest, MergeKeepsTheLargerValueOfEachEntry) {
  GCounter a = counter({{"s1", 5}, {"s2", 3}});
  const GCounter b = counter({{"s1", 4}, {"s2", 7}, {"rEU", 2}});
  EXPECT_EQ(a.merge(b), 4 + 2);
  EXPECT_EQ(a.value("s1"), 5);
  EXPECT_EQ(a.value("s2"), 7);
  EXPECT_EQ(a.value("rEU"), 2);
  EXPECT_EQ(a.sum(), 14);
  EXPECT_EQ(a.writers(), 3u);
}

TEST(GCounterTest, ReplayedAndReorderedUpdatesChangeNothing) {
  const GCounter older = counter({{"s1", 3}, {"rEU", 10}});
  const GCounter newer = counter({{"s1", 9}, {"rEU", 12}});
  GCounter in_order;
  in_order.merge(older);
  in_order.merge(newer);
  GCounter reordered;
  reordered.merge(newer);
  reordered.merge(older);
  reordered.merge(newer);  // replayed
  EXPECT_EQ(in_order.entries(), reordered.entries());
  EXPECT_EQ(reordered.sum(), 21);
}

TEST(GCounterTest, NeverLowersAnEntry) {
  GCounter c = counter({{"s1", 8}});
  EXPECT_EQ(c.raise("s1", 2), 0);
  EXPECT_EQ(c.value("s1"), 8);
}

TEST(EventualRulesTest, OnlyMergeableAlgorithmsCanBeEventual) {
  EXPECT_TRUE(supportsEventual(Algorithm::kFixedWindow));
  EXPECT_TRUE(supportsEventual(Algorithm::kSlidingWindowCounter));
  EXPECT_TRUE(supportsEventual(Algorithm::kTokenBucket));
  EXPECT_FALSE(supportsEventual(Algorithm::kSlidingWindowLog));
  EXPECT_FALSE(supportsEventual(Algorithm::kLeakyBucket));
  EXPECT_FALSE(supportsEventual(Algorithm::kSketch));
  LimitParams sketch;
  sketch.algorithm = Algorithm::kSketch;
  // A sketch is not one counter but is eventual all the same: merged cell by cell.
  EXPECT_EQ(eventualRefusal(sketch), "");
  LimitParams warm;
  warm.algorithm = Algorithm::kTokenBucket;
  warm.warmup_us = kMicrosPerSecond;
  EXPECT_NE(eventualRefusal(warm).find("warmup"), std::string::npos);
}

class EventualViewTest : public ::testing::Test {
 protected:
  ManualClock clock_{1'700'000'000LL * kMicrosPerSecond};
  Tuning tuning_;
  LimitParams params_ = fixedWindow(100, 60 * kMicrosPerSecond);

  HashReading reading(std::int64_t window, GCounter cur, GCounter prev = {}) {
    HashReading r;
    r.window = window;
    r.cur = std::move(cur);
    r.prev = std::move(prev);
    return r;
  }
  std::int64_t window() const { return clock_.nowMicros() / params_.window_us; }
};

TEST_F(EventualViewTest, DecidesFromOthersPlusOwnHits) {
  View view;
  roll(view, params_, clock_.nowMicros());
  merge(view, params_, reading(window(), counter({{"s2", 60}, {"rEU", 30}})), "s1",
        clock_.nowMicros(), 1000, tuning_);
  for (int i = 0; i < 10; ++i) {
    const BucketState state = merged(view, params_, clock_.nowMicros());
    const Evaluation e = decide(view, params_, clock_.nowMicros(), 1);
    ASSERT_TRUE(e.outcome.allowed) << i;
    charge(view, params_, state, e, 1);
  }
  EXPECT_EQ(view.cur.own, 10);
  EXPECT_EQ(view.cur.unsent(), 10);
  const Evaluation denied = decide(view, params_, clock_.nowMicros(), 1);
  EXPECT_FALSE(denied.outcome.allowed);
  EXPECT_EQ(denied.outcome.remaining, 0);
}

TEST_F(EventualViewTest, AReadingAcknowledgesTheOwnHitsItHolds) {
  View view;
  roll(view, params_, clock_.nowMicros());
  view.cur.own = 7;
  merge(view, params_, reading(window(), counter({{"s1", 5}, {"s2", 1}})), "s1", clock_.nowMicros(),
        1000, tuning_);
  EXPECT_EQ(view.cur.own, 7);
  EXPECT_EQ(view.cur.own_acked, 5);
  EXPECT_EQ(view.cur.unsent(), 2);
  EXPECT_EQ(view.cur.others, 1);
  // A reading older than one already merged changes nothing.
  merge(view, params_, reading(window(), counter({{"s1", 3}})), "s1", clock_.nowMicros(), 1000,
        tuning_);
  EXPECT_EQ(view.cur.own_acked, 5);
  EXPECT_EQ(view.cur.total(), 8);
}

TEST_F(EventualViewTest, ARedisThatLostOwnHitsDoesNotLowerTheView) {
  View view;
  roll(view, params_, clock_.nowMicros());
  view.cur.own = 40;
  merge(view, params_, reading(window(), counter({{"s1", 40}, {"s2", 20}})), "s1",
        clock_.nowMicros(), 1000, tuning_);
  // Redis restarted: it came back empty, then s2 wrote again.
  merge(view, params_, reading(window(), counter({{"s2", 21}})), "s1", clock_.nowMicros(), 1000,
        tuning_);
  EXPECT_EQ(view.cur.total(), 61);
  EXPECT_EQ(view.cur.own_acked, 40);
}

TEST_F(EventualViewTest, RedisAheadOfTheOwnCountDoesNotRaiseIt) {
  // A round trip's charge whose reply is still on its way: Redis holds 12, this sidecar
  // has counted 10 so far and adds the 2 when the replies arrive.
  View view;
  roll(view, params_, clock_.nowMicros());
  view.cur.own = 10;
  merge(view, params_, reading(window(), counter({{"s1", 12}})), "s1", clock_.nowMicros(), 1000,
        tuning_);
  EXPECT_EQ(view.cur.own, 10);
  EXPECT_EQ(view.cur.own_acked, 10);
  EXPECT_EQ(view.cur.unsent(), 0);
}

TEST_F(EventualViewTest, RollingPastTwoWindowsDropsTheirUnsentHits) {
  params_.algorithm = Algorithm::kSlidingWindowCounter;  // reads the previous window
  View view;
  roll(view, params_, clock_.nowMicros());
  view.cur.own = 4;
  clock_.advance(microseconds(params_.window_us));
  EXPECT_EQ(roll(view, params_, clock_.nowMicros()), 0);
  EXPECT_EQ(view.prev.unsent(), 4);
  view.cur.own = 3;
  clock_.advance(microseconds(2 * params_.window_us));
  EXPECT_EQ(roll(view, params_, clock_.nowMicros()), 7);
  EXPECT_EQ(view.cur.own, 0);
}

TEST_F(EventualViewTest, AFixedWindowsUnsentHitsExpireWithItUncounted) {
  // No decision reads a fixed window that has ended: nothing of it is kept to be sent, and
  // its unsent hits are not dropped ones (they were needed by nobody).
  View view;
  roll(view, params_, clock_.nowMicros());
  view.cur.own = 4;
  view.cur.own_acked = 1;
  view.cur.others = 9;
  view.tight = true;
  clock_.advance(microseconds(params_.window_us));
  EXPECT_EQ(roll(view, params_, clock_.nowMicros()), 0);
  EXPECT_EQ(view.prev.index, view.cur.index - 1);
  EXPECT_EQ(view.prev.own, 0);
  EXPECT_EQ(view.prev.unsent(), 0);
  EXPECT_EQ(previousToSend(view), 0);
  EXPECT_EQ(view.cur.total(), 0);
  EXPECT_FALSE(view.tight);
  view.cur.own = 3;
  clock_.advance(microseconds(2 * params_.window_us));
  EXPECT_EQ(roll(view, params_, clock_.nowMicros()), 0);
  EXPECT_EQ(view.cur.own, 0);
  EXPECT_EQ(view.prev.unsent(), 0);
}

TEST_F(EventualViewTest, UnknownStaleAndTightKeysNeedARoundTrip) {
  // L = 100: a blind allowance of 0.1 % is 0 hits, so unknown and stale keys go remote.
  const Micros t = clock_.nowMicros();
  View view;
  EXPECT_EQ(route(view, params_, t, 1, tuning_, true), Route::kUnknown);
  EXPECT_EQ(route(view, params_, t, 1, tuning_, false), Route::kLocal);
  roll(view, params_, t);
  merge(view, params_, reading(window(), counter({{"s2", 1}})), "s1", t, 1000, tuning_);
  EXPECT_EQ(route(view, params_, t, 1, tuning_, true), Route::kLocal);
  clock_.advance(microseconds(tuning_.stale_after_us + 1));
  EXPECT_EQ(route(view, params_, clock_.nowMicros(), 1, tuning_, true), Route::kStale);
  view.tight = true;
  EXPECT_EQ(route(view, params_, clock_.nowMicros(), 1, tuning_, true), Route::kTight);
}

TEST_F(EventualViewTest, AnUnknownKeyIsDecidedLocallyWithinItsBlindAllowance) {
  params_ = fixedWindow(1'000'000, kMicrosPerSecond);
  EXPECT_EQ(blindAllowance(params_, tuning_), 1000);
  View view;
  roll(view, params_, clock_.nowMicros());
  EXPECT_TRUE(blindView(view, clock_.nowMicros(), tuning_));
  view.blind = 999;
  EXPECT_EQ(route(view, params_, clock_.nowMicros(), 1, tuning_, true), Route::kLocal);
  EXPECT_EQ(route(view, params_, clock_.nowMicros(), 2, tuning_, true), Route::kUnknown);
  // A reading ends the blind period and resets the allowance used.
  merge(view, params_, reading(window(), counter({{"s2", 5}})), "s1", clock_.nowMicros(), 1000,
        tuning_);
  EXPECT_EQ(view.blind, 0);
  EXPECT_FALSE(blindView(view, clock_.nowMicros(), tuning_));
  // Stale again after a quiet second: blind again, with a fresh allowance.
  clock_.advance(microseconds(tuning_.stale_after_us + 1));
  EXPECT_EQ(route(view, params_, clock_.nowMicros(), 1000, tuning_, true), Route::kLocal);
  view.blind = 1;
  EXPECT_EQ(route(view, params_, clock_.nowMicros(), 1000, tuning_, true), Route::kStale);
}

TEST_F(EventualViewTest, AQuietKeyWaitsUntilItsWindowEnds) {
  params_ = fixedWindow(1'000'000, 60 * kMicrosPerSecond);  // blind allowance: 1000
  View view;
  roll(view, params_, clock_.nowMicros());
  const Micros end = (view.cur.index + 1) * params_.window_us;
  const Micros sent = clock_.nowMicros();
  // A key never read may be quiet too: its hits are blind, within half its allowance.
  EXPECT_EQ(quietUntil(view, params_, sent, tuning_), end);
  EXPECT_EQ(deferUntil(view, params_, -1, sent, tuning_), sent);
  view.blind = 501;
  EXPECT_EQ(quietUntil(view, params_, sent, tuning_), -1);  // read before it runs out
  view.blind = 0;
  merge(view, params_, reading(window(), counter({{"s2", 5}})), "s1", sent, 1000, tuning_);
  view.cur.own = 1000;  // unsent, within its allowance
  EXPECT_EQ(quietUntil(view, params_, sent, tuning_), end);
  EXPECT_EQ(quietUntil(view, params_, sent + 5 * kMicrosPerSecond, tuning_), end);
  view.cur.own = 1001;  // past it: it goes out
  EXPECT_TRUE(mustGoOut(view, params_, tuning_));
  EXPECT_EQ(quietUntil(view, params_, sent, tuning_), -1);
  EXPECT_EQ(deferUntil(view, params_, sent, sent, tuning_), sent);
  view.cur.own = 10;
  view.blind = 501;  // more than half its allowance used blind: read before it runs out
  EXPECT_TRUE(mustGoOut(view, params_, tuning_));
  EXPECT_EQ(deferUntil(view, params_, sent, sent, tuning_), sent);
  view.blind = 500;
  EXPECT_FALSE(mustGoOut(view, params_, tuning_));
  // Past half of its limit (with what it may spend until the window ends): not quiet.
  view.cur.others = 499'000;
  EXPECT_EQ(quietUntil(view, params_, sent, tuning_), -1);
  view.cur.others = 5;
  // A new fixed window starts with its whole blind allowance.
  roll(view, params_, end);
  EXPECT_EQ(view.blind, 0);
  // Only a fixed window (a sliding window's hits are read by the next one; a bucket has no
  // end), only with a blind allowance (without one a stale view costs a round trip), and only
  // when quiet keys are on.
  for (const Algorithm algorithm : {Algorithm::kSlidingWindowCounter, Algorithm::kTokenBucket}) {
    LimitParams other = params_;
    other.algorithm = algorithm;
    EXPECT_EQ(quietUntil(view, other, end, tuning_), -1);
  }
  EXPECT_EQ(quietUntil(view, fixedWindow(999, 60 * kMicrosPerSecond), end, tuning_), -1);
  EXPECT_EQ(quietUntil(view, params_, end, tuning_), end + params_.window_us);
  tuning_.quiet_keys = false;
  EXPECT_EQ(quietUntil(view, params_, end, tuning_), -1);
}

TEST_F(EventualViewTest, AColdKeyWaitsForALaterSyncOnlyWithFewUnsentHits) {
  params_ = fixedWindow(1'000'000, 60 * kMicrosPerSecond);  // blind allowance: 1000
  View view;
  roll(view, params_, clock_.nowMicros());
  merge(view, params_, reading(window(), counter({{"s2", 5}})), "s1", clock_.nowMicros(), 1000,
        tuning_);
  const Micros sent = clock_.nowMicros();
  view.cur.own = 1000;
  EXPECT_FALSE(mayDefer(view, params_, -1, sent, tuning_));  // never sent: goes out now
  EXPECT_TRUE(mayDefer(view, params_, sent, sent + 100'000, tuning_));
  // Far from its limit: until its view is about to go stale (stale_after after the send).
  EXPECT_TRUE(mayDefer(view, params_, sent, sent + 999'999, tuning_));
  EXPECT_FALSE(mayDefer(view, params_, sent, sent + 1'000'000, tuning_));
  view.cur.own = 1001;  // more unsent than the allowance
  EXPECT_FALSE(mayDefer(view, params_, sent, sent + 100'000, tuning_));
  view.cur.own = 10;
  view.tight = true;
  EXPECT_FALSE(mayDefer(view, params_, sent, sent + 100'000, tuning_));
  view.tight = false;
  view.prev.own = 1;  // the previous window's hits go out at once
  EXPECT_FALSE(mayDefer(view, params_, sent, sent + 100'000, tuning_));
  view.prev.own = 0;
  // Past half of its limit: at most min(stale_after / 2, W / 4) = 500 ms after the last send.
  view.cur.others = 499'000;
  EXPECT_TRUE(mayDefer(view, params_, sent, sent + 499'999, tuning_));
  EXPECT_FALSE(mayDefer(view, params_, sent, sent + 500'000, tuning_));
  // A short window waits at most a quarter of it when near.
  params_.window_us = 200'000;
  roll(view, params_, clock_.nowMicros());
  view.cur.others = 499'500;
  EXPECT_FALSE(mayDefer(view, params_, sent, sent + 50'000, tuning_));
  EXPECT_TRUE(mayDefer(view, params_, sent, sent + 49'999, tuning_));
  // Far: a fixed window's hits need not go out once it has ended (they expire with it), so
  // its end does not shorten the wait.
  view.cur.others = 5;
  EXPECT_EQ(deferUntil(view, params_, sent, sent, tuning_), sent + tuning_.stale_after_us);
  // A sliding window's do (the next window reads them): until the window has ended, spread
  // over the next one's first 50 ms by the offset of the last send in its window.
  params_.algorithm = Algorithm::kSlidingWindowCounter;
  const Micros end = (view.cur.index + 1) * params_.window_us;
  EXPECT_EQ(deferUntil(view, params_, sent, sent, tuning_), end + (sent % 200'000) / 4);
  const Micros later = sent + 120'000 - sent % 200'000;  // 120 ms into the window
  EXPECT_EQ(deferUntil(view, params_, later, later, tuning_), end + 30'000);
}

TEST_F(EventualViewTest, ASyncForAnotherReasonMayLeaveTheCurrentWindowsFewHitsUnwritten) {
  params_ = fixedWindow(1'000'000, kMicrosPerSecond);  // blind allowance: 1000
  View view;
  roll(view, params_, clock_.nowMicros());
  view.cur.own = 3;
  // The key's first reading: its blind hits wait for its next sync.
  EXPECT_TRUE(mayWithholdCurrent(view, params_, -1, tuning_));
  const Micros sent = clock_.nowMicros();
  // Sent before, nothing of the previous window unsent: the sync is for the current window.
  EXPECT_EQ(previousToSend(view), 0);
  EXPECT_FALSE(mayWithholdCurrent(view, params_, sent, tuning_));
  // A fixed window's end expires its unsent hits: the next sync is for the new window's own.
  roll(view, params_, clock_.nowMicros() + kMicrosPerSecond);
  view.cur.own = 2;
  EXPECT_EQ(previousToSend(view), 0);
  EXPECT_FALSE(mayWithholdCurrent(view, params_, sent, tuning_));
  // A sliding window's are read by the next one: the sync that sends them reads the new
  // window without writing its hits.
  params_.algorithm = Algorithm::kSlidingWindowCounter;
  view = View{};
  roll(view, params_, clock_.nowMicros());
  view.cur.own = 3;
  roll(view, params_, clock_.nowMicros() + kMicrosPerSecond);
  view.cur.own = 2;
  EXPECT_EQ(previousToSend(view), 3);  // the ended window's own count goes out
  EXPECT_TRUE(mayWithholdCurrent(view, params_, sent, tuning_));
  view.cur.own = 1001;  // more than the allowance
  EXPECT_FALSE(mayWithholdCurrent(view, params_, sent, tuning_));
  view.cur.own = 2;
  view.tight = true;
  EXPECT_FALSE(mayWithholdCurrent(view, params_, sent, tuning_));
  view.tight = false;
  params_.algorithm = Algorithm::kTokenBucket;  // one hash, its arrival time moves with hits
  EXPECT_FALSE(mayWithholdCurrent(view, params_, -1, tuning_));
  params_ = fixedWindow(100, kMicrosPerSecond);  // no allowance below 1000
  EXPECT_FALSE(mayWithholdCurrent(view, params_, -1, tuning_));
}

TEST_F(EventualViewTest, AKeyIsFarFromItsLimitWhileWhatItMaySpendLeavesHalfOfIt) {
  params_ = fixedWindow(100'000, 60 * kMicrosPerSecond);  // blind allowance: 100
  View view;
  roll(view, params_, clock_.nowMicros());
  merge(view, params_, reading(window(), counter({{"s2", 40'000}, {"s3", 1}})), "s1",
        clock_.nowMicros(), 1000, tuning_);
  const Micros now = clock_.nowMicros();
  // 59 999 left, minus a blind allowance for each of 3 writers: 59 699 >= 50 000.
  EXPECT_TRUE(farFromLimit(view, params_, now, kMicrosPerSecond, tuning_));
  view.cur.own = 9'699;  // 50 300 left: 50 000 once the writers' allowances are counted
  EXPECT_TRUE(farFromLimit(view, params_, now, kMicrosPerSecond, tuning_));
  view.cur.own = 9'700;
  EXPECT_FALSE(farFromLimit(view, params_, now, kMicrosPerSecond, tuning_));
  // What the key's global rate adds over the wait counts too (times the safety of 2).
  view.cur.own = 0;
  view.rate.observe(now, window(), 40'001, 0, 0);
  view.rate.observe(now + kMicrosPerSecond, window(), 42'001, 0, 0);              // 2 000/s
  EXPECT_TRUE(farFromLimit(view, params_, now, 2 * kMicrosPerSecond, tuning_));   // 8 000
  EXPECT_FALSE(farFromLimit(view, params_, now, 3 * kMicrosPerSecond, tuning_));  // 12 000
}

TEST(EventualBlindTest, TheBlindAllowanceOfABucketIsAShareOfItsBurst) {
  Tuning tuning;
  LimitParams p;
  p.algorithm = Algorithm::kTokenBucket;
  p.limit = 10;
  p.window_us = kMicrosPerSecond;
  p.burst = 50'000;
  EXPECT_EQ(blindAllowance(p, tuning), 50);
  p.burst = 0;
  EXPECT_EQ(blindAllowance(p, tuning), 0);
}

TEST_F(EventualViewTest, TheMarginIsRateTimesHorizon) {
  // 10'000 hits/s; horizon = 2 x (2 x 50 ms + 2 x 1 ms) = 204 ms -> 2040 hits.
  EXPECT_EQ(tightenAt(10'000, 0, 1, 1000, tuning_), 2040);
  // Three writers at 4'000/s each seen from one: 12'000/s even if the global rate lags.
  EXPECT_EQ(tightenAt(1'000, 4'000, 3, 1000, tuning_), 2448);
  EXPECT_EQ(tightenAt(0, 0, 1, 0, tuning_), 0);
  // Another region's hits arrive 100 ms later: 2 x (100 + 2 + 100) ms at 10'000/s.
  Tuning regions = tuning_;
  regions.region_delay_us = 100'000;
  EXPECT_EQ(tightenAt(10'000, 0, 1, 1000, regions), 4040);
}

TEST_F(EventualViewTest, AKeyTurnsTightWhenItsAllowanceFallsBelowTheMargin) {
  params_ = fixedWindow(10'000, 3600 * kMicrosPerSecond);
  View view;
  roll(view, params_, clock_.nowMicros());
  std::int64_t others = 0;
  // Others add 500 hits per 50 ms sync: 10'000/s.
  for (int sync = 0; sync < 20 && !view.tight; ++sync) {
    others += 500;
    merge(view, params_, reading(window(), counter({{"s2", others}})), "s1", clock_.nowMicros(),
          1000, tuning_);
    clock_.advance(milliseconds(50));
  }
  EXPECT_TRUE(view.tight);
  EXPECT_GE(view.tight_below, 2000);
  EXPECT_LT(10'000 - view.cur.total(), view.tight_below);
  EXPECT_GT(10'000 - view.cur.total(), 0);
}

TEST_F(EventualViewTest, AnAllowedDecisionTooCloseToTheLimitMustGoRemote) {
  View view;
  roll(view, params_, clock_.nowMicros());
  merge(view, params_, reading(window(), counter({{"s2", 90}})), "s1", clock_.nowMicros(), 1000,
        tuning_);
  view.tight_below = 20;
  const Evaluation e = decide(view, params_, clock_.nowMicros(), 1);
  EXPECT_TRUE(e.outcome.allowed);
  EXPECT_TRUE(tooClose(view, e, clock_.nowMicros(), tuning_));
  view.tight_below = 5;
  EXPECT_FALSE(
      tooClose(view, decide(view, params_, clock_.nowMicros(), 1), clock_.nowMicros(), tuning_));
}

TEST_F(EventualViewTest, SlidingWindowCounterReadsBothWindows) {
  params_.algorithm = Algorithm::kSlidingWindowCounter;
  View view;
  roll(view, params_, clock_.nowMicros());
  merge(view, params_, reading(window(), counter({{"s2", 10}}), counter({{"s2", 50}})), "s1",
        clock_.nowMicros(), 1000, tuning_);
  const BucketState state = merged(view, params_, clock_.nowMicros());
  EXPECT_EQ(state.b, 10);
  EXPECT_EQ(state.c, 50);
}

TEST(EventualTokenBucketTest, AdvanceAddsHitsTimesTheEmissionIntervalFromNow) {
  LimitParams p;
  p.algorithm = Algorithm::kTokenBucket;
  p.limit = 3;
  p.window_us = 10;  // 10/3 us per hit
  p.burst = 100;
  BucketState t = advanceTat(BucketState{}, p, 1000, 3);
  EXPECT_EQ(t.a, 1010);
  EXPECT_EQ(t.b, 0);
  t = advanceTat(t, p, 1000, 1);
  EXPECT_EQ(t.a, 1013);
  EXPECT_EQ(t.b, 1);  // 1013 + 1/3
  BucketState whole;
  whole.a = 1013;
  EXPECT_EQ(laterTat(t, whole, 3).b, 1);
}

TEST(EventualTokenBucketTest, OthersHitsAppliedLaterNeverAdmitMore) {
  LimitParams p;
  p.algorithm = Algorithm::kTokenBucket;
  p.limit = 10;
  p.window_us = kMicrosPerSecond;
  p.burst = 10;
  const Micros t0 = 1'000 * kMicrosPerSecond;
  // Five hits at t0 and applied at t0 + 300 ms leave a later arrival time than applied at t0.
  const BucketState exact = advanceTat(BucketState{}, p, t0, 5);
  const BucketState late = advanceTat(BucketState{}, p, t0 + 300'000, 5);
  EXPECT_GE(late.a, exact.a);
}

/// N sidecars hammer one key on a simulated timeline: each sync interval every sidecar
/// sends its cumulative own count to a model of the Redis hash (per-entry maximum) and
/// reads the entries back after `latency`; a tight key's requests are decided atomically on
/// the model (the script's op 1). The admitted total must land in [L, 1.01 L].
struct Sim {
  std::int64_t limit;
  int sidecars;
  int requests_per_ms;  ///< per sidecar
  Micros latency_us;
};

std::int64_t simulate(const Sim& sim) {
  ManualClock clock(1'700'000'000LL * kMicrosPerSecond);
  Tuning tuning;
  LimitParams params = fixedWindow(sim.limit, 24LL * 3600 * kMicrosPerSecond);
  std::map<std::string, std::int64_t> redis;  // the window's hash
  std::vector<View> views(static_cast<std::size_t>(sim.sidecars));
  std::vector<std::string> names;
  for (int i = 0; i < sim.sidecars; ++i) {
    names.push_back("s" + std::to_string(i));
  }
  const std::int64_t window = clock.nowMicros() / params.window_us;
  auto read = [&] {
    HashReading r;
    r.window = window;
    for (const auto& [name, value] : redis) {
      r.cur.raise(name, value);
    }
    return r;
  };
  std::int64_t admitted = 0;
  // Sidecars are synced at staggered phases.
  const Micros interval = tuning.sync_interval_us;
  for (Micros t = 0; t < 4 * kMicrosPerSecond; t += 1000) {
    for (int s = 0; s < sim.sidecars; ++s) {
      View& view = views[s];
      const Micros now = clock.nowMicros();
      roll(view, params, now);
      const Micros interval_ms = interval / 1000;
      if (view.refreshed_at < 0 || (t / 1000 + s * interval_ms / sim.sidecars) % interval_ms == 0) {
        // Sync: send own, read everything back `latency` later (modelled as read now, with
        // the own count as sent).
        redis[names[s]] = std::max(redis[names[s]], view.cur.own);
        merge(view, params, read(), names[s], now + sim.latency_us, sim.latency_us, tuning);
      }
      for (int k = 0; k < sim.requests_per_ms; ++k) {
        const BucketState state = merged(view, params, now);
        const Evaluation e = decide(view, params, now, 1);
        if (!e.outcome.allowed) {
          continue;
        }
        if (view.tight || tooClose(view, e, now, tuning)) {
          view.tight = true;
          // Round trip: raise own, check the hash's total, charge atomically.
          redis[names[s]] = std::max(redis[names[s]], view.cur.own);
          std::int64_t total = 0;
          for (const auto& [name, value] : redis) {
            total += value;
          }
          if (total + 1 <= sim.limit) {
            redis[names[s]] += 1;
            view.cur.own += 1;
            view.cur.own_acked = redis[names[s]];
            ++admitted;
          }
          merge(view, params, read(), names[s], now, sim.latency_us, tuning);
          continue;
        }
        charge(view, params, state, e, 1);
        ++admitted;
      }
    }
    clock.advance(milliseconds(1));
  }
  return admitted;
}

TEST(EventualTighteningTest, ThreeSidecarsAtFullSpeedStayWithinOnePercent) {
  const Sim sim{20'000, 3, 10, 1000};  // 30'000 hits/s against 20'000 per window
  const std::int64_t admitted = simulate(sim);
  EXPECT_GE(admitted, sim.limit);
  EXPECT_LE(admitted, sim.limit + sim.limit / 100);
}

TEST(EventualTighteningTest, TenSidecarsWithSlowRoundTripsStayWithinOnePercent) {
  const Sim sim{50'000, 10, 5, 5000};
  const std::int64_t admitted = simulate(sim);
  EXPECT_GE(admitted, sim.limit);
  EXPECT_LE(admitted, sim.limit + sim.limit / 100);
}

}  // namespace
}  // namespace sluice::eventual
