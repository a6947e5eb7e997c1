// algorithm: sketch with consistency: eventual, the pure part (sluice/limiter/eventual_sketch.hpp):
// cells are grow-only counters per writer, the client's counts are the minimum over its rows
// of the summed cells, each writer updates its own sketch conservatively. On a manual clock,
// with an in-test model of Redis (one GCounter per cell and window).
#include "sluice/limiter/eventual_sketch.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace sluice::eventual {
namespace {

constexpr Micros kSecond = kMicrosPerSecond;

LimitParams sketchParams(std::int64_t limit, Micros window_us, std::uint32_t width,
                         std::uint32_t depth) {
  LimitParams p;
  p.algorithm = Algorithm::kSketch;
  p.limit = limit;
  p.window_us = window_us;
  p.consistency = Consistency::kEventual;
  p.sketch.width = width;
  p.sketch.depth = depth;
  p.sketch.counter_bits = sketchCounterBits(limit);
  return p;
}

/// Redis as the eventual script keeps it: per (window, row, column) one hash, one field per
/// writer, each only ever raised.
struct RedisModel {
  std::map<std::tuple<std::int64_t, std::uint32_t, std::uint32_t>, GCounter> cells;

  /// One sync of `cell` (row r, column c) by `writer`: raise its field for the view's current
  /// (and previous) window, read the others back, merge into the view.
  void sync(View& view, const LimitParams& sketch, std::uint32_t r, std::uint32_t c,
            const std::string& writer, Micros now, const Tuning& tuning) {
    const LimitParams cell = sketchCellParams(sketch);
    roll(view, cell, now);
    KeyReading reading;
    reading.window = view.cur.index;
    GCounter& cur = cells[{view.cur.index, r, c}];
    GCounter& prev = cells[{view.cur.index - 1, r, c}];
    cur.raise(writer, view.cur.own);
    if (view.prev.index == view.cur.index - 1) {
      prev.raise(writer, view.prev.own);
    }
    reading.own = cur.value(writer);
    reading.others = cur.sum() - reading.own;
    reading.writers = cur.writers() - (reading.own > 0 ? 1 : 0);
    reading.prev_own = prev.value(writer);
    reading.prev_others = prev.sum() - reading.prev_own;
    merge(view, cell, reading, now, 0, tuning);
  }
  /// The shared sketch's count of a client: min over rows of the summed cells.
  std::int64_t count(std::int64_t window, const std::vector<std::uint32_t>& columns) {
    std::int64_t out = INT64_MAX;
    for (std::uint32_t r = 0; r < columns.size(); ++r) {
      out = std::min(out, cells[{window, r, columns[r]}].sum());
    }
    return out;
  }
};

/// One sidecar's views of the cells it has used, by (row, column).
struct Sidecar {
  std::string name;
  std::map<std::pair<std::uint32_t, std::uint32_t>, View> views;

  std::vector<View*> cellsOf(const std::vector<std::uint32_t>& columns) {
    std::vector<View*> out;
    for (std::uint32_t r = 0; r < columns.size(); ++r) {
      out.push_back(&views[{r, columns[r]}]);
    }
    return out;
  }
  static std::vector<const View*> constant(const std::vector<View*>& cells) {
    return {cells.begin(), cells.end()};
  }
  void syncAll(RedisModel& redis, const LimitParams& p, Micros now, const Tuning& tuning) {
    for (auto& [rc, view] : views) {
      redis.sync(view, p, rc.first, rc.second, name, now, tuning);
    }
  }
};

TEST(EventualSketchTest, ConservativeUpdateOfTheOwnSketch) {
  const LimitParams p = sketchParams(100, 60 * kSecond, 8, 2);
  Sidecar s{"s1", {}};
  const Micros now = 1'000 * kSecond;
  // a at columns {0, 1}, b at {0, 2}: they share row 0's cell.
  for (int i = 0; i < 3; ++i) {
    chargeSketch(s.cellsOf({0, 1}), p, now, 1);
  }
  const std::vector<std::int64_t> added = chargeSketch(s.cellsOf({0, 2}), p, now, 2);
  // b's own minimum was 0 (its row 1 cell): both its cells become at least 2; row 0 holds 3.
  EXPECT_EQ(added, (std::vector<std::int64_t>{0, 2}));
  EXPECT_EQ(s.views[std::make_pair(0u, 0u)].cur.own, 3);
  EXPECT_EQ(s.views[std::make_pair(1u, 2u)].cur.own, 2);
  // Every client's minimum is an upper bound of its own count.
  EXPECT_GE(sketchRead(Sidecar::constant(s.cellsOf({0, 1})), p, now).curr, 3);
  EXPECT_GE(sketchRead(Sidecar::constant(s.cellsOf({0, 2})), p, now).curr, 2);
  EXPECT_EQ(chargeSketch(s.cellsOf({0, 2}), p, now, 0), (std::vector<std::int64_t>{0, 0}));
}

TEST(EventualSketchTest, TheSummedCellsNeverUnderCountAfterASync) {
  // Three writers, 200 clients on a 2 x 16 sketch (many collisions): once every writer has
  // synced, every client's count is at least its true global count, and a replayed sync
  // changes nothing.
  const LimitParams p = sketchParams(1'000'000, 60 * kSecond, 16, 2);
  Tuning tuning;
  RedisModel redis;
  std::vector<Sidecar> fleet = {{"s1", {}}, {"s2", {}}, {"s3", {}}};
  std::map<int, std::int64_t> truth;
  const Micros now = 1'000 * kSecond;
  auto columnsOf = [](int client) {
    return std::vector<std::uint32_t>{static_cast<std::uint32_t>(client * 7 % 16),
                                      static_cast<std::uint32_t>(client * 13 / 3 % 16)};
  };
  for (int i = 0; i < 3'000; ++i) {
    const int client = (i * 31) % 200;
    Sidecar& s = fleet[static_cast<std::size_t>(i % 3)];
    chargeSketch(s.cellsOf(columnsOf(client)), p, now, 1);
    ++truth[client];
  }
  for (Sidecar& s : fleet) {
    s.syncAll(redis, p, now, tuning);
  }
  for (Sidecar& s : fleet) {
    s.syncAll(redis, p, now, tuning);  // reads the others' hits
  }
  const std::int64_t window = sketchWindowIndex(now, p.window_us);
  for (const auto& [client, count] : truth) {
    EXPECT_GE(redis.count(window, columnsOf(client)), count) << client;
    for (Sidecar& s : fleet) {
      EXPECT_EQ(sketchRead(Sidecar::constant(s.cellsOf(columnsOf(client))), p, now).curr,
                redis.count(window, columnsOf(client)))
          << client << " " << s.name;
    }
  }
  const auto before = redis.cells;
  for (Sidecar& s : fleet) {
    s.syncAll(redis, p, now, tuning);
  }
  for (const auto& [key, counter] : before) {
    EXPECT_EQ(redis.cells[key].sum(), counter.sum());
  }
}

TEST(EventualSketchTest, ThePreviousWindowIsWeightedLikeSlidingWindowCounter) {
  const LimitParams p = sketchParams(100, 10 * kSecond, 8, 2);
  Sidecar s{"s1", {}};
  const Micros start = 100 * 10 * kSecond;
  for (int i = 0; i < 80; ++i) {
    chargeSketch(s.cellsOf({1, 2}), p, start + kSecond, 1);
  }
  // A quarter into the next window: 80 x 3/4 = 60 of the previous window count.
  const Micros now = start + 10 * kSecond + 10 * kSecond / 4;
  const SketchRead read = sketchRead(Sidecar::constant(s.cellsOf({1, 2})), p, now);
  EXPECT_EQ(read.curr, 0);
  EXPECT_EQ(read.prev, 80);
  EXPECT_EQ(decideSketch(Sidecar::constant(s.cellsOf({1, 2})), p, now, 1).outcome.remaining, 39);
}

TEST(EventualSketchTest, UnknownCellsAndTightClientsNeedARoundTrip) {
  const LimitParams p = sketchParams(1'000, kSecond * 60, 8, 2);
  Tuning tuning;
  RedisModel redis;
  Sidecar s{"s1", {}};
  Micros now = 1'000 * kSecond;
  auto cells = [&] { return Sidecar::constant(s.cellsOf({3, 4})); };
  // Never read: the blind allowance (0.1 % of 1 000 = 1 hit) then a round trip.
  EXPECT_EQ(sketchRoute(cells(), p, now, 1, tuning, true), Route::kLocal);
  for (View* v : s.cellsOf({3, 4})) {
    v->blind = 1;
  }
  EXPECT_EQ(sketchRoute(cells(), p, now, 1, tuning, true), Route::kUnknown);
  EXPECT_EQ(sketchRoute(cells(), p, now, 1, tuning, false), Route::kLocal);
  // Read, then another writer adds 900 hits over 100 ms: a global rate of 9 000/s makes a
  // margin of 9 000 x 2 x (2 x 50 ms) = 1 800 > what is left: tight.
  s.syncAll(redis, p, now, tuning);
  EXPECT_EQ(sketchRoute(cells(), p, now, 1, tuning, true), Route::kLocal);
  const std::int64_t window = sketchWindowIndex(now, p.window_us);
  redis.cells[{window, 0, 3}].raise("s2", 900);
  redis.cells[{window, 1, 4}].raise("s2", 900);
  now += 100'000;
  s.syncAll(redis, p, now, tuning);
  EXPECT_EQ(sketchRead(cells(), p, now).curr, 900);
  EXPECT_EQ(sketchRoute(cells(), p, now, 1, tuning, true), Route::kTight);
  const SketchEvaluation e = decideSketch(cells(), p, now, 1);
  EXPECT_TRUE(e.outcome.allowed);
  EXPECT_TRUE(sketchTooClose(cells(), e, now, tuning));
}

/// Three sidecars hammer one client at 30 000 hits/s each on L = 20 000 (a minute's window),
/// syncing every 50 ms (1 ms round trips); a tight or unknown client is decided by a round
/// trip on Redis's sums (atomic: sync the cells, decide, charge, sync again). The hot client's
/// cells are also used by 50 background clients. Admitted hits of the hot client lie in
/// [L - what its cells over-count, 1.01 L]: the sketch over-counts (it may deny before L), it
/// never admits past what its shared sketch allows.
TEST(EventualSketchTest, ThreeSidecarsOnOneClientAdmitWithinOnePercent) {
  constexpr std::int64_t kLimit = 20'000;
  const LimitParams p = sketchParams(kLimit, 60 * kSecond, 64, 3);
  Tuning tuning;
  RedisModel redis;
  std::vector<Sidecar> fleet = {{"s1", {}}, {"s2", {}}, {"s3", {}}};
  const std::vector<std::uint32_t> hot = {5, 17, 40};
  Micros now = 6'000 * kSecond + kSecond;  // one second into a window
  const std::int64_t window = sketchWindowIndex(now, p.window_us);
  // Background clients: one shares row 0, another row 1 with the hot client; 100 hits each.
  for (std::uint32_t b = 0; b < 50; ++b) {
    const std::vector<std::uint32_t> columns = {b % 2 == 0 ? 5u : 6u + b % 50,
                                                b % 2 == 1 ? 17u : 18u + b % 40, 41u + b % 20};
    for (int i = 0; i < 100; ++i) {
      chargeSketch(fleet[b % 3].cellsOf(columns), p, now, 1);
    }
  }
  std::int64_t admitted = 0;
  std::int64_t round_trips = 0;
  const Micros step = 100;  // each sidecar decides one request per 100 us (10 000/s x 3)
  Micros next_sync = now;
  for (int tick = 0; tick < 25'000; ++tick) {
    now += step / 3;
    if (now >= next_sync) {
      for (Sidecar& s : fleet) {
        s.syncAll(redis, p, now, tuning);
      }
      next_sync += tuning.sync_interval_us;
    }
    Sidecar& s = fleet[static_cast<std::size_t>(tick % 3)];
    // Three times 10 000/s: every sidecar sends each tick of its own (30 000/s in all).
    std::vector<View*> cells = s.cellsOf(hot);
    const std::vector<const View*> view = Sidecar::constant(cells);
    SketchEvaluation e = decideSketch(view, p, now, 1);
    if (!e.outcome.allowed) {
      continue;  // the view under-counts: a local denial is final
    }
    const Route r = sketchRoute(view, p, now, 1, tuning, true);
    if (r != Route::kLocal || sketchTooClose(view, e, now, tuning)) {
      // Round trip: Redis's sums, decided and charged atomically.
      ++round_trips;
      for (std::uint32_t row = 0; row < hot.size(); ++row) {
        redis.sync(*cells[row], p, row, hot[row], s.name, now, tuning);
      }
      e = decideSketch(view, p, now, 1);
      if (e.outcome.allowed) {
        chargeSketch(cells, p, now, 1);
        for (std::uint32_t row = 0; row < hot.size(); ++row) {
          redis.sync(*cells[row], p, row, hot[row], s.name, now, tuning);
        }
        ++admitted;
      }
      continue;
    }
    chargeSketch(cells, p, now, 1);
    ++admitted;
  }
  for (Sidecar& s : fleet) {
    s.syncAll(redis, p, now, tuning);
  }
  // The shared sketch's count of the hot client is its admitted hits plus what its cells
  // carry of the background clients (at most 100 x 25 per row here, at least 0).
  const std::int64_t shared = redis.count(window, hot);
  EXPECT_GE(shared, admitted);
  EXPECT_LE(admitted, kLimit + kLimit / 100);
  EXPECT_GE(admitted, kLimit - (shared - admitted) - kLimit / 100) << shared;
  EXPECT_LE(shared, kLimit + kLimit / 100);
  EXPECT_GT(round_trips, 0);
  EXPECT_LT(round_trips, admitted / 2) << "most decisions are local";
  RecordProperty("admitted", static_cast<int>(admitted));
  RecordProperty("shared", static_cast<int>(shared));
  RecordProperty("round_trips", static_cast<int>(round_trips));
}

}  // namespace
}  // namespace sluice::eventual
