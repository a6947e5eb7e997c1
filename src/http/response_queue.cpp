#include "http/response_queue.hpp"

#include "http/wire_writer.hpp"

namespace sluice::http {

std::size_t ResponseQueue::writeReady(std::string& out, bool last_closes) {
  std::size_t count = 0;
  for (QueuedResponse& entry : entries_) {
    if (!entry.ready) {
      break;
    }
    if (last_closes && count + 1 == entries_.size()) {
      // The last answer while draining tells the client that the connection ends here.
      entry.keep_alive = false;
    }
    writeResponse(out, entry.response, entry.version, entry.keep_alive);
    ++count;
    if (!entry.keep_alive) {
      break;
    }
  }
  return count;
}

bool ResponseQueue::popWritten(std::size_t count) {
  bool keep_alive = true;
  for (std::size_t i = 0; i < count; ++i) {
    keep_alive = keep_alive && entries_.front().keep_alive;
    entries_.pop_front();
  }
  return keep_alive;
}

void ResponseQueue::cancelHolds() {
  for (auto& entry : entries_) {
    if (entry.hold_timer) {
      entry.hold_timer->cancel();
    }
  }
}

}  // namespace sluice::http
