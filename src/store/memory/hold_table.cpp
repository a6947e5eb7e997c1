#include "store/memory/hold_table.hpp"

#include <algorithm>

namespace sluice::memory_detail {
namespace {

/// The heap order of the memories: the one forgotten first (then the oldest) on top. A
/// type of its own, so that the heap functions inline it.
struct LaterForgotten {
  bool operator()(const Hold& a, const Hold& b) const {
    return a.forget_at != b.forget_at ? a.forget_at > b.forget_at : a.seq > b.seq;
  }
};
constexpr LaterForgotten laterForgotten;

}  // namespace

HeldAmount HoldSet::refreshDue(Micros now) {
  HeldAmount out;
  if (first_expiry_ != 0 && first_expiry_ <= now) {
    for (std::size_t i = 0; i < live_.size();) {
      if (live_[i].expires_at > now) {
        ++i;
        continue;
      }
      Hold expired = live_[i];
      expired.state = HoldState::kExpired;
      ++out.expired;
      live_[i] = live_.back();
      live_.pop_back();
      pushMemory(expired);
    }
    sumLive();
  }
  forgetMemoriesDue(now);
  out.held = held_;
  out.first_expiry = first_expiry_;
  return out;
}

Hold* HoldSet::findLive(const HoldNonce& nonce) {
  for (Hold& hold : live_) {
    if (hold.nonce == nonce) {
      return &hold;
    }
  }
  return nullptr;
}

Hold* HoldSet::findMemory(const HoldNonce& nonce) {
  for (Hold& hold : memories_) {
    if (hold.nonce == nonce) {
      return &hold;
    }
  }
  return nullptr;
}

void HoldSet::add(const HoldNonce& nonce, std::int64_t amount, Micros expires_at, Micros forget_at,
                  std::int64_t max_holds) {
  const std::size_t bound = 2 * static_cast<std::size_t>(std::max<std::int64_t>(max_holds, 1));
  // Forget the memories remembered the shortest time ahead; live holds stay (the caller
  // refused a reservation beyond max_holds of them).
  while (size() >= bound && !memories_.empty()) {
    popMemory();
  }
  live_.push_back(Hold{nonce, amount, expires_at, forget_at, next_seq_++, HoldState::kHeld});
  held_ += amount;
  if (first_expiry_ == 0 || expires_at < first_expiry_) {
    first_expiry_ = expires_at;
  }
}

void HoldSet::settle(const HoldNonce& nonce, HoldState state, Micros id_expiry, Micros forget_at) {
  if (Hold* hold = findLive(nonce)) {
    Hold memory = *hold;
    memory.state = state;
    memory.amount = 0;
    memory.forget_at = std::max(memory.forget_at, forget_at);
    *hold = live_.back();
    live_.pop_back();
    sumLive();
    pushMemory(memory);
    return;
  }
  if (Hold* memory = findMemory(nonce)) {
    memory->state = state;
    memory->amount = 0;
    memory->forget_at = std::max(memory->forget_at, forget_at);
    std::make_heap(memories_.begin(), memories_.end(), laterForgotten);
    return;
  }
  pushMemory(Hold{nonce, 0, id_expiry, forget_at, next_seq_++, state});
}

std::size_t HoldSet::forgetPast(Micros now) {
  std::size_t expired = 0;
  for (std::size_t i = 0; i < live_.size();) {
    if (live_[i].forget_at > now) {
      ++i;
      continue;
    }
    ++expired;
    live_[i] = live_.back();
    live_.pop_back();
  }
  if (expired > 0) {
    sumLive();
  }
  forgetMemoriesDue(now);
  return expired;
}

void HoldSet::pushMemory(const Hold& hold) {
  memories_.push_back(hold);
  // std::push_heap's sift-up, written out: the new memory is usually forgotten after the
  // others already there, and stays where it is after one comparison.
  std::size_t i = memories_.size() - 1;
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (!laterForgotten(memories_[parent], memories_[i])) {
      break;
    }
    std::swap(memories_[parent], memories_[i]);
    i = parent;
  }
}

void HoldSet::popMemory() {
  std::pop_heap(memories_.begin(), memories_.end(), laterForgotten);
  memories_.pop_back();
}

void HoldSet::sumLive() {
  held_ = 0;
  first_expiry_ = 0;
  for (const Hold& hold : live_) {
    held_ += hold.amount;
    if (first_expiry_ == 0 || hold.expires_at < first_expiry_) {
      first_expiry_ = hold.expires_at;
    }
  }
}

HoldSet* HoldTable::find(const HashedKey& key) {
  auto it = sets_.find(key);
  return it == sets_.end() ? nullptr : &it->second;
}

HoldSet& HoldTable::obtain(const HashedKey& key) {
  auto it = sets_.find(key);
  if (it != sets_.end()) {
    return it->second;
  }
  return sets_.emplace(std::string(key.key), HoldSet{}).first->second;
}

void HoldTable::dropIfEmpty(const HashedKey& key) {
  auto it = sets_.find(key);
  if (it != sets_.end() && it->second.empty()) {
    sets_.erase(it);
  }
}

std::size_t HoldTable::erasePrefixes(const std::vector<std::string>& prefixes) {
  std::size_t live = 0;
  for (auto it = sets_.begin(); it != sets_.end();) {
    const bool match = std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) {
      return it->first.compare(0, p.size(), p) == 0;
    });
    if (match) {
      live += it->second.liveCount();
      it = sets_.erase(it);
    } else {
      ++it;
    }
  }
  return live;
}

std::size_t HoldTable::sweep(Micros now) {
  if (now < next_sweep_ || sets_.empty()) {
    return 0;
  }
  next_sweep_ = now + kMicrosPerSecond;
  std::size_t expired = 0;
  for (auto it = sets_.begin(); it != sets_.end();) {
    // Holds past their expiry stay (as expired) until they are forgotten, so that a late
    // commit is still told apart from a second one; only their memory ends here.
    expired += it->second.forgetPast(now);
    if (it->second.empty()) {
      it = sets_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

HoldStatus settleHolds(const SettleInput& input, std::span<HoldSet* const> sets,
                       std::int64_t& amount) {
  const bool commit = input.op == HoldOp::kCommit;
  const Micros forget_at = std::max(input.now, input.id_expiry) + input.keep_us;
  const auto markAll = [&](HoldState state) {
    for (HoldSet* set : sets) {
      if (set != nullptr) {
        set->settle(input.nonce, state, input.id_expiry, forget_at);
      }
    }
  };
  // The usual step first: the hold is live (its buckets' memories are not read).
  for (HoldSet* set : sets) {
    if (const Hold* live = set == nullptr ? nullptr : set->findLive(input.nonce)) {
      amount = live->amount;
      markAll(commit ? HoldState::kCommitted : HoldState::kReleased);
      return commit ? HoldStatus::kCommitted : HoldStatus::kReleased;
    }
  }
  bool settled = false;
  bool expired = false;
  for (HoldSet* set : sets) {
    if (const Hold* memory = set == nullptr ? nullptr : set->findMemory(input.nonce)) {
      (memory->state == HoldState::kExpired ? expired : settled) = true;
    }
  }
  if (settled) {
    return HoldStatus::kSettled;
  }
  if (expired || input.now >= input.id_expiry) {
    if (!commit) {
      return HoldStatus::kExpired;
    }
    markAll(HoldState::kCommitted);
    return HoldStatus::kLate;
  }
  return HoldStatus::kUnknown;
}

}  // namespace sluice::memory_detail
