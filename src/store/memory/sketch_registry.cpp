#include "store/memory/sketch_registry.hpp"

#include <vector>

namespace sluice::memory_detail {
namespace {

/// Lookups between two sweeps for sketches of rules no longer in use.
constexpr std::uint64_t kSweepEvery = 4096;

}  // namespace

SketchRegistry::SketchRegistry(Metrics& metrics, std::pair<std::uint64_t, std::uint64_t> seed)
    : metrics_(metrics), hasher_(seed.first, seed.second) {
  metrics.describe("sketch_load", Metrics::Type::kGauge,
                   "Load of a sketch rule's current window: requests charged in the window / "
                   "(width x requests_per_unit). False denials grow with it (docs/sketch.md).");
  metrics.describe("sketch_saturated_ratio", Metrics::Type::kGauge,
                   "Share of a sketch rule's counters at or above its limit in the current "
                   "window (a client whose counters are all there is denied).");
  metrics.describe("sketch_memory_bytes", Metrics::Type::kGauge,
                   "Bytes of a sketch rule's counters and filters (both windows), independent "
                   "of the number of clients.");
}

std::shared_ptr<MemorySketch> SketchRegistry::find(const LimitParams& params, Micros now) {
  const std::string& key = params.sketch.identity->key;
  if ((lookups_.fetch_add(1, std::memory_order_relaxed) + 1) % kSweepEvery == 0) {
    sweep(now);
  }
  {
    std::shared_lock lock(mutex_);
    if (const auto it = sketches_.find(key); it != sketches_.end()) {
      it->second->last_used.store(now, std::memory_order_relaxed);
      return it->second;
    }
  }
  const Labels labels{{"domain", params.sketch.identity->domain},
                      {"rule", params.sketch.identity->rule}};
  std::unique_lock lock(mutex_);
  auto& slot = sketches_[key];
  if (!slot) {
    slot = std::make_shared<MemorySketch>(params, metrics_.gauge("sketch_load", labels),
                                          metrics_.gauge("sketch_saturated_ratio", labels),
                                          metrics_.gauge("sketch_memory_bytes", labels));
    slot->window_us = params.window_us;
    slot->bytes.set(static_cast<double>(slot->table.bytes()));
  }
  slot->last_used.store(now, std::memory_order_relaxed);
  return slot;
}

void SketchRegistry::sweep(Micros now) {
  std::vector<std::shared_ptr<MemorySketch>> dropped;
  std::unique_lock lock(mutex_);
  for (auto it = sketches_.begin(); it != sketches_.end();) {
    const MemorySketch& s = *it->second;
    // Unused for two whole windows: every count in it is of a window no longer read.
    if (s.last_used.load(std::memory_order_relaxed) + 2 * s.window_us < now) {
      dropped.push_back(std::move(it->second));
      it = sketches_.erase(it);
    } else {
      ++it;
    }
  }
  lock.unlock();
  for (const auto& s : dropped) {
    s->load.set(0);
    s->saturated.set(0);
    s->bytes.set(0);
  }
}

std::size_t SketchRegistry::size() const {
  std::shared_lock lock(mutex_);
  return sketches_.size();
}

}  // namespace sluice::memory_detail
