#include "store/memory/snapshot_rules.hpp"

#include <optional>

#include "sluice/limiter/calendar.hpp"

namespace sluice::memory_detail {
namespace {

/// Buckets remembered per resolver before the cache starts over (bounds its memory when
/// every key has a bucket of its own, as envoy's per-value keys do).
constexpr std::size_t kMaxCached = 200'000;

std::uint64_t mix(std::uint64_t hash, std::int64_t value) {
  for (int i = 0; i < 8; ++i) {
    hash ^= static_cast<std::uint64_t>(value >> (8 * i)) & 0xffU;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::uint64_t mix(std::uint64_t hash, std::string_view text) {
  hash = mix(hash, static_cast<std::int64_t>(text.size()));
  for (const char ch : text) {
    hash ^= static_cast<unsigned char>(ch);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

/// One escaped key part (bucket_key.hpp) back to its bytes; nullopt when malformed.
std::optional<std::string> unescape(std::string_view part) {
  std::string out;
  out.reserve(part.size());
  for (std::size_t i = 0; i < part.size(); ++i) {
    if (part[i] != '%') {
      out += part[i];
      continue;
    }
    if (i + 2 >= part.size()) {
      return std::nullopt;
    }
    const int hi = hexDigit(part[i + 1]);
    const int lo = hexDigit(part[i + 2]);
    if (hi < 0 || lo < 0) {
      return std::nullopt;
    }
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

}  // namespace

std::uint64_t limitFingerprint(const RateLimit& limit) {
  const LimitParams& p = limit.params;
  std::uint64_t h = 0xcbf29ce484222325ULL;
  h = mix(h, static_cast<std::int64_t>(p.algorithm));
  h = mix(h, p.limit);
  h = mix(h, p.window_us);
  h = mix(h, p.burst);
  h = mix(h, p.min_interval_us);
  h = mix(h, p.count_rejected ? 1 : 0);
  h = mix(h, p.warmup_us);
  h = mix(h, p.shape ? 1 : 0);
  h = mix(h, static_cast<std::int64_t>(p.consistency));
  h = mix(h, static_cast<std::int64_t>(p.calendar.unit));
  h = mix(h, p.calendar.zone != nullptr ? timeZoneName(*p.calendar.zone) : std::string_view());
  h = mix(h, limit.calendar_zone_from);
  return h == 0 ? 1 : h;
}

std::uint64_t SnapshotRules::ruleOf(std::string_view store_key) {
  const std::size_t bar = store_key.find('|');
  if (bar == std::string_view::npos || !rules_) {
    return 0;
  }
  const std::string_view bucket = store_key.substr(bar + 1);
  if (const auto it = cache_.find(std::string(bucket)); it != cache_.end()) {
    return it->second;
  }
  const std::uint64_t rule = resolve(bucket);
  if (cache_.size() >= kMaxCached) {
    cache_.clear();
  }
  cache_.emplace(bucket, rule);
  return rule;
}

// bucket = domain *( ":" key "=" value / ":" key "~" pattern ) ";" limit-id ";" algo
std::uint64_t SnapshotRules::resolve(std::string_view bucket) {
  const std::size_t domain_end = bucket.find_first_of(":;");
  const std::size_t limit_at = bucket.find(';');
  if (domain_end == std::string_view::npos || limit_at == std::string_view::npos) {
    return 0;
  }
  const auto domain_name = unescape(bucket.substr(0, domain_end));
  const DomainConfig* domain = domain_name ? rules_->findDomain(*domain_name) : nullptr;
  if (domain == nullptr) {
    return 0;
  }
  descriptors_.clear();
  std::string_view entries = bucket.substr(domain_end, limit_at - domain_end);
  if (!entries.empty()) {
    Descriptor descriptor;
    while (!entries.empty()) {
      // ":" key ("=" | "~") value, up to the next ':'
      const std::size_t next = entries.find(':', 1);
      const std::string_view entry =
          entries.substr(1, next == std::string_view::npos ? std::string_view::npos : next - 1);
      const std::size_t sign = entry.find_first_of("=~");
      if (sign == std::string_view::npos) {
        return 0;
      }
      auto key = unescape(entry.substr(0, sign));
      auto value = unescape(entry.substr(sign + 1));
      if (!key || !value) {
        return 0;
      }
      descriptor.push_back(Entry{std::move(*key), std::move(*value)});
      entries = next == std::string_view::npos ? std::string_view() : entries.substr(next);
    }
    descriptors_.push_back(std::move(descriptor));
  }
  matchRequestInto(*domain, descriptors_, match_);
  for (const DescriptorMatch& dm : match_.descriptors) {
    for (const MatchedLimit& ml : dm.limits) {
      if (ml.bucket_key == bucket && !ml.limit->unlimited) {
        return limitFingerprint(*ml.limit);
      }
    }
  }
  return 0;
}

}  // namespace sluice::memory_detail
