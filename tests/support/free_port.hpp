#pragma once

#include <cstdint>

namespace sluice::test {

/// A loopback TCP port that was free a moment ago (bound to 127.0.0.1:0, then released).
/// Another process may take it before the caller binds it; callers retry on failure.
std::uint16_t freeLoopbackPort();

/// A loopback TCP port held bound but not listening while the object lives: a connection
/// to it is refused at once, and no other process can listen on it meanwhile (a port from
/// freeLoopbackPort() may be taken by a test running in parallel, whose server would then
/// answer).
class RefusingPort {
 public:
  RefusingPort();
  ~RefusingPort();
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;

  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace sluice::test
