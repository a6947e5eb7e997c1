#include "sluice/common/space_saving.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace sluice {
namespace {

std::map<std::string, SpaceSaving::Entry> byKey(const std::vector<SpaceSaving::Entry>& entries) {
  std::map<std::string, SpaceSaving::Entry> out;
  for (const auto& e : entries) {
    out.emplace(e.key, e);
  }
  return out;
}

TEST(SpaceSavingTest, CountsExactlyWhileKeysFit) {
  SpaceSaving s(4);
  for (int i = 0; i < 5; ++i) {
    s.add("a");
  }
  s.add("b", 3);
  s.add("c");
  auto top = s.top(10);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].key, "a");
  EXPECT_EQ(top[0].count, 5u);
  EXPECT_EQ(top[0].error, 0u);
  EXPECT_EQ(top[1].key, "b");
  EXPECT_EQ(top[1].count, 3u);
  EXPECT_EQ(top[2].key, "c");
  EXPECT_EQ(s.total(), 9u);
  EXPECT_EQ(s.absentBound(), 0u);  // not full: an absent key was never seen
}

TEST(SpaceSavingTest, NewKeyTakesTheSmallestCounterAndInheritsItAsError) {
  SpaceSaving s(2);
  s.add("a", 5);
  s.add("b", 2);
  s.add("c");  // replaces b (2): count 3, error 2
  auto entries = byKey(s.top(10));
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_FALSE(entries.contains("b"));
  EXPECT_EQ(entries["c"].count, 3u);
  EXPECT_EQ(entries["c"].error, 2u);
  EXPECT_EQ(entries["a"].count, 5u);
  EXPECT_EQ(s.absentBound(), 3u);
  EXPECT_EQ(s.size(), 2u);
}

TEST(SpaceSavingTest, TopIsOrderedByCountThenErrorThenKeyAndTruncated) {
  SpaceSaving s(8);
  s.add("z", 2);
  s.add("y", 2);
  s.add("x", 7);
  s.add("w", 1);
  auto top = s.top(3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].key, "x");
  EXPECT_EQ(top[1].key, "y");
  EXPECT_EQ(top[2].key, "z");
}

TEST(SpaceSavingTest, LongKeysAreCountedUnderTheirPrefix) {
  SpaceSaving s(4, 8);
  s.add("0123456789-a");
  s.add("0123456789-b");
  auto top = s.top(10);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].key, "01234567");
  EXPECT_EQ(top[0].count, 2u);
}

TEST(SpaceSavingTest, ClearForgetsEverythingAndCountersAreReused) {
  SpaceSaving s(2);
  s.add("a");
  s.add("b");
  s.add("c");
  s.clear();
  EXPECT_EQ(s.total(), 0u);
  EXPECT_TRUE(s.top(10).empty());
  s.add("d");
  auto top = s.top(10);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].key, "d");
  EXPECT_EQ(top[0].count, 1u);
  EXPECT_EQ(top[0].error, 0u);
}

/// The guarantees the documentation states, on a skewed stream far larger than the summary:
/// true <= count, count - error <= true, error <= N / k, and every key heavier than N / k
/// is present.
TEST(SpaceSavingTest, BoundsHoldOnASkewedStream) {
  constexpr std::size_t kCapacity = 20;
  SpaceSaving s(kCapacity);
  std::map<std::string, std::uint64_t> truth;
  std::mt19937_64 random(42);
  // Zipf-like: key i with weight ~ 1 / (i + 1), 500 distinct keys.
  std::vector<double> weights;
  for (int i = 0; i < 500; ++i) {
    weights.push_back(1.0 / (i + 1));
  }
  std::discrete_distribution<int> pick(weights.begin(), weights.end());
  constexpr int kStream = 50'000;
  for (int i = 0; i < kStream; ++i) {
    std::string key = "client-" + std::to_string(pick(random));
    ++truth[key];
    s.add(key);
  }
  ASSERT_EQ(s.total(), static_cast<std::uint64_t>(kStream));
  const std::uint64_t bound = kStream / kCapacity;
  auto entries = byKey(s.top(kCapacity));
  ASSERT_EQ(entries.size(), kCapacity);
  for (const auto& [key, e] : entries) {
    EXPECT_GE(e.count, truth[key]) << key;
    EXPECT_LE(e.count - e.error, truth[key]) << key;
    EXPECT_LE(e.error, bound) << key;
  }
  for (const auto& [key, n] : truth) {
    if (n > bound) {
      EXPECT_TRUE(entries.contains(key)) << key << " seen " << n << " times";
    }
  }
  EXPECT_LE(s.absentBound(), bound);
}

TEST(SpaceSavingTest, MergeOfDisjointPartsKeepsTheBounds) {
  constexpr std::size_t kCapacity = 10;
  SpaceSaving a(kCapacity);
  SpaceSaving b(kCapacity);
  std::map<std::string, std::uint64_t> truth;
  std::mt19937_64 random(7);
  std::vector<double> weights;
  for (int i = 0; i < 200; ++i) {
    weights.push_back(1.0 / (i + 1));
  }
  std::discrete_distribution<int> pick(weights.begin(), weights.end());
  for (int i = 0; i < 20'000; ++i) {
    std::string key = "k" + std::to_string(pick(random));
    ++truth[key];
    (i % 3 == 0 ? a : b).add(key);
  }
  auto merged = SpaceSaving::merge({a.snapshot(), b.snapshot()}, 1000);
  const std::uint64_t bound = a.total() / kCapacity + b.total() / kCapacity;
  for (const auto& e : merged) {
    EXPECT_GE(e.count, truth[e.key]) << e.key;
    EXPECT_LE(e.count - e.error, truth[e.key]) << e.key;
    EXPECT_LE(e.error, bound) << e.key;
  }
  auto found = byKey(merged);
  for (const auto& [key, n] : truth) {
    if (n > bound) {
      EXPECT_TRUE(found.contains(key)) << key;
    }
  }
  // Largest first.
  for (std::size_t i = 1; i < merged.size(); ++i) {
    EXPECT_GE(merged[i - 1].count, merged[i].count);
  }
}

TEST(SpaceSavingTest, MergeAddsTheAbsentBoundOfPartsWithoutTheKey) {
  SpaceSaving full(1);
  full.add("x", 4);  // full; any other key had at most 4 there
  SpaceSaving sparse(4);
  sparse.add("y", 3);  // not full: keys absent here had 0
  auto merged = byKey(SpaceSaving::merge({full.snapshot(), sparse.snapshot()}, 10));
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged["x"].count, 4u);
  EXPECT_EQ(merged["x"].error, 0u);
  EXPECT_EQ(merged["y"].count, 7u);  // 3 + up to 4 hidden in the full part
  EXPECT_EQ(merged["y"].error, 4u);
}

}  // namespace
}  // namespace sluice
