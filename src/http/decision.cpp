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

bool DescriptorStatus::passed() const {
  for (const auto& limit : limits) {
    if (!limit.unlimited && !limit.shadow && !limit.outcome.allowed) {
      return false;
    }
  }
  return true;
}

}  // namespace sluice
