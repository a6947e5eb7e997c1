#pragma once

#include <chrono>
#include <cstddef>

#include "sluice/clock.hpp"
#include "sluice/metrics.hpp"
#include "sluice/store.hpp"

namespace sluice {

struct MemoryStoreOptions {
  std::size_t max_keys = 1'000'000;  ///< bound: expired entries go first, then the LRU
  std::size_t shards = 64;           ///< lock striping; no global lock on the request path
};

/// The embedded store: thread-safe, one instance shared by all I/O threads; evaluate()
/// calls back inline. Reads time from `clock` (which must outlive the store).
StorePtr makeMemoryStore(const MemoryStoreOptions& options, const Clock& clock, Metrics& metrics);

}  // namespace sluice
