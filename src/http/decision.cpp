// Decision::binding() lives in the http library: the HTTP answers are built from it.
#include "sluice/decision/decision.hpp"

namespace sluice {

const LimitStatus* Decision::binding() const {
  const LimitStatus* best = nullptr;
  for (const auto& descriptor : descriptors) {
    for (const auto& limit : descriptor.limits) {
      // Shadow limits never decide and never show in headers: turning shadow mode on must
      // not change what clients see.
      if (limit.unlimited || limit.shadow) {
        continue;
      }
      const Outcome& o = limit.outcome;
      if (!allowed) {
        if (o.allowed) {
          continue;
        }
        if (!best || (o.never && !best->outcome.never) ||
            (o.never == best->outcome.never && o.retry_after_us > best->outcome.retry_after_us)) {
          best = &limit;
        }
      } else if (!best || o.remaining < best->outcome.remaining) {
        best = &limit;
      }
    }
  }
  return best;
}

const LimitStatus* DescriptorStatus::binding() const {
  const LimitStatus* best = nullptr;
  for (const auto& l : limits) {
    if (l.unlimited) {
      continue;
    }
    bool denies = !l.shadow && !l.outcome.allowed;
    bool best_denies = best && !best->shadow && !best->outcome.allowed;
    if (!best || (denies && !best_denies) ||
        (denies == best_denies && l.outcome.remaining < best->outcome.remaining)) {
      best = &l;
    }
  }
  return best;
}

}  // namespace sluice
