#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/executor.hpp"

namespace sluice {

/// An executor that runs nothing until told to, on the thread that tells it; its timers fire
/// on a ManualClock. For tests: `executor.advance(50ms)` moves the clock and runs every posted
/// function and every timer that falls due, in deadline order, in microseconds of real time.
class ManualExecutor final : public Executor {
 public:
  explicit ManualExecutor(ManualClock& clock) : clock_(clock) {}
  ManualExecutor(const ManualExecutor&) = delete;
  ManualExecutor& operator=(const ManualExecutor&) = delete;

  void post(std::function<void()> fn) override;
  TimerPtr makeTimer() override;

  /// Runs the posted functions and the timers due at the clock's time (and what they post or
  /// schedule for now) until none is left; returns how many ran.
  std::size_t runReady();
  /// Moves the clock forward by `by`, stopping at each timer deadline on the way to run what
  /// falls due there (runReady()).
  void advance(std::chrono::microseconds by);
  /// The number of timers scheduled and not yet run.
  std::size_t pendingTimers() const;

  /// One timer's state, shared with its Timer handle.
  struct TimerState {
    bool armed = false;
    Micros deadline = 0;
    std::uint64_t order = 0;  ///< ties between equal deadlines run in scheduling order
    std::function<void()> fn;
  };

 private:
  class ManualTimer;
  /// The armed timer with the earliest deadline at or before `until`; null when none.
  std::shared_ptr<TimerState> nextDue(Micros until);

  ManualClock& clock_;
  mutable std::mutex mutex_;
  std::deque<std::function<void()>> posted_;
  std::vector<std::weak_ptr<TimerState>> timers_;
  std::uint64_t order_ = 0;
};

}  // namespace sluice
