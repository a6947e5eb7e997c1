#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace sluice::test {

/// Polls `done` every 10 ms until it holds or `timeout` has passed (then asks once more):
/// tests wait for observed state with a deadline, never for a fixed time.
inline bool waitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

/// Returns once the system clock is more than `margin` before the next boundary of a fixed
/// `window` (windows start at multiples of `window` since the Unix epoch, as the fixed
/// window algorithms count them), waiting past the boundary when it is nearer: a test whose
/// requests must fall in one window, and that takes less than `margin`, starts with this.
inline void awayFromWindowBoundary(std::chrono::seconds window, std::chrono::seconds margin) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const auto into = now % window;
  if (window - into <= margin) {
    std::this_thread::sleep_for(window - into + std::chrono::milliseconds(100));
  }
}

}  // namespace sluice::test
