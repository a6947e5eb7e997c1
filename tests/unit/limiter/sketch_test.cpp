#include "sluice/limiter/sketch.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "sluice/limiter/limiter.hpp"
#include "support/bucket_driver.hpp"

namespace sluice {
namespace {

using test::BucketDriver;
using test::kT0;
using test::makeParams;

constexpr Micros kSecond = kMicrosPerSecond;

LimitParams sketchParams(std::int64_t limit, std::uint32_t width, std::uint32_t depth = 4,
                         Micros window = kSecond) {
  LimitParams p = makeParams(Algorithm::kSketch, limit, window);
  p.sketch.width = width;
  p.sketch.depth = depth;
  p.sketch.counter_bits = sketchCounterBits(limit);
  return p;
}

/// One rule's sketch driven the way the memory store drives it: evaluate, then record when
/// allowed (or with count_rejected).
class SketchDriver {
 public:
  explicit SketchDriver(LimitParams params, SketchVariant variant = {})
      : params_(params), table_(params.sketch, params.limit, variant), hasher_(1, 2) {}

  Outcome hit(const std::string& client, Micros now, std::int64_t cost = 1) {
    return hitCells(hasher_.cells(client, params_.sketch), now, cost);
  }
  Outcome hitCells(const SketchCells& cells, Micros now, std::int64_t cost = 1) {
    const std::int64_t index = sketchWindowIndex(now, params_.window_us);
    const SketchEvaluation e = evaluateSketch(params_, table_.read(cells, index), now, cost);
    if (e.record && (e.outcome.allowed || params_.count_rejected)) {
      table_.record(cells, index, e.raise_to, cost);
    }
    return e.outcome;
  }
  SketchRead read(const std::string& client, Micros now) const {
    return table_.read(hasher_.cells(client, params_.sketch),
                       sketchWindowIndex(now, params_.window_us));
  }
  SketchTable& table() { return table_; }
  LimitParams& params() { return params_; }

 private:
  LimitParams params_;
  SketchTable table_;
  SketchHasher hasher_;
};

SketchCells cellsOf(std::initializer_list<std::uint32_t> columns) {
  SketchCells cells;
  std::size_t r = 0;
  for (const std::uint32_t c : columns) {
    cells.columns[r++] = c;
  }
  return cells;
}

TEST(SketchTest, CounterWidthFollowsTheLimit) {
  EXPECT_EQ(sketchCounterBits(1), 8U);
  EXPECT_EQ(sketchCounterBits(254), 8U);
  EXPECT_EQ(sketchCounterBits(255), 16U);
  EXPECT_EQ(sketchCounterBits(65534), 16U);
  EXPECT_EQ(sketchCounterBits(65535), 32U);
  EXPECT_EQ(sketchCounterBits(4294967294LL), 32U);
  EXPECT_EQ(sketchCounterBits(4294967295LL), 0U);
}

TEST(SketchTest, MemoryIsTwoSketchesOfDepthTimesWidthCounters) {
  LimitParams p = sketchParams(1000, 4096, 4);  // 16-bit counters
  SketchTable table(p.sketch, p.limit);
  EXPECT_EQ(table.bytes(), 2U * 4 * 4096 * 2);
  p.sketch.bloom_bits = 1024;
  p.sketch.bloom_hashes = 7;
  EXPECT_EQ(SketchTable(p.sketch, p.limit).bytes(), 2U * 4 * 4096 * 2 + 2 * 1024 / 8);
}

TEST(SketchTest, AdmitsExactlyTheLimitInAWindowAndSaysSoApproximately) {
  SketchDriver s(sketchParams(5, 1024));
  for (int i = 0; i < 5; ++i) {
    const Outcome o = s.hit("alice", kT0 + 10);
    ASSERT_TRUE(o.allowed) << i;
    EXPECT_EQ(o.remaining, 4 - i);
  }
  const Outcome denied = s.hit("alice", kT0 + 20);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.remaining, 0);
  EXPECT_GT(denied.retry_after_us, 0);
  EXPECT_TRUE(s.hit("bob", kT0 + 20).allowed);
}

TEST(SketchTest, WindowEdgesWeighThePreviousSketchLikeTheSlidingCounter) {
  SketchDriver s(sketchParams(10, 1024));
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(s.hit("a", kT0 + 100).allowed);
  }
  EXPECT_FALSE(s.hit("a", kT0 + kSecond - 1).allowed);  // last microsecond of the window
  // First microsecond of the next window: estimate 10 * (W - 0) / W = 10, still full.
  EXPECT_FALSE(s.hit("a", kT0 + kSecond).allowed);
  // Half-way through it: 10 * 0.5 = 5 left.
  const Micros half = kT0 + kSecond + kSecond / 2;
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(s.hit("a", half).allowed) << i;
  }
  EXPECT_FALSE(s.hit("a", half).allowed);
  // Two windows after the last request the previous sketch is of another window: fresh.
  const SketchRead read = s.read("a", kT0 + 3 * kSecond);
  EXPECT_EQ(read.curr, 0);
  EXPECT_EQ(read.prev, 0);
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(s.hit("a", kT0 + 3 * kSecond).allowed) << i;
  }
}

TEST(SketchTest, WithoutCollisionsDecidesExactlyLikeSlidingWindowCounter) {
  // 8 rows of 2^20 columns: three clients collide nowhere (checked below), so every answer
  // (decision, remaining, retry_after, reset_after) must be the exact limiter's.
  SketchDriver s(sketchParams(7, 1U << 20, 8, 2 * kSecond));
  std::map<std::string, BucketDriver> exact;
  const std::vector<std::string> clients{"a", "b", "c"};
  for (const auto& c : clients) {
    exact.emplace(c, BucketDriver(makeParams(Algorithm::kSlidingWindowCounter, 7, 2 * kSecond)));
  }
  std::mt19937_64 rng(42);
  Micros now = kT0;
  for (int i = 0; i < 3000; ++i) {
    now += static_cast<Micros>(rng() % 40'000);
    const std::string& c = clients[rng() % clients.size()];
    const std::int64_t cost = static_cast<std::int64_t>(rng() % 3);
    const Outcome got = s.hit(c, now, cost);
    const Outcome want = exact.at(c).hit(now, cost);
    ASSERT_EQ(got.allowed, want.allowed) << i;
    ASSERT_EQ(got.remaining, want.remaining) << i;
    ASSERT_EQ(got.retry_after_us, want.retry_after_us) << i;
    ASSERT_EQ(got.reset_after_us, want.reset_after_us) << i;
  }
}

TEST(SketchTest, ConservativeUpdateRaisesOnlyWhatTheClientNeeds) {
  SketchDriver s(sketchParams(10, 4, 2));
  const SketchCells a = cellsOf({0, 0});
  const SketchCells b = cellsOf({0, 1});  // shares row 0's counter with a
  const std::int64_t w = sketchWindowIndex(kT0, kSecond);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s.hitCells(a, kT0).allowed);
  }
  ASSERT_TRUE(s.hitCells(b, kT0).allowed);
  // b's estimate was min(3, 0) = 0: its counters are raised to 1, so the shared one stays 3.
  EXPECT_EQ(s.table().read(a, w).curr, 3);
  EXPECT_EQ(s.table().read(b, w).curr, 1);
  ASSERT_TRUE(s.hitCells(b, kT0).allowed);
  ASSERT_TRUE(s.hitCells(b, kT0).allowed);
  ASSERT_TRUE(s.hitCells(b, kT0).allowed);
  // b now has 4: row 0 is raised to max(3, 4) = 4, not to 3 + 4.
  EXPECT_EQ(s.table().read(b, w).curr, 4);
  EXPECT_EQ(s.table().read(a, w).curr, 3);

  // z shares row 0's counter with a and b, and row 1's with q. Conservatively it reads
  // min(3, 5) = 3; with plain count-min updates (every counter += cost) b's request went into
  // the shared counter too, and z reads min(3 + 1, 5) = 4.
  const SketchCells q = cellsOf({2, 3});
  const SketchCells z = cellsOf({0, 3});
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(s.hitCells(q, kT0).allowed);
  }
  EXPECT_EQ(s.table().read(z, w).curr, 4);  // row 0 was raised to b's 4 above
  SketchDriver plain(sketchParams(10, 4, 2), SketchVariant{.conservative = false});
  SketchDriver conservative(sketchParams(10, 4, 2));
  for (SketchDriver* d : {&plain, &conservative}) {
    for (int i = 0; i < 3; ++i) {
      d->hitCells(a, kT0);
    }
    d->hitCells(b, kT0);
    for (int i = 0; i < 5; ++i) {
      d->hitCells(q, kT0);
    }
  }
  EXPECT_EQ(conservative.table().read(z, w).curr, 3);
  EXPECT_EQ(plain.table().read(z, w).curr, 4);
}

TEST(SketchTest, ACostLargerThanTheLimitCanNeverPassAndRecordsNothing) {
  SketchDriver s(sketchParams(5, 64));
  s.params().count_rejected = true;
  const Outcome o = s.hit("a", kT0, 6);
  EXPECT_FALSE(o.allowed);
  EXPECT_TRUE(o.never);
  EXPECT_EQ(o.retry_after_us, kRetryNever);
  EXPECT_EQ(o.remaining, 5);
  EXPECT_EQ(s.read("a", kT0).curr, 0);
  EXPECT_TRUE(s.hit("a", kT0, 5).allowed);
}

TEST(SketchTest, ACheckConsumesNothing) {
  SketchDriver s(sketchParams(2, 64));
  EXPECT_TRUE(s.hit("a", kT0, 0).allowed);
  EXPECT_EQ(s.read("a", kT0).curr, 0);
  EXPECT_TRUE(s.hit("a", kT0).allowed);
  EXPECT_TRUE(s.hit("a", kT0).allowed);
  const Outcome check = s.hit("a", kT0, 0);
  EXPECT_TRUE(check.allowed);
  EXPECT_EQ(check.remaining, 0);
}

TEST(SketchTest, DeniedRequestsChargeOnlyWithCountRejected) {
  SketchDriver s(sketchParams(2, 64));
  s.hit("a", kT0);
  s.hit("a", kT0);
  EXPECT_FALSE(s.hit("a", kT0).allowed);
  EXPECT_EQ(s.read("a", kT0).curr, 2);
  s.params().count_rejected = true;
  EXPECT_FALSE(s.hit("a", kT0).allowed);
  EXPECT_EQ(s.read("a", kT0).curr, 3);
}

TEST(SketchTest, ASaturatedCounterReadsAsUnboundedSoItOnlyDeniesMore) {
  // L = 200 fits 8-bit counters (largest value 255); count_rejected pushes past it.
  SketchDriver s(sketchParams(200, 64, 2));
  s.params().count_rejected = true;
  BucketDriver exact(makeParams(Algorithm::kSlidingWindowCounter, 200, kSecond));
  exact.params().count_rejected = true;
  for (int i = 0; i < 400; ++i) {
    s.hit("a", kT0 + 10);
    exact.hit(kT0 + 10);
  }
  EXPECT_EQ(s.read("a", kT0 + 10).curr, kSketchSaturatedCount);
  EXPECT_GT(s.table().saturatedShare(sketchWindowIndex(kT0, kSecond)), 0.0);
  // In the next window, the exact limiter admits again once 400 * (W - e) / W + 1 <= 200,
  // from e = W / 2 + W / 400 on; the sketch does not know 400 but only "at least 255", and
  // must not admit earlier: it denies for the whole window.
  for (Micros e = 0; e < kSecond; e += kSecond / 50) {
    const Outcome got = s.hit("a", kT0 + kSecond + e);
    const Outcome want = exact.peek(kT0 + kSecond + e);
    if (got.allowed) {
      EXPECT_TRUE(want.allowed) << e;
    }
    EXPECT_FALSE(got.allowed) << e;
    EXPECT_GE(got.retry_after_us, want.retry_after_us) << e;
  }
}

TEST(SketchTest, TheBloomGateAnswersUnseenClientsAsFresh) {
  LimitParams p = sketchParams(3, 1, 1);  // one counter: everybody collides
  p.sketch.bloom_bits = 1U << 16;
  p.sketch.bloom_hashes = kSketchBloomHashes;
  SketchDriver s(p);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s.hit("heavy", kT0).allowed);
  }
  EXPECT_FALSE(s.hit("heavy", kT0).allowed);
  // "new" shares the only counter, but has no Bloom bits: its first request is exact.
  EXPECT_TRUE(s.hit("new", kT0).allowed);
  // Now it is in the filter and reads the shared counter.
  EXPECT_FALSE(s.hit("new", kT0).allowed);

  LimitParams no_gate = sketchParams(3, 1, 1);
  SketchDriver t(no_gate);
  for (int i = 0; i < 3; ++i) {
    t.hit("heavy", kT0);
  }
  EXPECT_FALSE(t.hit("new", kT0).allowed);  // a false denial the gate avoids
}

TEST(SketchTest, LoadIsChargedPerWindowOverWidthTimesLimit) {
  SketchDriver s(sketchParams(10, 100, 4));
  for (int i = 0; i < 50; ++i) {
    s.hit("c" + std::to_string(i), kT0);
  }
  EXPECT_DOUBLE_EQ(s.table().load(sketchWindowIndex(kT0, kSecond)), 50.0 / 1000.0);
  EXPECT_DOUBLE_EQ(s.table().load(sketchWindowIndex(kT0 + kSecond, kSecond)), 0.0);
}

TEST(SketchHasherTest, IsKeyedDeterministicAndFingerprinted) {
  const SketchHasher a(1, 2);
  const SketchHasher b(1, 2);
  const SketchHasher c(1, 3);
  EXPECT_EQ(a.hash("client"), b.hash("client"));
  EXPECT_NE(a.hash("client"), c.hash("client"));
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  EXPECT_NE(a.fingerprint(), c.fingerprint());
  EXPECT_EQ(a.fingerprint().size(), 8U);
  std::uint64_t k0 = 0;
  std::uint64_t k1 = 0;
  ASSERT_TRUE(SketchHasher::parseSeed(SketchHasher::formatSeed(0x0123456789abcdefULL, 42), k0, k1));
  EXPECT_EQ(k0, 0x0123456789abcdefULL);
  EXPECT_EQ(k1, 42U);
  EXPECT_FALSE(SketchHasher::parseSeed("xyz", k0, k1));
}

TEST(SketchHasherTest, RowsAreMixedIndependently) {
  // With h1 + r * h2, two keys colliding in rows 0 and 1 collide in every row. With
  // independent mixing, a pair colliding in row 0 collides in row 1 with probability 1/w.
  const SketchHasher h(7, 11);
  constexpr std::uint32_t kWidth = 64;
  std::vector<SketchCells> cells;
  for (int i = 0; i < 2000; ++i) {
    cells.push_back(h.cells("client-" + std::to_string(i), kWidth, 4, 0, 0));
  }
  int row0 = 0;
  int all = 0;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    for (std::size_t j = i + 1; j < cells.size(); ++j) {
      if (cells[i].columns[0] == cells[j].columns[0]) {
        ++row0;
        if (cells[i].columns[1] == cells[j].columns[1] &&
            cells[i].columns[2] == cells[j].columns[2] &&
            cells[i].columns[3] == cells[j].columns[3]) {
          ++all;
        }
      }
    }
  }
  // ~31k pairs collide in row 0; ~31k / 64^3 = 0.1 expected in all four rows.
  EXPECT_GT(row0, 25'000);
  EXPECT_LE(all, 3);
  for (const auto& c : cells) {
    for (int r = 0; r < 4; ++r) {
      ASSERT_LT(c.columns[r], kWidth);
    }
  }
}

// Property: whatever the trace, no client is admitted beyond L in any window, and every
// request the sketch admits is one the exact sliding_window_counter, fed the same admitted
// requests, admits too (the sketch never over-admits).
TEST(SketchPropertyTest, NeverAdmitsWhatTheExactLimiterWouldDeny) {
  std::mt19937_64 rng(20261123);
  for (int trial = 0; trial < 40; ++trial) {
    const std::int64_t limit = 1 + static_cast<std::int64_t>(rng() % 20);
    const Micros window = kSecond * (1 + static_cast<Micros>(rng() % 3));
    const std::uint32_t width = 1 + static_cast<std::uint32_t>(rng() % 16);
    const std::uint32_t depth = 1 + static_cast<std::uint32_t>(rng() % 4);
    LimitParams p = sketchParams(limit, width, depth, window);
    p.count_rejected = rng() % 4 == 0;
    if (rng() % 3 == 0) {
      p.sketch.bloom_bits = 256;
      p.sketch.bloom_hashes = 3;
    }
    SketchDriver s(p);
    std::map<std::string, BucketDriver> shadow;  // exact, fed the sketch's admitted requests
    std::map<std::pair<std::string, std::int64_t>, std::int64_t> per_window;
    const int clients = 1 + static_cast<int>(rng() % 30);
    Micros now = kT0 + static_cast<Micros>(rng() % window);
    for (int i = 0; i < 1500; ++i) {
      now += static_cast<Micros>(rng() % (window / 20));
      const std::string c = "c" + std::to_string(rng() % clients);
      const std::int64_t cost = static_cast<std::int64_t>(rng() % 4);
      auto it = shadow.find(c);
      if (it == shadow.end()) {
        LimitParams exact = makeParams(Algorithm::kSlidingWindowCounter, limit, window);
        exact.count_rejected = p.count_rejected;
        it = shadow.emplace(c, BucketDriver(exact)).first;
      }
      const Outcome exact_now = it->second.peek(now, cost);
      const Outcome got = s.hit(c, now, cost);
      if (got.allowed) {
        ASSERT_TRUE(exact_now.allowed) << "trial " << trial << " request " << i;
        ASSERT_LE(got.remaining, exact_now.remaining);
        const auto key = std::make_pair(c, sketchWindowIndex(now, window));
        per_window[key] += cost;
        ASSERT_LE(per_window[key], limit) << "trial " << trial << " request " << i;
      } else if (!got.never) {
        ASSERT_GE(got.retry_after_us, exact_now.allowed ? 0 : exact_now.retry_after_us);
      }
      if (got.allowed || p.count_rejected) {
        // Keep the shadow on the sketch's history: record what the sketch recorded.
        if (got.allowed || !got.never) {
          LimitParams& sp = it->second.params();
          const bool saved = sp.count_rejected;
          sp.count_rejected = true;  // record even if the exact limiter would deny
          if (cost > 0 && !got.never) {
            it->second.hit(now, cost);
          }
          sp.count_rejected = saved;
        }
      }
    }
  }
}

}  // namespace
}  // namespace sluice
