#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace sluice {

/// Time in integer microseconds. Points in time are microseconds since the Unix epoch
/// (wall clock), because fixed windows are epoch-aligned and Redis TIME is wall time.
using Micros = std::int64_t;

inline constexpr Micros kMicrosPerMilli = 1'000;
inline constexpr Micros kMicrosPerSecond = 1'000'000;

/// The only source of "now" (docs/architecture.md, "Conventions"). Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  /// Microseconds since the Unix epoch.
  virtual Micros nowMicros() const = 0;
  /// Microseconds on a clock that never goes back (an unspecified epoch): for durations,
  /// deadlines and ages, which a wall clock's steps would distort. A ManualClock's is its
  /// nowMicros().
  virtual Micros monotonicMicros() const { return nowMicros(); }
};

/// The real clock: std::chrono::system_clock, and steady_clock for monotonicMicros().
class SystemClock final : public Clock {
 public:
  Micros nowMicros() const override;
  Micros monotonicMicros() const override;
};

/// The process's SystemClock, for the few places (shared registries) that are made before
/// a component could hand them its own clock.
const Clock& systemClock();

/// A clock that moves only when told to; for tests. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Micros start = 1'700'000'000LL * kMicrosPerSecond) : now_(start) {}
  Micros nowMicros() const override { return now_.load(std::memory_order_relaxed); }
  void set(Micros now) { now_.store(now, std::memory_order_relaxed); }
  void advance(std::chrono::microseconds by) {
    now_.fetch_add(by.count(), std::memory_order_relaxed);
  }

 private:
  std::atomic<Micros> now_;
};

}  // namespace sluice
