#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/limiter/sketch.hpp"

/// The memory store's `sketch` state: one SketchTable per rule (SketchIdentity::key), shared
/// by every client of the rule. Private to the memory store.
namespace sluice::memory_detail {

/// One rule's sketch. `mutex` guards `table`; the memory store holds it from evaluation to
/// charge, so a request's check and charge are atomic.
struct MemorySketch {
  MemorySketch(const LimitParams& params, Gauge& load_gauge, Gauge& saturated_gauge,
               Gauge& bytes_gauge)
      : table(params.sketch, params.limit),
        load(load_gauge),
        saturated(saturated_gauge),
        bytes(bytes_gauge) {}

  std::mutex mutex;
  SketchTable table;
  std::atomic<Micros> last_used{0};
  Micros window_us = 0;
  Gauge& load;       ///< sketch_load{domain,rule}
  Gauge& saturated;  ///< sketch_saturated_ratio{domain,rule}
  Gauge& bytes;      ///< sketch_memory_bytes{domain,rule}

  /// Publishes the gauges after a charge at `window_index` (call with `mutex` held).
  void publish(std::int64_t window_index) {
    load.set(table.load(window_index));
    saturated.set(table.saturatedShare(window_index));
  }
};

class SketchRegistry {
 public:
  /// `seed`: the hash key (k0, k1) (random per process unless a test fixes it).
  SketchRegistry(Metrics& metrics, std::pair<std::uint64_t, std::uint64_t> seed);

  /// The sketch of `params` (params.sketch.identity must be set), created on first use.
  /// Sketches unused for two windows are dropped (checked every few lookups). Thread-safe.
  std::shared_ptr<MemorySketch> find(const LimitParams& params, Micros now);

  const SketchHasher& hasher() const { return hasher_; }
  /// Sketches held (all rules).
  std::size_t size() const;

 private:
  void sweep(Micros now);

  Metrics& metrics_;
  SketchHasher hasher_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<MemorySketch>> sketches_;
  std::atomic<std::uint64_t> lookups_{0};
};

}  // namespace sluice::memory_detail
