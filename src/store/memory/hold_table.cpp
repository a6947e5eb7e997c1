#include "store/memory/hold_table.hpp"

#include <algorithm>

namespace sluice::memory_detail {

HeldAmount refreshHolds(HoldSet& set, Micros now) {
  HeldAmount out;
  auto& holds = set.holds;
  holds.erase(std::remove_if(holds.begin(), holds.end(),
                             [now, &out](Hold& hold) {
                               if (hold.state == HoldState::kHeld && hold.expires_at <= now) {
                                 hold.state = HoldState::kExpired;
                                 ++out.expired;
                               }
                               return hold.forget_at <= now;
                             }),
              holds.end());
  for (const Hold& hold : holds) {
    if (hold.state == HoldState::kHeld) {
      out.held += hold.amount;
      if (out.first_expiry == 0 || hold.expires_at < out.first_expiry) {
        out.first_expiry = hold.expires_at;
      }
    }
  }
  return out;
}

Hold* findHold(HoldSet& set, std::uint64_t nonce) {
  for (Hold& hold : set.holds) {
    if (hold.nonce == nonce) {
      return &hold;
    }
  }
  return nullptr;
}

std::size_t liveHolds(const HoldSet& set) {
  return static_cast<std::size_t>(
      std::count_if(set.holds.begin(), set.holds.end(),
                    [](const Hold& hold) { return hold.state == HoldState::kHeld; }));
}

void addHold(HoldSet& set, const Hold& hold, std::int64_t max_holds) {
  const std::size_t bound = 2 * static_cast<std::size_t>(std::max<std::int64_t>(max_holds, 1));
  auto& holds = set.holds;
  while (holds.size() >= bound) {
    // Forget the settled hold remembered the shortest time ahead; live holds stay (the
    // caller refused a reservation beyond max_holds of them).
    auto oldest = holds.end();
    for (auto it = holds.begin(); it != holds.end(); ++it) {
      if (it->state != HoldState::kHeld &&
          (oldest == holds.end() || it->forget_at < oldest->forget_at)) {
        oldest = it;
      }
    }
    if (oldest == holds.end()) {
      break;
    }
    holds.erase(oldest);
  }
  holds.push_back(hold);
}

bool parseNonce(std::string_view text, std::uint64_t& nonce) {
  if (text.size() != 16) {
    return false;
  }
  std::uint64_t value = 0;
  for (const char c : text) {
    std::uint64_t digit = 0;
    if (c >= '0' && c <= '9') {
      digit = static_cast<std::uint64_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<std::uint64_t>(c - 'a' + 10);
    } else {
      return false;
    }
    value = value << 4 | digit;
  }
  nonce = value;
  return true;
}

HoldSet* HoldTable::find(std::string_view key) {
  auto it = sets_.find(key);
  return it == sets_.end() ? nullptr : &it->second;
}

HoldSet& HoldTable::obtain(std::string_view key) {
  auto it = sets_.find(key);
  if (it != sets_.end()) {
    return it->second;
  }
  return sets_.emplace(std::string(key), HoldSet{}).first->second;
}

void HoldTable::dropIfEmpty(std::string_view key) {
  auto it = sets_.find(key);
  if (it != sets_.end() && it->second.holds.empty()) {
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
      live += liveHolds(it->second);
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
    auto& holds = it->second.holds;
    for (const Hold& hold : holds) {
      if (hold.forget_at <= now && hold.state == HoldState::kHeld) {
        ++expired;
      }
    }
    holds.erase(std::remove_if(holds.begin(), holds.end(),
                               [now](const Hold& hold) { return hold.forget_at <= now; }),
                holds.end());
    if (holds.empty()) {
      it = sets_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

namespace {

/// Where the holds of one nonce stand across a request's buckets.
struct Found {
  Hold* live = nullptr;
  bool settled = false;
  bool expired = false;
};

Found lookAt(const SettleInput& input, std::vector<HoldSet*>& sets) {
  Found found;
  for (HoldSet* set : sets) {
    Hold* hold = set == nullptr ? nullptr : findHold(*set, input.nonce);
    if (hold == nullptr) {
      continue;
    }
    if (hold->state == HoldState::kHeld) {
      found.live = found.live ? found.live : hold;
    } else if (hold->state == HoldState::kExpired) {
      found.expired = true;
    } else {
      found.settled = true;
    }
  }
  return found;
}

/// Marks every bucket's hold of the nonce `state` (adding its memory where a bucket has
/// none: a late commit is remembered too).
void markAll(const SettleInput& input, std::vector<HoldSet*>& sets, HoldState state) {
  const Micros forget_at = std::max(input.now, input.id_expiry) + input.keep_us;
  for (HoldSet* set : sets) {
    if (set == nullptr) {
      continue;
    }
    Hold* hold = findHold(*set, input.nonce);
    if (hold == nullptr) {
      set->holds.push_back(Hold{input.nonce, 0, input.id_expiry, forget_at, state});
      continue;
    }
    hold->state = state;
    hold->amount = 0;
    hold->forget_at = std::max(hold->forget_at, forget_at);
  }
}

}  // namespace

HoldStatus settleHolds(const SettleInput& input, std::vector<HoldSet*>& sets,
                       std::int64_t& amount) {
  const Found found = lookAt(input, sets);
  const bool commit = input.op == HoldOp::kCommit;
  if (found.live != nullptr) {
    amount = found.live->amount;
    markAll(input, sets, commit ? HoldState::kCommitted : HoldState::kReleased);
    return commit ? HoldStatus::kCommitted : HoldStatus::kReleased;
  }
  if (found.settled) {
    return HoldStatus::kSettled;
  }
  if (found.expired || input.now >= input.id_expiry) {
    if (!commit) {
      return HoldStatus::kExpired;
    }
    markAll(input, sets, HoldState::kCommitted);
    return HoldStatus::kLate;
  }
  return HoldStatus::kUnknown;
}

}  // namespace sluice::memory_detail
