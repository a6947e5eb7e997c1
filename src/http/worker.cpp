#include "http/worker.hpp"

#include <spdlog/spdlog.h>

#include "http/session.hpp"

namespace sluice::http {

void Worker::beginStop() {
  if (stopping) {
    return;
  }
  stopping = true;
  if (listener) {
    listener->close();
  }
  // shutdown() may close a session, whose destructor runs later from its handlers.
  std::vector<Session*> current(sessions.begin(), sessions.end());
  for (Session* session : current) {
    session->shutdown();
  }
  drain_timer.emplace(ioc);
  drain_timer->expires_after(options.drain_timeout);
  drain_timer->async_wait([this](boost::system::error_code ec) {
    if (!ec) {
      spdlog::warn("thread {}: {} connection(s) still busy after the drain timeout; closing", index,
                   sessions.size());
      ioc.stop();
    }
  });
  if (sessions.empty()) {
    ioc.stop();
  }
}

void Worker::sessionGone(Session* session) {
  sessions.erase(session);
  if (stopping && sessions.empty()) {
    ioc.stop();
  }
}

}  // namespace sluice::http
