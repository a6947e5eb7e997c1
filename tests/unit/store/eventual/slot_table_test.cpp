// The eventual engine's key table (open addressing, backward-shift deletion) against a
// std::map model, with hashes chosen to collide and to wrap around the table's end.
#include "store/eventual/slot_table.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>

namespace sluice::eventual_detail {
namespace {

struct Item {
  std::string storage;
  std::string_view key;
  int value = 0;
};

std::unique_ptr<Item> item(const std::string& key, int value) {
  auto out = std::make_unique<Item>();
  out->storage = key;
  out->key = out->storage;
  out->value = value;
  return out;
}

/// Few distinct index bits: long runs that collide and wrap around.
std::uint64_t crowded(std::uint32_t n) {
  return (static_cast<std::uint64_t>(n % 7) * 0x9e3779b97f4a7c15ULL) << SlotTable<Item>::kShardBits;
}

TEST(SlotTableTest, FindsWhatItHoldsThroughCollisionsGrowthAndDeletions) {
  SlotTable<Item> table;
  std::map<std::string, std::pair<std::uint64_t, int>> model;
  std::mt19937 random(7);
  for (int step = 0; step < 20'000; ++step) {
    const std::uint32_t n = random() % 300;
    const std::string key = "k" + std::to_string(n);
    const std::uint64_t hash = crowded(n);
    auto it = model.find(key);
    if (it == model.end()) {
      Item* added = table.insert(item(key, step), hash);
      ASSERT_EQ(added->value, step);
      model[key] = {hash, step};
    } else if (random() % 2 == 0) {
      Item* held = table.find(key, hash);
      ASSERT_NE(held, nullptr) << key;
      std::unique_ptr<Item> out = table.extract(held, hash);
      ASSERT_EQ(out.get(), held);
      model.erase(it);
    }
    if (step % 997 == 0) {
      ASSERT_EQ(table.size(), model.size());
      for (std::uint32_t k = 0; k < 300; ++k) {
        const std::string name = "k" + std::to_string(k);
        Item* found = table.find(name, crowded(k));
        auto m = model.find(name);
        if (m == model.end()) {
          ASSERT_EQ(found, nullptr) << name;
        } else {
          ASSERT_NE(found, nullptr) << name;
          ASSERT_EQ(found->value, m->second.second) << name;
        }
      }
      std::size_t visited = 0;
      table.forEach([&](Item&) { ++visited; });
      ASSERT_EQ(visited, model.size());
    }
  }
}

TEST(SlotTableTest, AnItemKeepsItsAddressWhenTheTableGrows) {
  SlotTable<Item> table;
  Item* first = table.insert(item("first", 1), crowded(1));
  for (std::uint32_t n = 0; n < 1000; ++n) {
    table.insert(item("n" + std::to_string(n), 0), crowded(n) + (std::uint64_t{n} << 40));
  }
  EXPECT_EQ(table.find("first", crowded(1)), first);
  EXPECT_EQ(first->value, 1);
  EXPECT_EQ(table.find("absent", crowded(1)), nullptr);
}

}  // namespace
}  // namespace sluice::eventual_detail
