#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

/// The eventual engine's key table of one shard (src/store/eventual/): open addressing with
/// linear probing over cells of {hash, item}, the items on the heap (their addresses never
/// change while they live, so the sync queue, the timing wheel and a sync in flight may hold
/// them). A lookup reads one cell (four to a cache line) and the item it names, where a
/// node-based map reads a bucket, the node before and the node. Internal to the engine.
namespace sluice::eventual_detail {

/// `Item` has a `std::string_view key` (into storage it owns). Hashes are the caller's
/// (the same function for every call); the low `kShardBits` bits choose the shard, so the
/// index uses the bits above them.
template <typename Item>
class SlotTable {
 public:
  static constexpr unsigned kShardBits = 6;

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  /// The item of `key` (whose hash is `hash`), or null.
  Item* find(std::string_view key, std::uint64_t hash) const {
    if (cells_.empty()) {
      return nullptr;
    }
    for (std::size_t i = indexOf(hash);; i = (i + 1) & mask_) {
      const Cell& cell = cells_[i];
      if (!cell.item) {
        return nullptr;
      }
      if (cell.hash == hash && cell.item->key == key) {
        return cell.item.get();
      }
    }
  }

  /// Adds `item` (its key absent) under `hash`; returns it.
  Item* insert(std::unique_ptr<Item> item, std::uint64_t hash) {
    if ((size_ + 1) * 2 > cells_.size()) {
      grow();
    }
    Item* raw = item.get();
    place(Cell{hash, std::move(item)});
    ++size_;
    return raw;
  }

  /// Takes `item` (which the table holds under `hash`) out of the table.
  std::unique_ptr<Item> extract(const Item* item, std::uint64_t hash) {
    std::size_t i = indexOf(hash);
    while (cells_[i].item.get() != item) {
      i = (i + 1) & mask_;
    }
    std::unique_ptr<Item> out = std::move(cells_[i].item);
    --size_;
    // Backward shift: every later cell of the run that may sit at i moves there (no
    // tombstones, so a lookup still stops at the first empty cell).
    std::size_t hole = i;
    for (std::size_t j = (i + 1) & mask_; cells_[j].item; j = (j + 1) & mask_) {
      const std::size_t home = indexOf(cells_[j].hash);
      // The cell at j may move to the hole when its home is not cyclically in (hole, j].
      const bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (!stays) {
        cells_[hole] = std::move(cells_[j]);
        hole = j;
      }
    }
    cells_[hole] = Cell{};
    return out;
  }

  /// Calls visit(item) for every item (the table must not change meanwhile).
  template <typename Visit>
  void forEach(Visit&& visit) const {
    for (const Cell& cell : cells_) {
      if (cell.item) {
        visit(*cell.item);
      }
    }
  }

 private:
  struct Cell {
    std::uint64_t hash = 0;
    std::unique_ptr<Item> item;
  };

  std::size_t indexOf(std::uint64_t hash) const {
    return static_cast<std::size_t>(hash >> kShardBits) & mask_;
  }

  void place(Cell cell) {
    std::size_t i = indexOf(cell.hash);
    while (cells_[i].item) {
      i = (i + 1) & mask_;
    }
    cells_[i] = std::move(cell);
  }

  void grow() {
    std::vector<Cell> old = std::move(cells_);
    cells_ = std::vector<Cell>(old.empty() ? 16 : old.size() * 2);
    mask_ = cells_.size() - 1;
    for (Cell& cell : old) {
      if (cell.item) {
        place(std::move(cell));
      }
    }
  }

  std::vector<Cell> cells_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace sluice::eventual_detail
