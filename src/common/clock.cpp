#include "sluice/common/clock.hpp"

namespace sluice {

Micros SystemClock::nowMicros() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const Clock& systemClock() {
  static const SystemClock clock;
  return clock;
}

Micros SystemClock::monotonicMicros() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace sluice
