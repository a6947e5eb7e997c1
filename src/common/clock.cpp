#include "sluice/common/clock.hpp"

namespace sluice {

Micros SystemClock::nowMicros() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace sluice
