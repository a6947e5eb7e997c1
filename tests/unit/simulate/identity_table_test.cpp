#include "simulate/identity_table.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

namespace sluice::simulate {
namespace {

HashedIdentity hashed(const std::string& text) { return HashedIdentity{text, identityHash(text)}; }

TEST(IdentityTableTest, FindsWhatItAddedAndAddsEachIdentityOnce) {
  IdentityTable<int> table;
  EXPECT_TRUE(table.empty());
  table.prefetchCell(hashed("user=mallory").hash);  // hints, on an empty table too
  table.prefetchEntry(hashed("user=mallory").hash);
  EXPECT_EQ(table.find("user=mallory"), nullptr);
  table.obtain(hashed("user=mallory")) = 3;
  table.obtain(hashed("user=alice")) = 5;
  table.prefetchCell(hashed("user=mallory").hash);
  table.prefetchEntry(hashed("user=mallory").hash);
  table.obtain(hashed("user=mallory")) += 1;
  EXPECT_EQ(table.size(), 2u);
  ASSERT_NE(table.find("user=mallory"), nullptr);
  EXPECT_EQ(table.find("user=mallory")->second, 4);
  EXPECT_EQ(table.at("user=alice"), 5);
  EXPECT_EQ(table.find("user=bob"), nullptr);
  EXPECT_THROW(table.at("user=bob"), std::out_of_range);
}

TEST(IdentityTableTest, IteratesInTheOrderIdentitiesCame) {
  IdentityTable<int> table;
  const std::vector<std::string> order = {"c", "", "a", "b=1", "a,b"};
  for (std::size_t i = 0; i < order.size(); ++i) {
    table.obtain(hashed(order[i])) = static_cast<int>(i);
  }
  std::vector<std::string> seen;
  for (const auto& [who, value] : table) {
    EXPECT_EQ(value, static_cast<int>(seen.size()));
    seen.push_back(who);
  }
  EXPECT_EQ(seen, order);
}

TEST(IdentityTableTest, KeepsEveryEntryAndItsAddressWhileGrowing) {
  IdentityTable<std::uint64_t> table;
  std::map<std::string, std::uint64_t> expected;
  std::vector<std::pair<std::string, std::uint64_t*>> addresses;
  std::mt19937_64 random(3);
  for (int i = 0; i < 50'000; ++i) {
    const std::string who = "user=" + std::to_string(random() % 20'000);
    std::uint64_t& value = table.obtain(hashed(who));
    ++value;
    ++expected[who];
    if (i % 1'000 == 0) {
      addresses.emplace_back(who, &value);
    }
  }
  EXPECT_EQ(table.size(), expected.size());
  for (const auto& [who, count] : expected) {
    ASSERT_NE(table.find(who), nullptr) << who;
    EXPECT_EQ(table.find(who)->second, count) << who;
  }
  for (const auto& [who, address] : addresses) {
    EXPECT_EQ(&table.obtain(hashed(who)), address) << who;
  }
}

TEST(IdentityTableTest, TellsApartIdentitiesWhoseHashesShareTheirLowBits) {
  // Two texts forced onto the same cells: the hash's high bits and the text tell them apart.
  IdentityTable<int> table;
  const std::string a = "a";
  const std::string b = "b";
  table.obtain(HashedIdentity{a, 7}) = 1;
  table.obtain(HashedIdentity{b, 7}) = 2;
  table.obtain(HashedIdentity{a, 7}) += 10;
  EXPECT_EQ(table.size(), 2u);
  int sum = 0;
  for (const auto& [who, value] : table) {
    sum += value;
  }
  EXPECT_EQ(sum, 13);
}

}  // namespace
}  // namespace sluice::simulate
