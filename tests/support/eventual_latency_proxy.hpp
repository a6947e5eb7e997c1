#pragma once

#include <atomic>
#include <chrono>
#include <thread>

/// A loopback TCP proxy that adds a fixed latency in both directions and can cut the link,
/// for the multi-region tests of eventual limits (docs/eventual.md). Minimal on purpose: the
/// `health` work brings a general fault proxy; this one only delays and cuts.
namespace sluice::test {

class LatencyProxy {
 public:
  /// Listens on a free loopback port and forwards to 127.0.0.1:`target_port`, each chunk
  /// delivered `delay` after it was read. Throws std::runtime_error when it cannot listen.
  LatencyProxy(int target_port, std::chrono::milliseconds delay);
  ~LatencyProxy();
  LatencyProxy(const LatencyProxy&) = delete;
  LatencyProxy& operator=(const LatencyProxy&) = delete;

  int port() const { return port_; }
  /// redis://127.0.0.1:<port>/0
  std::string url() const;
  /// Cuts the link: open connections are closed, new ones are closed on accept.
  void cut() { cut_ = true; }
  /// Lets connections through again.
  void restore() { cut_ = false; }

 private:
  void run();

  int target_port_;
  std::chrono::milliseconds delay_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> cut_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sluice::test
