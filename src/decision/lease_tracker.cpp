#include "sluice/decision/lease_tracker.hpp"

#include <spdlog/spdlog.h>

#include <utility>

namespace sluice {
namespace {

constexpr Micros kSweepEvery = 100 * kMicrosPerMilli;

}  // namespace

LeaseTracker::LeaseTracker(Metrics& metrics)
    : metrics_(metrics), untracked_(metrics.counter("leases_untracked_total")) {
  metrics.describe("leases_outstanding", Metrics::Type::kGauge,
                   "Leases of concurrency limits granted by this process and not yet released "
                   "or expired, by rule.");
  metrics.describe("leases_granted_total", Metrics::Type::kCounter,
                   "Leases taken by admitted requests, by rule.");
  metrics.describe("leases_released_total", Metrics::Type::kCounter,
                   "Leases given back before their expiry, by rule and by what released them "
                   "(release: POST /release; refund: a refund of the limit; reset: the admin "
                   "reset of the bucket).");
  metrics.describe("leases_renewed_total", Metrics::Type::kCounter,
                   "Leases extended by POST /renew, by rule.");
  metrics.describe("leases_expired_total", Metrics::Type::kCounter,
                   "Leases that reached their expiry without being released, by rule.");
  metrics.describe("leases_untracked_total", Metrics::Type::kCounter,
                   "Leases granted while the tracker already followed its maximum.");
}

LeaseTracker::Series& LeaseTracker::seriesOf(std::string_view domain, std::string_view rule) {
  std::string key;
  key.reserve(domain.size() + rule.size() + 1);
  key.append(domain).push_back('\0');
  key.append(rule);
  auto it = series_.find(key);
  if (it != series_.end()) {
    return it->second;
  }
  const Labels labels{{"domain", std::string(domain)}, {"rule", std::string(rule)}};
  Labels release = labels;
  release.emplace_back("by", "release");
  Labels refund = labels;
  refund.emplace_back("by", "refund");
  Labels reset = labels;
  reset.emplace_back("by", "reset");
  Series series;
  series.outstanding = &metrics_.gauge("leases_outstanding", labels);
  series.granted = &metrics_.counter("leases_granted_total", labels);
  series.released = &metrics_.counter("leases_released_total", release);
  series.refunded = &metrics_.counter("leases_released_total", refund);
  series.reset = &metrics_.counter("leases_released_total", reset);
  series.renewed = &metrics_.counter("leases_renewed_total", labels);
  series.expired = &metrics_.counter("leases_expired_total", labels);
  return series_.emplace(std::move(key), std::move(series)).first->second;
}

void LeaseTracker::granted(std::string_view domain, std::string_view rule, LeaseNumber lease,
                           std::string_view key, Micros expires_at, Micros now) {
  std::lock_guard lock(mutex_);
  maybeSweep(now);
  Series& series = seriesOf(domain, rule);
  series.granted->inc();
  if (tracked_ >= kMaxTracked) {
    untracked_.inc();
    if (!warned_) {
      warned_ = true;
      spdlog::warn(
          "lease tracker: {} leases followed already; further leases are counted as "
          "granted but not as outstanding (leases_untracked_total)",
          kMaxTracked);
    }
    return;
  }
  if (series.live.emplace(lease, Live{expires_at, std::string(key)}).second) {
    ++tracked_;
  }
  series.outstanding->set(static_cast<double>(series.live.size()));
}

void LeaseTracker::released(std::string_view domain, std::string_view rule, LeaseNumber lease,
                            std::string_view by, Micros now) {
  std::lock_guard lock(mutex_);
  maybeSweep(now);
  Series& series = seriesOf(domain, rule);
  const auto it = series.live.find(lease);
  const bool followed = it != series.live.end();
  if (followed) {
    series.live.erase(it);
    --tracked_;
  }
  // A release is the store's word (it held the lease); a refund releases nothing when the
  // lease is no longer held, so it counts only when this process still followed it.
  if (by != "refund") {
    series.released->inc();
  } else if (followed) {
    series.refunded->inc();
  }
  series.outstanding->set(static_cast<double>(series.live.size()));
}

void LeaseTracker::renewed(std::string_view domain, std::string_view rule, LeaseNumber lease,
                           Micros expires_at, Micros now) {
  std::lock_guard lock(mutex_);
  maybeSweep(now);
  Series& series = seriesOf(domain, rule);
  series.renewed->inc();
  if (auto it = series.live.find(lease); it != series.live.end()) {
    it->second.expires_at = expires_at;
  }
}

void LeaseTracker::reset(const std::vector<std::string>& key_prefixes, Micros now) {
  std::lock_guard lock(mutex_);
  maybeSweep(now);
  const auto reset = [&key_prefixes](const std::string& key) {
    for (const std::string& prefix : key_prefixes) {
      if (key.starts_with(prefix)) {
        return true;
      }
    }
    return false;
  };
  for (auto& [name, series] : series_) {
    std::size_t removed = 0;
    for (auto it = series.live.begin(); it != series.live.end();) {
      if (reset(it->second.key)) {
        it = series.live.erase(it);
        ++removed;
      } else {
        ++it;
      }
    }
    if (removed > 0) {
      tracked_ -= removed;
      series.reset->inc(removed);
      series.outstanding->set(static_cast<double>(series.live.size()));
    }
  }
}

void LeaseTracker::sweep(Micros now) {
  std::lock_guard lock(mutex_);
  sweepLocked(now);
}

void LeaseTracker::maybeSweep(Micros now) {
  if (now >= next_sweep_) {
    sweepLocked(now);
  }
}

void LeaseTracker::sweepLocked(Micros now) {
  next_sweep_ = now + kSweepEvery;
  for (auto& [key, series] : series_) {
    std::size_t expired = 0;
    for (auto it = series.live.begin(); it != series.live.end();) {
      if (it->second.expires_at <= now) {
        it = series.live.erase(it);
        ++expired;
      } else {
        ++it;
      }
    }
    if (expired > 0) {
      tracked_ -= expired;
      series.expired->inc(expired);
      series.outstanding->set(static_cast<double>(series.live.size()));
    }
  }
}

}  // namespace sluice
