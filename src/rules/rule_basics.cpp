#include <array>
#include <cctype>
#include <charconv>
#include <limits>
#include <string>

#include "common/ascii.hpp"
#include "sluice/common/value_parsers.hpp"
#include "sluice/rules/rules.hpp"

namespace sluice {
namespace {

struct UnitSpelling {
  TimeUnit unit;
  std::string_view name;
  Micros micros;
};

constexpr Micros kDayMicros = 86'400 * kMicrosPerSecond;

constexpr std::array<UnitSpelling, 7> kUnits{{
    {TimeUnit::kSecond, "second", kMicrosPerSecond},
    {TimeUnit::kMinute, "minute", 60 * kMicrosPerSecond},
    {TimeUnit::kHour, "hour", 3'600 * kMicrosPerSecond},
    {TimeUnit::kDay, "day", kDayMicros},
    {TimeUnit::kWeek, "week", 7 * kDayMicros},
    {TimeUnit::kMonth, "month", 30 * kDayMicros},
    {TimeUnit::kYear, "year", 365 * kDayMicros},
}};

}  // namespace

Micros unitMicros(TimeUnit unit) {
  for (const auto& entry : kUnits) {
    if (entry.unit == unit) {
      return entry.micros;
    }
  }
  return kMicrosPerSecond;
}

std::string_view unitName(TimeUnit unit) {
  for (const auto& entry : kUnits) {
    if (entry.unit == unit) {
      return entry.name;
    }
  }
  return "second";
}

std::optional<TimeUnit> parseUnit(std::string_view text) {
  for (const auto& entry : kUnits) {
    if (equalsIgnoreCase(entry.name, text)) {
      return entry.unit;
    }
  }
  return std::nullopt;
}

std::optional<Micros> parseDuration(std::string_view text) { return parseDurationMicros(text); }

const DomainConfig* RuleSet::findDomain(std::string_view domain) const {
  const auto it = domains.find(domain);
  return it == domains.end() ? nullptr : &it->second;
}

namespace {

std::size_t countLimits(const std::vector<DescriptorNode>& nodes) {
  std::size_t count = 0;
  for (const auto& node : nodes) {
    count += node.limits.size() + countLimits(node.children);
  }
  return count;
}

}  // namespace

std::size_t RuleSet::limitCount() const {
  std::size_t count = 0;
  for (const auto& [name, domain] : domains) {
    count += domain.domain_limits.size() + countLimits(domain.descriptors);
  }
  return count;
}

}  // namespace sluice
