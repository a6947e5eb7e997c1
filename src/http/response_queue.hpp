#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sluice/http/message.hpp"

/// The answers of one connection in request order (HTTP/1.1 pipelining), as the queue of
/// Beast's advanced_server example: a request takes its place when it is read, its answer
/// fills the place whenever the handler responds, and only the ready places at the front
/// are written.
namespace sluice::http {

/// One request's place in the queue.
struct QueuedResponse {
  std::uint64_t id = 0;  ///< increases by one per request of the connection
  bool keep_alive = true;
  bool answered = false;  ///< the handler has responded (a later response is ignored)
  bool ready = false;     ///< answered and no longer held: may be written
  unsigned version = 11;
  std::size_t route_index = 0;  ///< the latency histogram it is observed in
  std::chrono::steady_clock::time_point started;
  Response response;
  std::unique_ptr<boost::asio::steady_timer> hold_timer;  ///< a shaped answer's delay
};

/// Not thread-safe: owned by one session on its I/O thread. The places are a ring that is
/// reused: a written answer's storage goes back to the thread's spare (recycleResponse()),
/// for the thread's next answer, or stays in its place when the thread has a spare already
/// (complete() gives it to the next answer), so a connection's steady state allocates nothing.
class ResponseQueue {
 public:
  bool empty() const { return count_ == 0; }
  std::size_t size() const { return count_; }
  /// The front answer can be written.
  bool frontReady() const { return count_ > 0 && at(0).ready; }
  /// A place at the back for a request read at `started`. The reference stays valid until
  /// the place is popped (places never move).
  QueuedResponse& push(bool keep_alive, unsigned version,
                       std::chrono::steady_clock::time_point started);
  /// The place of request `id`; null once it has been written (or never existed).
  QueuedResponse* find(std::uint64_t id) {
    if (count_ == 0 || id < at(0).id || id > at(count_ - 1).id) {
      return nullptr;
    }
    return &at(static_cast<std::size_t>(id - at(0).id));
  }
  /// Appends the ready answers at the front to `out` (wire_writer.hpp), up to and including
  /// the first that closes the connection; returns how many. With `last_closes`, the answer
  /// in the last place is made to close the connection (the server is draining).
  std::size_t writeReady(std::string& out, bool last_closes);
  /// writeReady() from `end` in `out` (writeResponseAt(): `out` is not trimmed), `end` moved
  /// past what was written.
  std::size_t writeReady(std::string& out, std::size_t& end, bool last_closes);
  /// Removes the `count` answers writeReady wrote; false when one of them closed the
  /// connection.
  bool popWritten(std::size_t count);
  /// Cancels the hold timers of shaped answers (the connection is closing).
  void cancelHolds();

 private:
  QueuedResponse& at(std::size_t i) { return *slots_[(head_ + i) % slots_.size()]; }
  const QueuedResponse& at(std::size_t i) const { return *slots_[(head_ + i) % slots_.size()]; }

  std::vector<std::unique_ptr<QueuedResponse>> slots_;  // a ring: head_, then count_ places
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  std::uint64_t next_id_ = 0;
};

}  // namespace sluice::http
