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

}  // namespace sluice::test
