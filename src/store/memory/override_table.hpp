#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/common/result.hpp"
#include "sluice/store/limit_override.hpp"

namespace sluice::memory_detail {

/// The memory store's runtime overrides: a map from slot to value, shared by every I/O
/// thread, and, when given a file, written there after every change (write, fsync, rename:
/// a crash leaves the old file or the new one) and read back at start. Thread-safe: a
/// decision takes the shared lock only when the table is not empty.
class OverrideTable {
 public:
  /// `path` empty: kept in memory only.
  explicit OverrideTable(std::string path) : path_(std::move(path)) {}

  /// Reads the file (a missing file is an empty table). kInvalidArgument names the file
  /// and what is wrong with it.
  Status load();

  bool empty() const { return count_.load(std::memory_order_relaxed) == 0; }

  /// The live override of a bucket: its own (`bucket_field`), else its rule's (`rule_field`);
  /// null when none is set or the one set has expired at `now`.
  StoredOverridePtr find(std::string_view tag, std::string_view bucket_field,
                         std::string_view rule_field, Micros now) const;

  /// Sets or replaces; true when it replaced one. kInvalidArgument over `max`; the file's
  /// write error when it cannot be saved (the change is then undone).
  Result<bool> set(const OverrideSlot& slot, StoredOverridePtr value, std::size_t max);
  Result<bool> remove(const OverrideSlot& slot);
  std::vector<OverrideEntry> list() const;

 private:
  /// tag, '\x1f', field (a tag is escaped: it never holds that byte).
  using Map = std::map<std::string, OverrideEntry, std::less<>>;
  static std::string keyOf(const OverrideSlot& slot);

  Status save(const Map& entries) const;

  const std::string path_;
  mutable std::shared_mutex mutex_;
  std::mutex write_mutex_;  // one writer at a time, the file included
  Map entries_;
  std::atomic<std::size_t> count_{0};
};

}  // namespace sluice::memory_detail
