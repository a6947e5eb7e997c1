#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "simulate/prefetch.hpp"

namespace sluice::simulate {

/// The hash of an identity for the tables below: a multiply-fold hash in the manner of
/// wyhash, eight bytes a step, about a third of std::hash's instructions on a short
/// identity. Unseeded, as std::hash; a table's order never depends on it (entries are kept
/// in the order they came).
inline std::size_t identityHash(std::string_view text) {
  __extension__ using Uint128 = unsigned __int128;  // GCC's and Clang's, not ISO C++
  auto fold = [](std::uint64_t a, std::uint64_t b) {
    const Uint128 product = static_cast<Uint128>(a) * b;
    return static_cast<std::uint64_t>(product) ^ static_cast<std::uint64_t>(product >> 64);
  };
  auto read = [](const char* p, std::size_t n) {
    std::uint64_t v = 0;
    std::memcpy(&v, p, n);
    return v;
  };
  const char* p = text.data();
  std::size_t n = text.size();
  std::uint64_t h = 0x8ebc6af09c88c6e3ULL ^ n;
  while (n > 8) {
    h = fold(h ^ read(p, 8), 0xa0761d6478bd642fULL);
    p += 8;
    n -= 8;
  }
  // The last 1 to 8 bytes (a text of eight or more rereads some rather than fewer).
  std::uint64_t last = 0;
  if (text.size() >= 8) {
    last = read(text.data() + text.size() - 8, 8);
  } else if (n >= 4) {
    last = read(p, 4) << 32 | read(p + n - 4, 4);
  } else if (n > 0) {
    last = static_cast<std::uint64_t>(static_cast<unsigned char>(p[0])) << 16 |
           static_cast<std::uint64_t>(static_cast<unsigned char>(p[n / 2])) << 8 |
           static_cast<unsigned char>(p[n - 1]);
  }
  return static_cast<std::size_t>(fold(h ^ last, 0xe7037ed1a0b428dbULL));
}

/// An identity with its hash (identityHash(), computed once a request): looked up in the
/// tables below without hashing it again for each.
struct HashedIdentity {
  std::string_view text;
  std::size_t hash;
};

/// A replay's table from identity ("who") to T, made for a replay that looks one up for
/// every request among hundreds of thousands: open addressing over a flat array of 8-byte
/// cells (an entry's index and 32 bits of its hash, which reject most mismatches without
/// touching the entry), the entries in chunks in the order they came (their addresses never
/// change, so a pointer to one stays valid while others are added; iteration is that order).
/// A lookup reads one cell run and one entry, where a node-based map reads a bucket, a node
/// before it and the node. Entries are never erased (a replay keeps its identities to its
/// end): memory is one entry and at most four cells per identity.
template <typename T>
class IdentityTable {
 public:
  using value_type = std::pair<std::string, T>;

  class const_iterator {
   public:
    const_iterator(const IdentityTable* table, std::size_t i) : table_(table), i_(i) {}
    const value_type& operator*() const { return table_->entry(i_); }
    const value_type* operator->() const { return &table_->entry(i_); }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_; }

   private:
    const IdentityTable* table_;
    std::size_t i_;
  };

  /// The entry of `who` (whose hash must be identityHash() of its text), added with T{} when
  /// new.
  T& obtain(const HashedIdentity& who) {
    if ((size_ + 1) * 2 > cells_.size()) {
      grow();
    }
    const std::size_t mask = cells_.size() - 1;
    const auto tag = static_cast<std::uint32_t>(who.hash >> 32);
    std::size_t i = who.hash & mask;
    for (; cells_[i].index != 0; i = (i + 1) & mask) {
      if (cells_[i].tag == tag) {
        value_type& found = entry(cells_[i].index - 1);
        if (found.first == who.text) {
          return found.second;
        }
      }
    }
    const std::size_t index = size_++;
    if (index % kChunkSize == 0) {
      chunks_.push_back(std::make_unique<value_type[]>(kChunkSize));
    }
    hashes_.push_back(who.hash);
    cells_[i] = Cell{static_cast<std::uint32_t>(index + 1), tag};
    value_type& added = entry(index);
    added.first.assign(who.text);
    return added.second;
  }

  /// Asks for the memory of the cell where a lookup of `hash` starts (a hint only).
  void prefetchCell(std::size_t hash) const {
    if (!cells_.empty()) {
      prefetchLine(&cells_[hash & (cells_.size() - 1)]);
    }
  }
  /// Asks for the memory of the entry a lookup of `hash` would compare first (a hint only;
  /// reads the cells, best asked for with prefetchCell() a while before).
  void prefetchEntry(std::size_t hash) const {
    if (cells_.empty()) {
      return;
    }
    const std::size_t mask = cells_.size() - 1;
    const auto tag = static_cast<std::uint32_t>(hash >> 32);
    for (std::size_t i = hash & mask; cells_[i].index != 0; i = (i + 1) & mask) {
      if (cells_[i].tag == tag) {
        // The entry's text and the start of its value (a value's most used members come
        // first): its first 64 bytes, on one or two cache lines.
        const auto* at = reinterpret_cast<const char*>(&entry(cells_[i].index - 1));
        prefetchLine(at);
        prefetchLine(at + std::min<std::size_t>(sizeof(value_type), 64) - 1);
        return;
      }
    }
  }

  /// The entry of `text`, or null.
  const value_type* find(std::string_view text) const {
    if (size_ == 0) {
      return nullptr;
    }
    const std::size_t hash = identityHash(text);
    const std::size_t mask = cells_.size() - 1;
    const auto tag = static_cast<std::uint32_t>(hash >> 32);
    for (std::size_t i = hash & mask; cells_[i].index != 0; i = (i + 1) & mask) {
      const value_type& found = entry(cells_[i].index - 1);
      if (cells_[i].tag == tag && found.first == text) {
        return &found;
      }
    }
    return nullptr;
  }
  /// The value of `text`; std::out_of_range when absent.
  const T& at(std::string_view text) const {
    const value_type* found = find(text);
    if (found == nullptr) {
      throw std::out_of_range("no such identity");
    }
    return found->second;
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, size_); }

 private:
  static constexpr std::size_t kChunkSize = 1024;
  struct Cell {
    std::uint32_t index = 0;  ///< entry index + 1; 0: empty
    std::uint32_t tag = 0;    ///< the hash's high 32 bits
  };

  value_type& entry(std::size_t i) { return chunks_[i / kChunkSize][i % kChunkSize]; }
  const value_type& entry(std::size_t i) const { return chunks_[i / kChunkSize][i % kChunkSize]; }

  /// Twice the cells (16 at first), every entry placed again from its kept hash.
  void grow() {
    std::vector<Cell> cells(cells_.empty() ? 16 : cells_.size() * 2);
    const std::size_t mask = cells.size() - 1;
    for (std::size_t index = 0; index < size_; ++index) {
      std::size_t i = hashes_[index] & mask;
      while (cells[i].index != 0) {
        i = (i + 1) & mask;
      }
      cells[i] = Cell{static_cast<std::uint32_t>(index + 1),
                      static_cast<std::uint32_t>(hashes_[index] >> 32)};
    }
    cells_ = std::move(cells);
  }

  std::vector<Cell> cells_;
  std::vector<std::unique_ptr<value_type[]>> chunks_;
  std::vector<std::size_t> hashes_;  ///< per entry, for grow()
  std::size_t size_ = 0;
};

}  // namespace sluice::simulate
