#include "decision/calendar_zone.hpp"

namespace sluice::decision_detail {

std::string applyRequestTimeZone(const RateLimit& rule, const Descriptor& descriptor,
                                 LimitParams& params) {
  if (rule.calendar_zone_from.empty()) {
    return {};
  }
  const Entry* entry = nullptr;
  for (const Entry& candidate : descriptor) {
    if (candidate.key == rule.calendar_zone_from) {
      entry = &candidate;
      break;
    }
  }
  if (entry != nullptr) {
    if (const TimeZone* zone = findTimeZone(entry->value)) {
      params.calendar.zone = zone;
      return {};
    }
  }
  if (rule.calendar_zone_fallback != nullptr) {
    params.calendar.zone = rule.calendar_zone_fallback;
    return {};
  }
  if (entry == nullptr) {
    return "limit \"" + rule.name + "\": the descriptor has no entry \"" + rule.calendar_zone_from +
           "\" to take its time zone from";
  }
  // The value is the client's: quoted as JSON would, within the request's own bounds.
  return "limit \"" + rule.name + "\": entry \"" + rule.calendar_zone_from +
         "\" names no time zone of the tz database (such as \"Europe/Paris\")";
}

}  // namespace sluice::decision_detail
