#include "store/memory/bucket_table.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>

namespace sluice::memory_detail {
namespace {

constexpr Micros kNever = std::numeric_limits<Micros>::max();
constexpr std::size_t kMinCells = 16;
constexpr std::uint32_t kOffsetBits = 15;
/// Cells a prefetch looks at from a key's home cell (most keys sit at or next to it).
constexpr std::size_t kPrefetchProbe = 4;

/// GCC's and Clang's 128-bit integer (`__extension__`: not ISO C++, so -Wpedantic would warn).
__extension__ using Uint128 = unsigned __int128;

/// The 64x64 -> 128-bit product of `a` and `b`, its halves folded together.
std::uint64_t fold(std::uint64_t a, std::uint64_t b) {
  const Uint128 product = static_cast<Uint128>(a) * b;
  return static_cast<std::uint64_t>(product) ^ static_cast<std::uint64_t>(product >> 64);
}

std::uint64_t read64(const char* p) {
  std::uint64_t v = 0;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::uint32_t read32(const char* p) {
  std::uint32_t v = 0;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

BucketTable::BucketTable(std::uint64_t stamp_limit)
    : stamp_limit_(std::min(stamp_limit, kStampLimit)),
      cells_(kMinCells, kEmptyCell),
      earliest_expiry_(kNever),
      round_min_seen_(kNever),
      round_min_saved_(kNever) {}

// A multiply-fold hash in the manner of wyhash: eight bytes per step, each step one 128-bit
// multiplication, where std::hash (MurmurHash2 in libstdc++) takes about twice the
// instructions on a store key. Like std::hash it is unseeded.
std::uint64_t BucketTable::hashKey(std::string_view key) {
  constexpr std::uint64_t kStep = 0xa0761d6478bd642fULL;
  constexpr std::uint64_t kLast = 0xe7037ed1a0b428dbULL;
  const char* p = key.data();
  std::size_t n = key.size();
  std::uint64_t h = 0x8ebc6af09c88c6e3ULL ^ n;
  while (n > 8) {
    h = fold(h ^ read64(p), kStep);
    p += 8;
    n -= 8;
  }
  // The last 1 to 8 bytes; a key of 8 bytes or more rereads some bytes rather than fewer.
  std::uint64_t last = 0;
  if (key.size() >= 8) {
    last = read64(key.data() + key.size() - 8);
  } else if (n >= 4) {
    last = (static_cast<std::uint64_t>(read32(p + n - 4)) << 32) | read32(p);
  } else if (n > 0) {
    last = (static_cast<std::uint64_t>(static_cast<unsigned char>(p[0])) << 16) |
           (static_cast<std::uint64_t>(static_cast<unsigned char>(p[n / 2])) << 8) |
           static_cast<unsigned char>(p[n - 1]);
  }
  return fold(h ^ last, kLast);
}

std::uint32_t BucketTable::toSeconds(Micros at) {
  const Micros seconds = at / kMicrosPerSecond + (at % kMicrosPerSecond > 0 ? 1 : 0);
  return static_cast<std::uint32_t>(
      std::clamp<Micros>(seconds, 0, std::numeric_limits<std::uint32_t>::max()));
}

std::string_view BucketTable::keyOf(std::uint32_t index) const {
  const Entry& entry = at(index);
  if (entry.key_length == kLongKey) {
    return long_keys_.at(index);
  }
  const char* chunk = arena_[entry.key_offset >> kOffsetBits].get();
  return std::string_view(chunk + (entry.key_offset & ((1U << kOffsetBits) - 1)), entry.key_length);
}

std::uint32_t BucketTable::find(std::string_view key, std::uint64_t hash) const {
  const Cell want = fingerprint(hash);
  for (std::size_t i = homeCell(hash);; i = nextCell(i)) {
    const Cell cell = cells_[i];
    if (cell == kEmptyCell) {
      return kNone;
    }
    if ((cell & kFingerprintMask) == want && keyOf(indexOf(cell)) == key) {
      return indexOf(cell);
    }
  }
}

void BucketTable::prefetchEntries(std::uint64_t hash) const {
  const Cell want = fingerprint(hash);
  for (std::size_t i = homeCell(hash), n = 0; n < kPrefetchProbe; i = nextCell(i), ++n) {
    const Cell cell = cells_[i];
    if (cell == kEmptyCell) {
      // A key not in the table: the entry its insert() would take. Written out here: GCC
      // drops a call to a function that only prefetches as if it did nothing.
      if (const char* slot = nextSlot(); slot != nullptr) {
        __builtin_prefetch(slot, 1);
        __builtin_prefetch(slot + sizeof(Entry) - 1, 1);
      }
      return;
    }
    if ((cell & kFingerprintMask) == want) {
      // Both lines of an entry that straddles two; the first match is the key's (a second
      // would be a one-in-10^12 chance).
      const char* entry = reinterpret_cast<const char*>(&at(indexOf(cell)));
      __builtin_prefetch(entry);
      __builtin_prefetch(entry + sizeof(Entry) - 1);
      return;
    }
  }
}

void BucketTable::prefetchKeys(std::uint64_t hash) const {
  const Cell want = fingerprint(hash);
  for (std::size_t i = homeCell(hash), n = 0; n < kPrefetchProbe; i = nextCell(i), ++n) {
    const Cell cell = cells_[i];
    if (cell == kEmptyCell) {
      return;
    }
    if ((cell & kFingerprintMask) == want) {
      const Entry& entry = at(indexOf(cell));
      // find() is followed by touch(), which relinks the entry's neighbours once the table
      // is ordered (before, prev and next hold the use stamp).
      if (ordered_ && entry.prev != kNone) {
        __builtin_prefetch(&at(static_cast<std::uint32_t>(entry.prev)));
      }
      if (ordered_ && entry.next != kNone) {
        __builtin_prefetch(&at(static_cast<std::uint32_t>(entry.next)));
      }
      if (entry.key_length != kLongKey && entry.key_length > 0) {
        const char* key = arena_[entry.key_offset >> kOffsetBits].get() +
                          (entry.key_offset & ((1U << kOffsetBits) - 1));
        __builtin_prefetch(key);
        __builtin_prefetch(key + entry.key_length - 1);
      }
      return;
    }
  }
}

const char* BucketTable::nextSlot() const {
  if (!free_.empty()) {
    return reinterpret_cast<const char*>(&at(free_.back()));
  }
  if ((allocated_ >> kChunkBits) < chunks_.size()) {
    return reinterpret_cast<const char*>(&at(allocated_));
  }
  return nullptr;
}

void BucketTable::prefetchSlot() const {
  if (const char* slot = nextSlot(); slot != nullptr) {
    __builtin_prefetch(slot, 1);
    __builtin_prefetch(slot + sizeof(Entry) - 1, 1);
  }
}

void BucketTable::touch(std::uint32_t index) {
  if (index == head_) {
    return;  // the most recently used already (ordered or not)
  }
  if (!ordered_ && next_stamp_ == stamp_limit_) {
    order();
  }
  if (!ordered_) {
    stamp(index);
  } else {
    unlink(index);
    linkFront(index);
  }
}

void BucketTable::stamp(std::uint32_t index) {
  Entry& entry = at(index);
  entry.prev = next_stamp_ & kNone;
  entry.next = next_stamp_ >> 24;
  ++next_stamp_;
  head_ = index;  // the last stamped: touch() need not stamp it again
}

void BucketTable::order() {
  // Oldest first: (stamp << 24 | index) sorts by stamp, each stamp being unique.
  std::vector<std::uint64_t> by_use;
  by_use.reserve(size_);
  for (std::uint32_t index = 0; index < allocated_; ++index) {
    const Entry& entry = at(index);
    if (entry.live != 0) {
      by_use.push_back((entry.prev | static_cast<std::uint64_t>(entry.next) << 24) << 24 | index);
    }
  }
  std::sort(by_use.begin(), by_use.end());
  ordered_ = true;
  head_ = kNone;
  tail_ = kNone;
  for (const std::uint64_t used : by_use) {
    linkFront(static_cast<std::uint32_t>(used & kNone));
  }
}

Micros BucketTable::expiresAt(std::uint32_t index) const { return toMicros(at(index).expires_s); }

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
  if (at(index).has_log != 0) {
    logs_[index] = std::move(log);
  }
}

void BucketTable::save(std::uint32_t index, BucketState&& state, Micros expires_at) {
  Entry& entry = at(index);
  entry.a = state.a;
  entry.b = state.b;
  entry.c = state.c;
  entry.expires_s = toSeconds(expires_at);
  earliest_expiry_ = std::min(earliest_expiry_, toMicros(entry.expires_s));
  round_min_saved_ = std::min(round_min_saved_, toMicros(entry.expires_s));
  if (!state.log.empty()) {
    entry.has_log = 1;
    logs_[index] = std::move(state.log);
  } else if (entry.has_log != 0) {
    entry.has_log = 0;
    logs_.erase(index);
  }
}

std::uint32_t BucketTable::insert(std::string_view key, std::uint64_t hash, BucketState&& state,
                                  Micros expires_at) {
  if ((size_ + 1) * 5 > cells_.size() * 4) {
    growIndex();
  }
  if (!ordered_ && next_stamp_ == stamp_limit_) {
    order();
  }
  const std::uint32_t index = allocate();
  at(index) = Entry{};
  storeKey(index, key);  // may compact the arena, which moves the live entries' keys
  at(index).live = 1;
  ++size_;
  if (ordered_) {
    linkFront(index);
  } else {
    stamp(index);
  }
  indexInsert(cellValue(hash, index));
  save(index, std::move(state), expires_at);
  return index;
}

void BucketTable::erase(std::uint32_t index) { erase(index, hashKey(keyOf(index))); }

void BucketTable::erase(std::uint32_t index, std::uint64_t hash) {
  indexErase(index, hash);
  if (ordered_) {
    unlink(index);
  } else if (head_ == index) {
    head_ = kNone;
  }
  Entry& entry = at(index);
  if (entry.has_log != 0) {
    logs_.erase(index);
  }
  releaseKey(index);
  entry.has_log = 0;
  entry.live = 0;
  free_.push_back(index);
  --size_;
}

std::size_t BucketTable::makeRoom(Micros now, Evictions& evictions) {
  const std::size_t expired = sweep(now, kRoomScan);
  if (expired > 0) {
    evictions.expired += expired;
    return expired;
  }
  if (size_ == 0) {
    return 0;
  }
  if (!ordered_) {
    order();
  }
  const bool tail_expired = expiresAt(tail_) <= now;
  erase(tail_);
  ++(tail_expired ? evictions.expired : evictions.capacity);
  return 1;
}

std::size_t BucketTable::erasePrefixes(const std::vector<std::string>& prefixes) {
  std::size_t removed = 0;
  for (std::uint32_t index = 0; index < allocated_; ++index) {
    if (at(index).live == 0) {
      continue;
    }
    const std::string_view key = keyOf(index);
    const bool match = std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) {
      return key.substr(0, p.size()) == p;
    });
    if (match) {
      erase(index);
      ++removed;
    }
  }
  return removed;
}

std::size_t BucketTable::sweep(Micros now, std::size_t budget) {
  if (now < earliest_expiry_ || allocated_ == 0) {
    return 0;
  }
  // The expired entries go a few at a time, in the order found: their keys, then their
  // index cells are asked for first, so that these waits on memory overlap. Nothing the scan
  // reads changes with an erase, and a batch goes before the scan can come back to it.
  std::array<std::uint32_t, kSweepBatch> batch{};
  std::size_t pending = 0;
  std::size_t removed = 0;
  for (std::size_t step = 0; step < budget; ++step) {
    if (sweep_cursor_ >= allocated_) {
      removed += eraseBatch(batch.data(), pending);
      pending = 0;
      // A round is complete: every live entry was seen or saved during it.
      earliest_expiry_ = std::min(round_min_seen_, round_min_saved_);
      round_min_seen_ = kNever;
      round_min_saved_ = kNever;
      sweep_cursor_ = 0;
      if (now < earliest_expiry_) {
        break;
      }
    }
    const std::uint32_t index = sweep_cursor_++;
    const Entry& entry = at(index);
    if (entry.live == 0) {
      continue;
    }
    const Micros expires_at = toMicros(entry.expires_s);
    if (expires_at > now) {
      round_min_seen_ = std::min(round_min_seen_, expires_at);
      continue;
    }
    if (entry.key_length != kLongKey && entry.key_length > 0) {
      __builtin_prefetch(arena_[entry.key_offset >> kOffsetBits].get() +
                         (entry.key_offset & ((1U << kOffsetBits) - 1)));
    }
    batch[pending++] = index;
    if (pending == kSweepBatch) {
      removed += eraseBatch(batch.data(), pending);
      pending = 0;
    }
  }
  return removed + eraseBatch(batch.data(), pending);
}

std::size_t BucketTable::eraseBatch(const std::uint32_t* batch, std::size_t count) {
  std::array<std::uint64_t, kSweepBatch> hashes{};
  for (std::size_t i = 0; i < count; ++i) {
    hashes[i] = hashKey(keyOf(batch[i]));
    prefetchCell(hashes[i]);
  }
  for (std::size_t i = 0; i < count; ++i) {
    erase(batch[i], hashes[i]);
  }
  return count;
}

std::uint32_t BucketTable::allocate() {
  if (!free_.empty()) {
    // Kept apart from the entries: taking one reads no entry that is out of the caches.
    const std::uint32_t index = free_.back();
    free_.pop_back();
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
  const auto prev = static_cast<std::uint32_t>(entry.prev);
  const auto next = static_cast<std::uint32_t>(entry.next);
  if (prev != kNone) {
    at(prev).next = next;
  } else {
    head_ = next;
  }
  if (next != kNone) {
    at(next).prev = prev;
  } else {
    tail_ = prev;
  }
  entry.prev = kNone;
  entry.next = kNone;
}

void BucketTable::indexInsert(Cell cell) {
  std::size_t i = homeCell(cell);  // a cell's low 32 bits are its hash's
  while (cells_[i] != kEmptyCell) {
    i = nextCell(i);
  }
  cells_[i] = cell;
}

void BucketTable::indexErase(std::uint32_t index, std::uint64_t hash) {
  std::size_t i = homeCell(hash);
  while (indexOf(cells_[i]) != index) {
    i = nextCell(i);
  }
  // Backward-shift deletion: pull later members of the probe run into the hole unless their
  // home cell lies cyclically in (hole, their cell].
  for (std::size_t j = nextCell(i);; j = nextCell(j)) {
    const Cell moved = cells_[j];
    if (moved == kEmptyCell) {
      break;
    }
    const std::size_t home = homeCell(moved);
    const bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
    if (!stays) {
      cells_[i] = moved;
      i = j;
    }
  }
  cells_[i] = kEmptyCell;
}

void BucketTable::growIndex() {
  std::vector<Cell> old(cells_.size() + cells_.size() / 2, kEmptyCell);
  old.swap(cells_);
  for (const Cell cell : old) {
    if (cell != kEmptyCell) {
      indexInsert(cell);
    }
  }
}

void BucketTable::storeKey(std::uint32_t index, std::string_view key) {
  Entry& entry = at(index);
  if (key.size() >= kLongKey) {
    entry.key_length = kLongKey;
    long_keys_.emplace(index, std::string(key));
    return;
  }
  const std::size_t chunk_count = arena_.size();
  const std::size_t allocated = chunk_count * kArenaChunkBytes;
  if (arena_garbage_ > kArenaChunkBytes && arena_garbage_ * 2 > allocated) {
    compactArena();
  }
  if (arena_.empty() || arena_used_ + key.size() > kArenaChunkBytes) {
    arena_.push_back(std::make_unique_for_overwrite<char[]>(kArenaChunkBytes));
    arena_used_ = 0;
  }
  std::memcpy(arena_.back().get() + arena_used_, key.data(), key.size());
  entry.key_offset = static_cast<std::uint32_t>((arena_.size() - 1) << kOffsetBits | arena_used_);
  entry.key_length = key.size();
  arena_used_ += key.size();
}

void BucketTable::releaseKey(std::uint32_t index) {
  Entry& entry = at(index);
  if (entry.key_length == kLongKey) {
    long_keys_.erase(index);
  } else {
    arena_garbage_ += entry.key_length;
  }
  entry.key_length = 0;
}

void BucketTable::compactArena() {
  std::vector<std::unique_ptr<char[]>> packed;
  std::size_t used = 0;
  for (std::uint32_t index = 0; index < allocated_; ++index) {
    Entry& entry = at(index);
    if (entry.live == 0 || entry.key_length == kLongKey) {
      continue;  // free, the key being stored (not live yet), or a key kept apart
    }
    const std::string_view key = keyOf(index);
    if (packed.empty() || used + key.size() > kArenaChunkBytes) {
      packed.push_back(std::make_unique_for_overwrite<char[]>(kArenaChunkBytes));
      used = 0;
    }
    std::memcpy(packed.back().get() + used, key.data(), key.size());
    entry.key_offset = static_cast<std::uint32_t>((packed.size() - 1) << kOffsetBits | used);
    used += key.size();
  }
  arena_.swap(packed);
  arena_used_ = used;
  arena_garbage_ = 0;
}

}  // namespace sluice::memory_detail
