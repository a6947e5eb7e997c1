// The outcome of a decision in the words and figures every answer shares: the binding limit
// and the outcome words.
#include "sluice/decision/decision.hpp"

namespace sluice {

const LimitStatus* bindingLimit(const Decision& decision) {
  const LimitStatus* best = nullptr;
  for (const auto& descriptor : decision.descriptors) {
    for (const auto& limit : descriptor.limits) {
      if (limit.unlimited || limit.shadow) {
        continue;
      }
      const Outcome& o = limit.outcome;
      if (!decision.allowed) {
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

const LimitStatus* descriptorBindingLimit(const DescriptorStatus& descriptor) {
  const LimitStatus* best = nullptr;
  for (const auto& l : descriptor.limits) {
    if (l.unlimited) {
      continue;
    }
    const bool denies = !l.shadow && !l.outcome.allowed;
    const bool best_denies = best && !best->shadow && !best->outcome.allowed;
    if (!best || (denies && !best_denies) ||
        (denies == best_denies && l.outcome.remaining < best->outcome.remaining)) {
      best = &l;
    }
  }
  return best;
}

const LimitStatus* Decision::binding() const { return bindingLimit(*this); }

bool DescriptorStatus::passed() const {
  for (const auto& limit : limits) {
    if (!limit.unlimited && !limit.shadow && !limit.outcome.allowed) {
      return false;
    }
  }
  return true;
}

std::string_view decisionWord(const Decision& decision) {
  if (!decision.domain_known) {
    return "unknown_domain";
  }
  if (!decision.allowed) {
    return "denied";
  }
  bool matched = false;
  bool shadow_denied = false;
  for (const DescriptorStatus& descriptor : decision.descriptors) {
    matched = matched || descriptor.matched;
    for (const LimitStatus& limit : descriptor.limits) {
      // An allowed request's denying limits are shadow limits, or quota-mode limits while
      // another quota descriptor had room (not a would-be denial).
      shadow_denied = shadow_denied || (limit.shadow && !limit.unlimited && !limit.outcome.allowed);
    }
  }
  if (shadow_denied) {
    return "shadow_denied";
  }
  return matched ? "allowed" : "no_rule";
}

std::string_view limitOutcomeWord(const LimitStatus& limit) {
  if (limit.unlimited || limit.outcome.allowed) {
    return "allowed";
  }
  return limit.shadow ? "shadow_denied" : "denied";
}

std::string describeDescriptor(const Descriptor& descriptor) {
  std::string out;
  for (const Entry& entry : descriptor) {
    if (!out.empty()) {
      out += ',';
    }
    out += entry.key;
    out += '=';
    out += entry.value;
  }
  return out;
}

}  // namespace sluice
