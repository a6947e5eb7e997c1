#include <gtest/gtest.h>

#include <list>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "store/memory/bucket_table.hpp"

namespace sluice::memory_detail {
namespace {

constexpr Micros kT0 = 1'700'000'000LL * kMicrosPerSecond;

BucketState stateOf(std::int64_t v) {
  BucketState s;
  s.a = v;
  s.b = v + 1;
  s.c = v + 2;
  return s;
}

/// A deliberately simple model: a map for contents, a list for recency.
struct Model {
  struct Item {
    std::int64_t value = 0;
    Micros expires_at = 0;
  };
  std::map<std::string, Item> items;
  std::list<std::string> recency;  // front: most recently used

  void touch(const std::string& key) {
    recency.remove(key);
    recency.push_front(key);
  }
  void erase(const std::string& key) {
    items.erase(key);
    recency.remove(key);
  }
};

std::string randomKey(std::mt19937_64& rng) {
  const int kind = static_cast<int>(rng() % 50);
  std::string key = "k" + std::to_string(rng() % 400) + "|";
  if (kind == 0) {
    key.append(20'000, 'L');  // kept apart from the arena
  } else {
    key.append(rng() % 60, static_cast<char>('a' + rng() % 3));
  }
  return key;
}

TEST(BucketTableTest, MatchesASimpleModelUnderRandomOperations) {
  std::mt19937_64 rng(42);
  BucketTable table;
  Model model;
  Micros now = kT0;
  for (int step = 0; step < 30'000; ++step) {
    now += static_cast<Micros>(rng() % 3000);
    const std::string key = randomKey(rng);
    const std::uint64_t hash = BucketTable::hashKey(key);
    const std::uint32_t index = table.find(key, hash);
    const bool present = model.items.count(key) > 0;
    ASSERT_EQ(index != BucketTable::kNone, present) << step;
    const int op = static_cast<int>(rng() % 10);
    if (present) {
      BucketState s = table.load(index);
      ASSERT_EQ(s.a, model.items[key].value) << step;
      ASSERT_EQ(s.c, model.items[key].value + 2) << step;
      if (op < 5) {
        table.touch(index);
        model.touch(key);
        const std::int64_t v = static_cast<std::int64_t>(rng() % 1000);
        table.save(index, stateOf(v), now + static_cast<Micros>(rng() % 2'000'000));
        model.items[key] = {v, table.expiresAt(index)};
      } else if (op < 8) {
        table.restore(index, std::move(s.log));
      } else {
        table.erase(index);
        model.erase(key);
      }
    } else {
      const std::int64_t v = static_cast<std::int64_t>(rng() % 1000);
      const std::uint32_t added =
          table.insert(key, hash, stateOf(v), now + static_cast<Micros>(rng() % 2'000'000));
      model.items[key] = {v, table.expiresAt(added)};
      model.touch(key);
    }
    if (step % 97 == 0 && !model.recency.empty()) {
      // Making room drops expired entries found by a bounded scan, or else exactly the
      // least recently used one.
      const std::string lru = model.recency.back();
      Evictions evictions;
      const std::size_t removed = table.makeRoom(now, evictions);
      ASSERT_GE(removed, 1U);
      ASSERT_EQ(evictions.expired + evictions.capacity, removed);
      if (evictions.capacity == 1) {
        ASSERT_EQ(removed, 1U);
        ASSERT_EQ(table.find(lru, BucketTable::hashKey(lru)), BucketTable::kNone) << step;
        ASSERT_GT(model.items[lru].expires_at, now);
      }
      for (auto it = model.items.begin(); it != model.items.end();) {
        const std::string k = it->first;
        const Micros expires_at = it->second.expires_at;
        ++it;
        if (table.find(k, BucketTable::hashKey(k)) == BucketTable::kNone) {
          ASSERT_TRUE(k == lru || expires_at <= now) << "a live entry went: " << step;
          model.erase(k);
        }
      }
    }
    if (step % 1000 == 0) {
      // A complete sweep leaves exactly the unexpired entries.
      std::size_t expired = 0;
      for (const auto& [k, item] : model.items) {
        expired += item.expires_at <= now ? 1 : 0;
      }
      ASSERT_EQ(table.sweepAll(now), expired) << step;
      for (auto it = model.items.begin(); it != model.items.end();) {
        const std::string k = it->first;
        const bool gone = it->second.expires_at <= now;
        ++it;
        if (gone) {
          model.erase(k);
        }
      }
    }
    ASSERT_EQ(table.size(), model.items.size()) << step;
  }
  for (const auto& [key, item] : model.items) {
    ASSERT_NE(table.find(key, BucketTable::hashKey(key)), BucketTable::kNone);
  }
}

TEST(BucketTableTest, KeepsLogsOnlyForLogBuckets) {
  BucketTable table;
  BucketState with_log;
  with_log.log = {LogEntry{kT0, 2}, LogEntry{kT0 + 5, 1}};
  const std::uint32_t index =
      table.insert("log", BucketTable::hashKey("log"), std::move(with_log), kT0 + kMicrosPerSecond);
  BucketState loaded = table.load(index);
  ASSERT_EQ(loaded.log.size(), 2U);
  table.restore(index, std::move(loaded.log));
  EXPECT_EQ(table.load(index).log.size(), 2U);
  table.save(index, BucketState{}, kT0 + kMicrosPerSecond);
  EXPECT_TRUE(table.load(index).log.empty());
}

TEST(BucketTableTest, ErasesByPrefixAndSurvivesArenaCompaction) {
  BucketTable table;
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 3000; ++i) {
      const std::string key =
          "r" + std::to_string(round) + "|" + std::string(30, 'x') + std::to_string(i);
      table.insert(key, BucketTable::hashKey(key), stateOf(i), kT0 + kMicrosPerSecond);
    }
    EXPECT_EQ(table.erasePrefixes({"r" + std::to_string(round) + "|"}), 3000U);
    EXPECT_EQ(table.size(), 0U);
  }
  const std::string survivor = "keep";
  table.insert(survivor, BucketTable::hashKey(survivor), stateOf(7), kT0 + kMicrosPerSecond);
  for (int i = 0; i < 5000; ++i) {
    const std::string key = "tmp" + std::string(40, 'y') + std::to_string(i);
    const std::uint32_t index =
        table.insert(key, BucketTable::hashKey(key), stateOf(i), kT0 + kMicrosPerSecond);
    table.erase(index);
  }
  EXPECT_EQ(table.size(), 1U);
  const std::uint32_t found = table.find(survivor, BucketTable::hashKey(survivor));
  ASSERT_NE(found, BucketTable::kNone);
  EXPECT_EQ(table.load(found).a, 7);
}

TEST(BucketTableTest, ExpiryRoundsUpToWholeSeconds) {
  BucketTable table;
  const std::uint32_t index = table.insert("k", BucketTable::hashKey("k"), stateOf(1), kT0 + 1);
  EXPECT_EQ(table.expiresAt(index), kT0 + kMicrosPerSecond);
  EXPECT_EQ(table.sweepAll(kT0 + kMicrosPerSecond - 1), 0U);
  EXPECT_EQ(table.sweepAll(kT0 + kMicrosPerSecond), 1U);
}

/// Hashes that share their home cell bits and all but a few of their other bits: runs of
/// cells with the same home, cells whose 40 stored bits match a different key, and runs
/// wrapping around the end of the index (low 32 bits near 2^32 - 1 place a key last).
std::uint64_t crowdedHash(std::mt19937_64& rng) {
  static constexpr std::uint64_t kLow[] = {0xffffffffULL, 0xfffffff0ULL, 0x0ULL, 0x80000000ULL};
  const std::uint64_t low = kLow[rng() % 4];
  const std::uint64_t top = rng() % 2 == 0 ? 0xffULL : 0x00ULL;  // 0xff..: like an empty cell
  const std::uint64_t middle = rng() % 3;                        // bits 32-55: not stored in a cell
  return top << 56 | middle << 32 | low;
}

TEST(BucketTableTest, MatchesAModelWhenHashesCollide) {
  std::mt19937_64 rng(7);
  BucketTable table;
  std::map<std::string, std::pair<std::uint64_t, std::int64_t>> model;  // hash, value
  for (int step = 0; step < 20'000; ++step) {
    const std::string key = "c" + std::to_string(rng() % 300);
    auto it = model.find(key);
    const std::uint64_t hash = it != model.end() ? it->second.first : crowdedHash(rng);
    const std::uint32_t index = table.find(key, hash);
    ASSERT_EQ(index != BucketTable::kNone, it != model.end()) << step;
    if (it == model.end()) {
      const std::int64_t v = static_cast<std::int64_t>(rng() % 1000);
      table.insert(key, hash, stateOf(v), kT0 + kMicrosPerSecond);
      model[key] = {hash, v};
    } else if (rng() % 3 == 0) {
      table.erase(index, hash);
      model.erase(it);
    } else {
      ASSERT_EQ(table.load(index).a, it->second.second) << step;
    }
    ASSERT_EQ(table.size(), model.size()) << step;
    if (step % 500 == 0) {
      for (const auto& [k, item] : model) {
        const std::uint32_t found = table.find(k, item.first);
        ASSERT_NE(found, BucketTable::kNone) << step << " " << k;
        ASSERT_EQ(table.load(found).a, item.second) << step << " " << k;
      }
    }
  }
}

TEST(BucketTableTest, TellsApartKeysWhoseStoredHashBitsAreEqual) {
  // Two real keys whose hashKey() agree on the 40 bits a cell keeps (found by hashing
  // "client-<i>|api:path=/login;i0;0" for i = 0, 1, ... until two agreed): each finds its
  // own entry, before and after the other goes, and after the index grows around them.
  const std::string first = "client-940495|api:path=/login;i0;0";
  const std::string second = "client-1817903|api:path=/login;i0;0";
  constexpr std::uint64_t kCellBits = 0xff000000ffffffffULL;
  ASSERT_EQ(BucketTable::hashKey(first) & kCellBits, BucketTable::hashKey(second) & kCellBits);
  ASSERT_NE(BucketTable::hashKey(first), BucketTable::hashKey(second));
  BucketTable table;
  table.insert(first, BucketTable::hashKey(first), stateOf(1), kT0 + kMicrosPerSecond);
  EXPECT_EQ(table.find(second, BucketTable::hashKey(second)), BucketTable::kNone);
  table.insert(second, BucketTable::hashKey(second), stateOf(2), kT0 + 2 * kMicrosPerSecond);
  for (int i = 0; i < 100; ++i) {  // grows the index
    const std::string key = "other" + std::to_string(i);
    table.insert(key, BucketTable::hashKey(key), stateOf(100 + i), kT0 + 2 * kMicrosPerSecond);
  }
  EXPECT_EQ(table.load(table.find(first, BucketTable::hashKey(first))).a, 1);
  EXPECT_EQ(table.load(table.find(second, BucketTable::hashKey(second))).a, 2);
  EXPECT_EQ(table.sweepAll(kT0 + kMicrosPerSecond), 1U);  // erases `first`, hashing its key
  EXPECT_EQ(table.find(first, BucketTable::hashKey(first)), BucketTable::kNone);
  EXPECT_EQ(table.load(table.find(second, BucketTable::hashKey(second))).a, 2);
  EXPECT_EQ(table.size(), 101U);
}

TEST(BucketTableTest, GrowsWithoutLosingKeysOrTheirOrder) {
  BucketTable table;
  std::vector<std::string> keys;
  for (int i = 0; i < 20'000; ++i) {
    keys.push_back("grow" + std::to_string(i));
    table.insert(keys.back(), BucketTable::hashKey(keys.back()), stateOf(i),
                 kT0 + kMicrosPerSecond);
  }
  for (int i = 0; i < 20'000; ++i) {
    const std::uint32_t index = table.find(keys[i], BucketTable::hashKey(keys[i]));
    ASSERT_NE(index, BucketTable::kNone) << i;
    ASSERT_EQ(table.load(index).a, i);
  }
  // The least recently used is still the first inserted.
  Evictions evictions;
  EXPECT_EQ(table.makeRoom(kT0, evictions), 1U);
  EXPECT_EQ(evictions.capacity, 1U);
  EXPECT_EQ(table.find(keys[0], BucketTable::hashKey(keys[0])), BucketTable::kNone);
  EXPECT_NE(table.find(keys[1], BucketTable::hashKey(keys[1])), BucketTable::kNone);
}

/// Uses random keys of a table of `keys` entries, then evicts `evictions` times, touching and
/// inserting in between: each eviction takes exactly the least recently used key.
void expectEvictionsInUseOrder(BucketTable& table, int keys, int uses, int evictions) {
  std::mt19937_64 rng(11);
  std::list<std::string> recency;  // front: most recently used
  std::vector<std::string> live;
  const auto use = [&](const std::string& key) {
    recency.remove(key);
    recency.push_front(key);
  };
  for (int i = 0; i < keys; ++i) {
    live.push_back("u" + std::to_string(i));
    table.insert(live.back(), BucketTable::hashKey(live.back()), stateOf(i), kT0 + 3600'000'000);
    use(live.back());
  }
  for (int i = 0; i < uses; ++i) {
    const std::string key = live[rng() % live.size()];
    const std::uint32_t index = table.find(key, BucketTable::hashKey(key));
    table.touch(index);
    use(key);
    if (i % 97 == 0) {  // the most recently used goes, a new key comes
      table.erase(index);
      recency.remove(key);
      std::erase(live, key);
      live.push_back("r" + std::to_string(i));
      table.insert(live.back(), BucketTable::hashKey(live.back()), stateOf(i), kT0 + 3600'000'000);
      use(live.back());
    }
  }
  for (int i = 0; i < evictions; ++i) {
    const std::string lru = recency.back();
    Evictions counted;
    ASSERT_EQ(table.makeRoom(kT0, counted), 1U) << i;
    ASSERT_EQ(counted.capacity, 1U) << i;
    ASSERT_EQ(table.find(lru, BucketTable::hashKey(lru)), BucketTable::kNone) << i;
    recency.pop_back();
    std::erase(live, lru);
    for (int j = 0; j < 3; ++j) {
      const std::string& key = live[rng() % live.size()];
      table.touch(table.find(key, BucketTable::hashKey(key)));
      use(key);
    }
    live.push_back("n" + std::to_string(i));
    table.insert(live.back(), BucketTable::hashKey(live.back()), stateOf(i), kT0 + 3600'000'000);
    use(live.back());
  }
  ASSERT_EQ(table.size(), static_cast<std::size_t>(keys));
  for (const std::string& key : live) {
    ASSERT_NE(table.find(key, BucketTable::hashKey(key)), BucketTable::kNone) << key;
  }
}

TEST(BucketTableTest, EvictsTheLeastRecentlyUsedWhenItFirstEvictsLate) {
  // Thousands of uses stamped before the first eviction orders the table.
  BucketTable table;
  expectEvictionsInUseOrder(table, 2000, 20'000, 3000);
}

TEST(BucketTableTest, OrdersItselfWhenItsUseStampsRunOut) {
  BucketTable table(/*stamp_limit=*/500);
  expectEvictionsInUseOrder(table, 300, 1000, 300);
}

TEST(BucketTableTest, SweepsEveryExpiredEntryOnceWhateverItsBudget) {
  // More expired entries than one batch, a budget past the table's end (the scan comes back
  // to where it started), logs among them: exactly the expired entries go, once.
  for (const std::size_t budget : {3UL, 8UL, 9UL, 25UL, 1000UL}) {
    BucketTable table;
    std::vector<std::string> keys;
    for (int i = 0; i < 40; ++i) {
      keys.push_back("s" + std::to_string(i));
      BucketState state = stateOf(i);
      if (i % 5 == 0) {
        state.log = {LogEntry{kT0, 1}};
      }
      const Micros expires_at = kT0 + (i % 3 == 0 ? 2 : 5) * kMicrosPerSecond;
      table.insert(keys.back(), BucketTable::hashKey(keys.back()), std::move(state), expires_at);
    }
    std::size_t removed = 0;
    for (int round = 0; round < 100; ++round) {
      removed += table.sweep(kT0 + 3 * kMicrosPerSecond, budget);
    }
    EXPECT_EQ(removed, 14U) << budget;  // i % 3 == 0 for i < 40
    EXPECT_EQ(table.size(), 26U) << budget;
    for (int i = 0; i < 40; ++i) {
      const std::uint32_t index = table.find(keys[i], BucketTable::hashKey(keys[i]));
      ASSERT_EQ(index == BucketTable::kNone, i % 3 == 0) << budget << " " << i;
      if (index != BucketTable::kNone) {
        EXPECT_EQ(table.load(index).log.size(), i % 5 == 0 ? 1U : 0U);
      }
    }
  }
}

}  // namespace
}  // namespace sluice::memory_detail
