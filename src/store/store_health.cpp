#include "store/store_health.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <utility>

namespace sluice {

std::string_view storeHealthName(StoreHealth health) {
  switch (health) {
    case StoreHealth::kConnecting:
      return "connecting";
    case StoreHealth::kHealthy:
      return "healthy";
    case StoreHealth::kFailing:
      return "failing";
  }
  return "failing";
}

namespace store {
namespace {

constexpr std::array<StoreHealth, 3> kStates = {StoreHealth::kConnecting, StoreHealth::kHealthy,
                                                StoreHealth::kFailing};

}  // namespace

double StoreHealthGroup::secondsSince(Micros since) const {
  return static_cast<double>(clock_.monotonicMicros() - since) /
         static_cast<double>(kMicrosPerSecond);
}

std::shared_ptr<StoreHealthGroup> StoreHealthGroup::of(Metrics& metrics, std::string_view kind,
                                                       const Clock& clock) {
  static std::mutex mutex;
  static std::map<std::pair<const Metrics*, std::string>, std::weak_ptr<StoreHealthGroup>> groups;
  std::lock_guard lock(mutex);
  std::erase_if(groups, [](const auto& kv) { return kv.second.expired(); });
  auto& slot = groups[{&metrics, std::string(kind)}];
  auto group = slot.lock();
  if (!group) {
    group = std::make_shared<StoreHealthGroup>(metrics, std::string(kind), clock);
    slot = group;
  }
  return group;
}

StoreHealthGroup::StoreHealthGroup(Metrics& metrics, std::string kind, const Clock& clock)
    : metrics_(metrics), kind_(std::move(kind)), clock_(clock) {
  metrics_.describe("store_health", Metrics::Type::kGauge,
                    "1 for the store's current health (connecting, healthy, failing), else 0; "
                    "the worst over the I/O threads.");
  metrics_.describe("store_health_transitions_total", Metrics::Type::kCounter,
                    "Changes of the store's health, by the state entered.");
  metrics_.describe("redis_faults_total", Metrics::Type::kCounter,
                    "Failed Redis calls, by fault (oom, readonly, busy, loading, noauth, "
                    "timeout, connection, ...).");
  for (StoreHealth state : kStates) {
    metrics_
        .gauge("store_health", {{"store", kind_}, {"state", std::string(storeHealthName(state))}})
        .set(state == health_ ? 1 : 0);
  }
}

std::size_t StoreHealthGroup::join() {
  std::lock_guard lock(mutex_);
  const std::size_t id = next_id_++;
  members_[id] = StoreHealth::kConnecting;
  return id;
}

void StoreHealthGroup::leave(std::size_t id) {
  std::lock_guard lock(mutex_);
  members_.erase(id);
}

void StoreHealthGroup::update(std::size_t id, StoreHealth health, const std::string& reason) {
  std::lock_guard lock(mutex_);
  auto it = members_.find(id);
  if (it == members_.end() || it->second == health) {
    return;
  }
  it->second = health;
  recompute(reason);
}

void StoreHealthGroup::recompute(const std::string& reason) {
  StoreHealth next = StoreHealth::kHealthy;
  for (const auto& [id, h] : members_) {
    if (h == StoreHealth::kFailing) {
      next = StoreHealth::kFailing;
      break;
    }
    if (h == StoreHealth::kConnecting) {
      next = StoreHealth::kConnecting;
    }
  }
  if (next == health_) {
    return;
  }
  const StoreHealth previous = health_;
  const double seconds = secondsSince(since_);
  health_ = next;
  since_ = clock_.monotonicMicros();
  metrics_
      .gauge("store_health", {{"store", kind_}, {"state", std::string(storeHealthName(previous))}})
      .set(0);
  metrics_.gauge("store_health", {{"store", kind_}, {"state", std::string(storeHealthName(next))}})
      .set(1);
  metrics_
      .counter("store_health_transitions_total",
               {{"store", kind_}, {"to", std::string(storeHealthName(next))}})
      .inc();
  const std::string because = reason.empty() ? std::string() : " (" + reason + ")";
  if (next == StoreHealth::kFailing) {
    spdlog::warn("store {} health: {} -> failing after {:.3f} s{}", kind_,
                 storeHealthName(previous), seconds, because);
  } else if (next == StoreHealth::kHealthy && previous == StoreHealth::kFailing) {
    spdlog::warn("store {} health: failing -> healthy after {:.3f} s{}", kind_, seconds, because);
  } else {
    spdlog::info("store {} health: {} -> {} after {:.3f} s{}", kind_, storeHealthName(previous),
                 storeHealthName(next), seconds, because);
  }
}

StoreHealth StoreHealthGroup::health() const {
  std::lock_guard lock(mutex_);
  return health_;
}

Counter& StoreHealthGroup::faultCounter(std::string_view fault_kind) {
  return metrics_.counter("redis_faults_total",
                          {{"store", kind_}, {"kind", std::string(fault_kind)}});
}

void StoreHealthGroup::fault(std::string_view fault_kind, const std::string& message) {
  faultCounter(fault_kind).inc();
  std::lock_guard lock(mutex_);
  auto it = active_faults_.find(fault_kind);
  if (it != active_faults_.end()) {
    ++it->second.calls;
    return;
  }
  active_faults_.emplace(std::string(fault_kind), ActiveFault{clock_.monotonicMicros(), 1});
  faults_active_.store(true, std::memory_order_release);
  spdlog::warn("store {} fault {}: {}", kind_, fault_kind, message);
}

void StoreHealthGroup::endFaults() {
  std::lock_guard lock(mutex_);
  for (const auto& [fault_kind, fault] : active_faults_) {
    spdlog::info("store {} fault {} over after {:.3f} s ({} failed call(s))", kind_, fault_kind,
                 secondsSince(fault.since), fault.calls);
  }
  active_faults_.clear();
  faults_active_.store(false, std::memory_order_release);
}

StoreHealthGroup::Member::Member(std::shared_ptr<StoreHealthGroup> group)
    : group_(std::move(group)), id_(group_->join()) {}

StoreHealthGroup::Member::~Member() { group_->leave(id_); }

void StoreHealthGroup::Member::report(StoreHealth health, const std::string& reason) {
  group_->update(id_, health, reason);
}

}  // namespace store
}  // namespace sluice
