#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "http/message.hpp"

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

/// Not thread-safe: owned by one session on its I/O thread.
class ResponseQueue {
 public:
  bool empty() const { return entries_.empty(); }
  std::size_t size() const { return entries_.size(); }
  /// The front answer can be written.
  bool frontReady() const { return !entries_.empty() && entries_.front().ready; }

  /// A place at the back for a request read at `started`.
  QueuedResponse& push(bool keep_alive, unsigned version,
                       std::chrono::steady_clock::time_point started) {
    QueuedResponse& entry = entries_.emplace_back();
    entry.id = next_id_++;
    entry.keep_alive = keep_alive;
    entry.version = version;
    entry.started = started;
    return entry;
  }

  /// The place of request `id`; null once it has been written (or never existed).
  QueuedResponse* find(std::uint64_t id) {
    if (entries_.empty() || id < entries_.front().id || id > entries_.back().id) {
      return nullptr;
    }
    return &entries_[static_cast<std::size_t>(id - entries_.front().id)];
  }

  /// Appends the ready answers at the front to `out` (wire_writer.hpp), up to and including
  /// the first that closes the connection; returns how many. With `last_closes`, the answer
  /// in the last place is made to close the connection (the server is draining).
  std::size_t writeReady(std::string& out, bool last_closes);

  /// Removes the `count` answers writeReady wrote; false when one of them closed the
  /// connection.
  bool popWritten(std::size_t count);

  /// Cancels the hold timers of shaped answers (the connection is closing).
  void cancelHolds();

 private:
  std::deque<QueuedResponse> entries_;
  std::uint64_t next_id_ = 0;
};

}  // namespace sluice::http
