#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace sluice::test {

/// A loopback TCP proxy between a client under test (Sluice) and a real server (Redis)
/// that injects network faults on purpose. Every byte is forwarded unchanged until a fault
/// is set; faults can be set and cleared at any time from any thread and apply to the
/// connections already open as well as to new ones (unless said otherwise). One thread
/// runs the proxy (poll(2), non-blocking sockets); the destructor stops it and closes
/// every socket.
///
///   FaultProxy proxy(redis.port());
///   run Sluice with --redis proxy.url();
///   proxy.setLatency(milliseconds(50));   // every reply 50 ms late
///   proxy.clear();                        // healthy again
class FaultProxy {
 public:
  /// Listens on a free loopback port and forwards every accepted connection to
  /// upstream_host:upstream_port. Throws std::runtime_error when it cannot listen.
  explicit FaultProxy(int upstream_port, std::string upstream_host = "127.0.0.1");
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  int port() const { return port_; }
  /// redis://127.0.0.1:<port>/<db>
  std::string url(int db = 0) const;

  /// Replies (server to client) are held `delay` before they are forwarded, in order.
  void setLatency(std::chrono::milliseconds delay);
  /// Every connection open now, and every one accepted while on, goes silent for good:
  /// what either side sends is read and dropped (as on a link that died without a FIN or
  /// RST: TCP never drops bytes from the middle of a stream, so a connection that lost some
  /// never resumes). Off: new connections are forwarded again.
  void setBlackhole(bool on);
  /// A closed link: while on, every connection open now is reset (RST to the client,
  /// upstream closed) and every new one is reset as soon as it is accepted, so the client
  /// sees its connection attempts fail at once. Off: new connections are forwarded again.
  void setRefuse(bool on);
  /// Replies are forwarded `bytes` at a time, one chunk every `interval`.
  void setDrip(std::size_t bytes, std::chrono::milliseconds interval);
  /// Arms a one-shot fault: on the first connection whose client sends bytes containing
  /// `needle` (e.g. "EVALSHA"), the next reply is cut in half (its first half forwarded)
  /// and the connection is reset (RST to the client, upstream closed).
  void resetMidReply(std::string needle);
  /// Half-opens every connection open now: the upstream side is closed (the server sees
  /// the client leave), the client side stays open and silent (no FIN, no RST; what it
  /// sends is read and dropped), as after a NAT or firewall dropped the flow. New
  /// connections are forwarded normally.
  void halfOpenExisting();
  /// Resets every connection open now (RST to the client, upstream closed).
  void resetAll();
  /// Removes every fault (the half-open client sockets stay open and silent).
  void clear();

  /// Connections accepted so far.
  int accepted() const { return accepted_.load(); }
  /// Connections reset by resetMidReply() or resetAll() so far.
  int resets() const { return resets_.load(); }
  /// True once an armed resetMidReply() has fired.
  bool resetFired() const { return reset_fired_.load(); }

 private:
  struct Faults {
    std::chrono::milliseconds latency{0};
    bool blackhole = false;
    bool refuse = false;
    std::size_t drip_bytes = 0;
    std::chrono::milliseconds drip_interval{0};
    std::string reset_needle;
    bool half_open_now = false;
    bool reset_all_now = false;
  };
  struct Impl;

  void run();
  /// Interrupts the proxy thread's wait so that a new fault applies at once.
  void wake();

  int upstream_port_;
  std::string upstream_host_;
  int listen_fd_ = -1;
  int wake_fds_[2] = {-1, -1};
  int port_ = 0;
  mutable std::mutex mutex_;
  Faults faults_;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::atomic<int> resets_{0};
  std::atomic<bool> reset_fired_{false};
  std::thread thread_;
};

}  // namespace sluice::test
