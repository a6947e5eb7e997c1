#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "http/listener.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/http/message.hpp"
#include "sluice/http/router.hpp"
#include "sluice/http/server.hpp"

namespace sluice::http {

class Session;

/// Everything one I/O thread owns: its io_context, its listeners, its sessions, its routing
/// table and latency histograms. Only that thread touches it once run() has started.
/// Member order matters for destruction: the io_context is destroyed after the I/O objects
/// declared below it and before the session registry and router declared above it
/// (pending handlers may hold sessions that unregister).
struct Worker {
  Worker(const ServerOptions& opts, unsigned idx) : options(opts), index(idx) {}

  const ServerOptions& options;
  unsigned index;
  std::shared_ptr<const Router> router;
  std::vector<Histogram*> latency;  // per route index, then one for unmatched paths
  std::unordered_set<Session*> sessions;
  /// Scratch the sessions share, one request and one write at a time: a plain request is
  /// read into plain_request and handled before the next is read; answers are written into
  /// out and sent before it is reused (what the kernel does not take is copied to the
  /// session). Reused by every connection, they stay in the cache.
  Request plain_request;
  std::string out;
  bool stopping = false;
  boost::asio::io_context ioc{1};
  /// Its own TCP listeners; thread 0 also runs the unix-socket ones (for every thread).
  std::vector<std::unique_ptr<Listener>> listeners;
  std::optional<boost::asio::steady_timer> drain_timer;
  /// A stop participant (Server::setStopParticipant) still needs this thread.
  bool held = false;
  bool drain_extended = false;

  /// Graceful shutdown of this thread: stop accepting, close idle sessions, let the busy
  /// ones finish (at most drain_timeout), then stop the io_context. With `hold`, the thread
  /// also waits for release() (at most drain_timeout plus kStopParticipantGrace).
  void beginStop(bool hold);
  /// The stop participant no longer needs this thread.
  void release();
  /// A session was destroyed; the last one of a stopping thread stops its io_context.
  void sessionGone(Session* session);

 private:
  void onDrainTimeout(boost::system::error_code ec);
  void stopIfDone();
};

/// How long the I/O threads outlive the drain timeout for a stop participant, which
/// cancels its own work at the drain timeout and needs the threads to answer what it
/// cancelled.
inline constexpr std::chrono::seconds kStopParticipantGrace{5};

}  // namespace sluice::http
