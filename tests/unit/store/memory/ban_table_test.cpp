#include "store/memory/ban_table.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "store/memory/bucket_table.hpp"

namespace sluice::memory_detail {
namespace {

constexpr Micros kT0 = 1'700'000'000LL * kMicrosPerSecond;
constexpr Micros kSecond = kMicrosPerSecond;

BanState bannedUntil(Micros until) {
  BanState s;
  s.until = until;
  s.step = 1;
  return s;
}

/// Stores `key` until `expires_at` (its hash as the memory store computes it).
int put(BanTable& table, const std::string& key, Micros expires_at, Micros now) {
  return table.store({key, BucketTable::hashKey(key)}, bannedUntil(expires_at), expires_at, now);
}

const BanState* get(const BanTable& table, const std::string& key, Micros now) {
  return table.find({key, BucketTable::hashKey(key)}, now);
}

TEST(BanTableTest, FindsAStateUntilItsTtl) {
  BanTable table;
  EXPECT_EQ(put(table, "api|c|login", kT0 + 10 * kSecond, kT0), 1);
  ASSERT_NE(get(table, "api|c|login", kT0 + 9 * kSecond), nullptr);
  EXPECT_EQ(get(table, "api|c|login", kT0 + 9 * kSecond)->until, kT0 + 10 * kSecond);
  EXPECT_EQ(get(table, "api|c|login", kT0 + 10 * kSecond), nullptr);
  EXPECT_EQ(get(table, "api|d|login", kT0), nullptr);
  EXPECT_EQ(put(table, "api|c|login", kT0 + 20 * kSecond, kT0), 0);  // replaced
  EXPECT_EQ(put(table, "api|c|login", kT0, kT0), -1);                // erased
  EXPECT_TRUE(table.empty());
}

TEST(BanTableTest, SweepsNothingBeforeTheEarliestExpiryAndEverythingAfterIt) {
  BanTable table;
  // Enough entries that the table rehashes several times while they are stored.
  for (int i = 0; i < 1000; ++i) {
    put(table, "k" + std::to_string(i), kT0 + (60 + i % 7) * kSecond, kT0);
  }
  std::size_t removed = 0;
  for (int i = 0; i < 200; ++i) {
    removed += table.sweep(kT0 + 59 * kSecond, 32);
  }
  EXPECT_EQ(removed, 0u);
  EXPECT_EQ(table.size(), 1000u);
  // Past every expiry: budgeted sweeps drop them all, however the table was rehashed.
  for (int i = 0; i < 1000 && !table.empty(); ++i) {
    removed += table.sweep(kT0 + 70 * kSecond, 32);
  }
  EXPECT_EQ(removed, 1000u);
  EXPECT_TRUE(table.empty());
}

TEST(BanTableTest, AStateStoredWithAnEarlierExpiryIsSweptAtIt) {
  BanTable table;
  put(table, "long", kT0 + 3600 * kSecond, kT0);
  for (int i = 0; i < 10; ++i) {
    table.sweep(kT0 + i * kSecond, 32);  // a whole pass: nothing expires for an hour
  }
  put(table, "short", kT0 + 20 * kSecond, kT0 + 10 * kSecond);
  std::size_t removed = 0;
  for (int i = 0; i < 100; ++i) {
    removed += table.sweep(kT0 + 21 * kSecond, 32);
  }
  EXPECT_EQ(removed, 1u);
  EXPECT_EQ(table.size(), 1u);
  EXPECT_NE(get(table, "long", kT0 + 21 * kSecond), nullptr);
}

TEST(BanTableTest, TheResetRemovesByPrefix) {
  BanTable table;
  put(table, "api|alice|login", kT0 + kSecond, kT0);
  put(table, "api|bob|login", kT0 + kSecond, kT0);
  EXPECT_EQ(table.erasePrefixes({"api|alice|"}), 1u);
  EXPECT_EQ(get(table, "api|alice|login", kT0), nullptr);
  EXPECT_NE(get(table, "api|bob|login", kT0), nullptr);
}

}  // namespace
}  // namespace sluice::memory_detail
