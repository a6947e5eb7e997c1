#pragma once

#include <cstdint>

namespace sluice::test {

/// A loopback TCP port that was free a moment ago (bound to 127.0.0.1:0, then released).
/// Another process may take it before the caller binds it; callers retry on failure.
std::uint16_t freeLoopbackPort();

}  // namespace sluice::test
