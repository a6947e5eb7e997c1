#pragma once

#include <chrono>
#include <functional>
#include <memory>

namespace sluice {

/// A one-shot timer of an Executor (Envoy's Event::Timer). Its methods and its callback run on
/// the executor's thread; destroying it cancels it.
class Timer {
 public:
  virtual ~Timer() = default;
  /// Calls `fn` once, on the executor's thread, `delay` from now; replaces a pending call.
  virtual void schedule(std::chrono::microseconds delay, std::function<void()> fn) = 0;
  /// Drops the pending call, if any (its callback will not run).
  virtual void cancel() = 0;
};
using TimerPtr = std::unique_ptr<Timer>;

/// Where a component that works in the background runs its work (Envoy's Dispatcher): one
/// thread, functions run in the order posted. A component gets one injected with its Clock,
/// so its unit test drives it on simulated time (ManualExecutor) instead of starting threads.
class Executor {
 public:
  virtual ~Executor() = default;
  /// Runs `fn` on the executor's thread, after what is already posted. Thread-safe.
  virtual void post(std::function<void()> fn) = 0;
  /// A timer of this executor. Call on the executor's thread (or before it runs).
  virtual TimerPtr makeTimer() = 0;
};

}  // namespace sluice
