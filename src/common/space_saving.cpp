#include "sluice/common/space_saving.hpp"

#include <algorithm>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace sluice {

SpaceSaving::SpaceSaving(std::size_t capacity, std::size_t max_key_bytes)
    : max_key_bytes_(max_key_bytes), slots_(capacity) {
  if (capacity == 0) {
    throw std::invalid_argument("SpaceSaving: capacity must be at least 1");
  }
  heap_.reserve(capacity);
  index_.reserve(capacity);
}

bool SpaceSaving::less(std::size_t a, std::size_t b) const {
  return slots_[a].count < slots_[b].count;
}

void SpaceSaving::swapHeap(std::size_t i, std::size_t j) {
  std::swap(heap_[i], heap_[j]);
  slots_[heap_[i]].heap_pos = i;
  slots_[heap_[j]].heap_pos = j;
}

void SpaceSaving::siftUp(std::size_t pos) {
  while (pos > 0) {
    const std::size_t parent = (pos - 1) / 2;
    if (!less(heap_[pos], heap_[parent])) {
      return;
    }
    swapHeap(pos, parent);
    pos = parent;
  }
}

void SpaceSaving::siftDown(std::size_t pos) {
  const std::size_t n = heap_.size();
  while (true) {
    std::size_t smallest = pos;
    const std::size_t left = 2 * pos + 1;
    const std::size_t right = left + 1;
    if (left < n && less(heap_[left], heap_[smallest])) {
      smallest = left;
    }
    if (right < n && less(heap_[right], heap_[smallest])) {
      smallest = right;
    }
    if (smallest == pos) {
      return;
    }
    swapHeap(pos, smallest);
    pos = smallest;
  }
}

void SpaceSaving::add(std::string_view key, std::uint64_t weight) {
  if (weight == 0) {
    return;
  }
  if (key.size() > max_key_bytes_) {
    key = key.substr(0, max_key_bytes_);
  }
  total_ += weight;
  if (auto it = index_.find(key); it != index_.end()) {
    Slot& slot = slots_[it->second];
    slot.count += weight;
    siftDown(slot.heap_pos);  // a count only grows, so it can only move away from the root
    return;
  }
  if (used_ < slots_.size()) {
    const std::size_t id = used_++;
    Slot& slot = slots_[id];
    slot.key.assign(key);
    slot.count = weight;
    slot.error = 0;
    slot.heap_pos = heap_.size();
    heap_.push_back(id);
    index_.emplace(std::string_view(slot.key), id);
    siftUp(slot.heap_pos);
    return;
  }
  // Full: the key with the smallest count gives its counter to the newcomer, whose true
  // weight so far is at most that count (it would hold a counter otherwise).
  const std::size_t id = heap_.front();
  Slot& slot = slots_[id];
  // The index node is re-keyed rather than freed and allocated again.
  auto node = index_.extract(std::string_view(slot.key));
  slot.key.assign(key);
  slot.error = slot.count;
  slot.count += weight;
  node.key() = std::string_view(slot.key);
  index_.insert(std::move(node));
  siftDown(0);
}

void SpaceSaving::clear() {
  index_.clear();
  heap_.clear();
  for (std::size_t i = 0; i < used_; ++i) {
    slots_[i].key.clear();
    slots_[i].count = 0;
    slots_[i].error = 0;
  }
  used_ = 0;
  total_ = 0;
}

std::uint64_t SpaceSaving::absentBound() const {
  return used_ == slots_.size() ? slots_[heap_.front()].count : 0;
}

std::vector<SpaceSaving::Entry> SpaceSaving::top(std::size_t n) const {
  std::vector<Entry> entries = snapshot().entries;
  sortAndTruncate(entries, n);
  return entries;
}

SpaceSaving::Snapshot SpaceSaving::snapshot() const {
  Snapshot out;
  out.entries.reserve(used_);
  for (std::size_t i = 0; i < used_; ++i) {
    out.entries.push_back(Entry{slots_[i].key, slots_[i].count, slots_[i].error});
  }
  out.total = total_;
  out.absent_bound = absentBound();
  return out;
}

std::vector<SpaceSaving::Entry> SpaceSaving::merge(const std::vector<Snapshot>& parts,
                                                   std::size_t n) {
  // Per key: the sum of its counts and errors where present, and which parts had it.
  struct Acc {
    std::uint64_t count = 0;
    std::uint64_t error = 0;
    std::uint64_t absent = 0;  // sum of absent_bound over the parts that lack the key
  };
  std::uint64_t all_absent = 0;
  for (const Snapshot& part : parts) {
    all_absent += part.absent_bound;
  }
  std::unordered_map<std::string, Acc> keys;
  for (const Snapshot& part : parts) {
    for (const Entry& entry : part.entries) {
      Acc& acc = keys[entry.key];
      acc.count += entry.count;
      acc.error += entry.error;
      // Start from "absent everywhere" and take this part's bound back out.
      acc.absent -= part.absent_bound;
    }
  }
  std::vector<Entry> out;
  out.reserve(keys.size());
  for (auto& [key, acc] : keys) {
    const std::uint64_t absent = all_absent + acc.absent;  // unsigned wrap-around cancels out
    out.push_back(Entry{key, acc.count + absent, acc.error + absent});
  }
  sortAndTruncate(out, n);
  return out;
}

void sortAndTruncate(std::vector<SpaceSaving::Entry>& entries, std::size_t n) {
  auto order = [](const SpaceSaving::Entry& a, const SpaceSaving::Entry& b) {
    return std::tie(b.count, a.error, a.key) < std::tie(a.count, b.error, b.key);
  };
  if (n < entries.size()) {
    std::partial_sort(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(n),
                      entries.end(), order);
    entries.resize(n);
  } else {
    std::sort(entries.begin(), entries.end(), order);
  }
}

}  // namespace sluice
