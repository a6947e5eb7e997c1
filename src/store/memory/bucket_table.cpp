#include "store/memory/bucket_table.hpp"

#include <algorithm>
#include <limits>
#include <utility>

namespace sluice::memory_detail {
namespace {

constexpr Micros kNever = std::numeric_limits<Micros>::max();
constexpr std::size_t kMinSlots = 16;
constexpr std::size_t kMinArenaToCompact = 4096;

}  // namespace

BucketTable::BucketTable(std::size_t capacity)
    : capacity_(std::max<std::size_t>(capacity, 1)), slots_(kMinSlots, kNone),
      earliest_expiry_(kNever) {}

std::uint32_t BucketTable::find(std::string_view key, std::uint32_t hash) const {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    const std::uint32_t index = slots_[i];
    if (index == kNone) {
      return kNone;
    }
    const Entry& entry = at(index);
    if (entry.hash == hash && keyOf(entry) == key) {
      return index;
    }
  }
}

void BucketTable::touch(std::uint32_t index) {
  if (head_ != index) {
    unlink(index);
    linkFront(index);
  }
}

Micros BucketTable::expiresAt(std::uint32_t index) const { return at(index).expires_at; }

BucketState BucketTable::load(std::uint32_t index) {
  Entry& entry = at(index);
  BucketState state;
  state.a = entry.a;
  state.b = entry.b;
  state.c = entry.c;
  if (entry.has_log != 0) {
    auto it = logs_.find(index);
    if (it != logs_.end()) {
      state.log = std::move(it->second);
    }
  }
  return state;
}

void BucketTable::restore(std::uint32_t index, std::vector<LogEntry>&& log) {
  Entry& entry = at(index);
  if (entry.has_log != 0) {
    logs_[index] = std::move(log);
  }
}

void BucketTable::save(std::uint32_t index, BucketState&& state, Micros expires_at) {
  Entry& entry = at(index);
  entry.a = state.a;
  entry.b = state.b;
  entry.c = state.c;
  entry.expires_at = expires_at;
  earliest_expiry_ = std::min(earliest_expiry_, expires_at);
  if (!state.log.empty()) {
    entry.has_log = 1;
    logs_[index] = std::move(state.log);
  } else if (entry.has_log != 0) {
    entry.has_log = 0;
    logs_.erase(index);
  }
}

std::uint32_t BucketTable::insert(std::string_view key, std::uint32_t hash, BucketState&& state,
                                  Micros expires_at, Micros now, Evictions& evictions) {
  if (size_ >= capacity_ && now >= earliest_expiry_ && inserts_since_sweep_ >= capacity_ / 16) {
    evictions.expired += sweepAll(now);
  }
  if (size_ >= capacity_) {
    const bool expired = at(tail_).expires_at <= now;
    erase(tail_);
    ++(expired ? evictions.expired : evictions.capacity);
  }
  ++inserts_since_sweep_;

  const std::uint32_t index = allocate();
  Entry& entry = at(index);
  entry = Entry{};
  entry.hash = hash;
  if (arena_garbage_ > kMinArenaToCompact && arena_garbage_ * 2 > arena_.size()) {
    compactArena();
  }
  entry.key_offset = static_cast<std::uint32_t>(arena_.size());
  entry.key_length = static_cast<std::uint32_t>(key.size());
  arena_.append(key);
  if ((size_ + 1) * 4 > slots_.size() * 3) {
    growIndex();  // before linking: growIndex re-indexes the linked entries
  }
  ++size_;
  linkFront(index);
  indexInsert(index);
  save(index, std::move(state), expires_at);
  return index;
}

void BucketTable::erase(std::uint32_t index) {
  Entry& entry = at(index);
  indexErase(index);
  unlink(index);
  if (entry.has_log != 0) {
    logs_.erase(index);
  }
  arena_garbage_ += entry.key_length;
  entry.has_log = 0;
  entry.key_length = 0;
  entry.next = free_head_;
  free_head_ = index;
  --size_;
  if (size_ == 0) {
    arena_.clear();
    arena_garbage_ = 0;
  }
}

std::size_t BucketTable::erasePrefixes(const std::vector<std::string>& prefixes) {
  std::size_t removed = 0;
  for (std::uint32_t index = head_; index != kNone;) {
    const std::uint32_t next = at(index).next;
    const std::string_view key = keyOf(at(index));
    const bool match = std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) {
      return key.substr(0, p.size()) == p;
    });
    if (match) {
      erase(index);
      ++removed;
    }
    index = next;
  }
  return removed;
}

std::size_t BucketTable::sweep(Micros now) {
  if (now < earliest_expiry_) {
    return 0;
  }
  return sweepAll(now);
}

std::size_t BucketTable::sweepAll(Micros now) {
  std::size_t removed = 0;
  Micros earliest = kNever;
  for (std::uint32_t index = head_; index != kNone;) {
    const Entry& entry = at(index);
    const std::uint32_t next = entry.next;
    if (entry.expires_at <= now) {
      erase(index);
      ++removed;
    } else {
      earliest = std::min(earliest, entry.expires_at);
    }
    index = next;
  }
  earliest_expiry_ = earliest;
  inserts_since_sweep_ = 0;
  return removed;
}

std::uint32_t BucketTable::allocate() {
  if (free_head_ != kNone) {
    const std::uint32_t index = free_head_;
    free_head_ = at(index).next;
    return index;
  }
  if ((allocated_ >> kChunkBits) >= chunks_.size()) {
    chunks_.push_back(std::make_unique<Entry[]>(kChunkSize));
  }
  return allocated_++;
}

void BucketTable::linkFront(std::uint32_t index) {
  Entry& entry = at(index);
  entry.prev = kNone;
  entry.next = head_;
  if (head_ != kNone) {
    at(head_).prev = index;
  }
  head_ = index;
  if (tail_ == kNone) {
    tail_ = index;
  }
}

void BucketTable::unlink(std::uint32_t index) {
  Entry& entry = at(index);
  if (entry.prev != kNone) {
    at(entry.prev).next = entry.next;
  } else {
    head_ = entry.next;
  }
  if (entry.next != kNone) {
    at(entry.next).prev = entry.prev;
  } else {
    tail_ = entry.prev;
  }
  entry.prev = kNone;
  entry.next = kNone;
}

void BucketTable::indexInsert(std::uint32_t index) {
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = at(index).hash & mask;
  while (slots_[i] != kNone) {
    i = (i + 1) & mask;
  }
  slots_[i] = index;
}

void BucketTable::indexErase(std::uint32_t index) {
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = at(index).hash & mask;
  while (slots_[i] != index) {
    i = (i + 1) & mask;
  }
  // Backward-shift deletion: pull later members of the probe run into the hole when their
  // home slot is not inside (hole, their slot].
  for (std::size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
    const std::uint32_t moved = slots_[j];
    if (moved == kNone) {
      break;
    }
    const std::size_t home = at(moved).hash & mask;
    const bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
    if (!stays) {
      slots_[i] = moved;
      i = j;
    }
  }
  slots_[i] = kNone;
}

void BucketTable::growIndex() {
  std::vector<std::uint32_t> old(slots_.size() * 2, kNone);
  old.swap(slots_);
  for (std::uint32_t index = head_; index != kNone; index = at(index).next) {
    indexInsert(index);
  }
}

void BucketTable::compactArena() {
  std::string packed;
  packed.reserve(arena_.size() - arena_garbage_ + arena_.size() / 8);
  for (std::uint32_t index = head_; index != kNone; index = at(index).next) {
    Entry& entry = at(index);
    const std::string_view key = keyOf(entry);
    entry.key_offset = static_cast<std::uint32_t>(packed.size());
    packed.append(key);
  }
  arena_.swap(packed);
  arena_garbage_ = 0;
}

}  // namespace sluice::memory_detail
