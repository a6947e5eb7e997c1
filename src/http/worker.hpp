#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <optional>
#include <unordered_set>
#include <vector>

#include "http/listener.hpp"
#include "http/router.hpp"
#include "http/server.hpp"
#include "sluice/common/metrics.hpp"

namespace sluice::http {

class Session;

/// Everything one I/O thread owns: its io_context, its listener, its sessions, its routing
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
  bool stopping = false;
  boost::asio::io_context ioc{1};
  std::optional<Listener> listener;
  std::optional<boost::asio::steady_timer> drain_timer;

  /// Graceful shutdown of this thread: stop accepting, close idle sessions, let the busy
  /// ones finish (at most drain_timeout), then stop the io_context.
  void beginStop();
  /// A session was destroyed; the last one of a stopping thread stops its io_context.
  void sessionGone(Session* session);
};

}  // namespace sluice::http
