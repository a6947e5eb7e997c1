#include "http/worker.hpp"

#include <spdlog/spdlog.h>

#include "http/session.hpp"

namespace sluice::http {

void Worker::beginStop(bool hold) {
  if (stopping) {
    return;
  }
  stopping = true;
  held = hold;
  for (auto& listener : listeners) {
    listener->close();
  }
  // shutdown() may close a session, whose destructor runs later from its handlers.
  std::vector<Session*> current(sessions.begin(), sessions.end());
  for (Session* session : current) {
    session->shutdown();
  }
  drain_timer.emplace(ioc);
  drain_timer->expires_after(options.drain_timeout);
  drain_timer->async_wait([this](boost::system::error_code ec) { onDrainTimeout(ec); });
  stopIfDone();
}

void Worker::onDrainTimeout(boost::system::error_code ec) {
  if (ec) {
    return;
  }
  if (held && !drain_extended) {
    drain_extended = true;
    drain_timer->expires_after(kStopParticipantGrace);
    drain_timer->async_wait([this](boost::system::error_code next) { onDrainTimeout(next); });
    return;
  }
  spdlog::warn("thread {}: {} connection(s) still busy after the drain timeout; closing", index,
               sessions.size());
  ioc.stop();
}

void Worker::release() {
  held = false;
  stopIfDone();
}

void Worker::stopIfDone() {
  if (stopping && sessions.empty() && !held) {
    ioc.stop();
  }
}

void Worker::sessionGone(Session* session) {
  sessions.erase(session);
  stopIfDone();
}

}  // namespace sluice::http
