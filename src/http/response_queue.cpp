#include "http/response_queue.hpp"

#include <algorithm>
#include <utility>

#include "http/wire_writer.hpp"

namespace sluice::http {

QueuedResponse& ResponseQueue::push(bool keep_alive, unsigned version,
                                    std::chrono::steady_clock::time_point started) {
  if (count_ == slots_.size()) {
    // Full: a larger ring, the places in order from its start (they themselves do not move).
    std::vector<std::unique_ptr<QueuedResponse>> grown;
    grown.reserve(std::max<std::size_t>(4, slots_.size() * 2));
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      grown.push_back(std::move(slots_[(head_ + i) % slots_.size()]));
    }
    while (grown.size() < grown.capacity()) {
      grown.push_back(std::make_unique<QueuedResponse>());
    }
    slots_ = std::move(grown);
    head_ = 0;
  }
  QueuedResponse& entry = *slots_[(head_ + count_) % slots_.size()];
  ++count_;
  entry.id = next_id_++;
  entry.keep_alive = keep_alive;
  entry.answered = false;
  entry.ready = false;
  entry.version = version;
  entry.route_index = 0;
  entry.started = started;
  // entry.response keeps the storage of the place's last answer (see complete()).
  return entry;
}

std::size_t ResponseQueue::writeReady(std::string& out, bool last_closes) {
  std::size_t end = out.size();
  const std::size_t count = writeReady(out, end, last_closes);
  out.resize(end);
  return count;
}

std::size_t ResponseQueue::writeReady(std::string& out, std::size_t& end, bool last_closes) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < count_; ++i) {
    QueuedResponse& entry = at(i);
    if (!entry.ready) {
      break;
    }
    if (last_closes && count + 1 == count_) {
      // The last answer while draining tells the client that the connection ends here.
      entry.keep_alive = false;
    }
    end = writeResponseAt(out, end, entry.response, entry.version, entry.keep_alive);
    ++count;
    if (!entry.keep_alive) {
      break;
    }
  }
  return count;
}

bool ResponseQueue::popWritten(std::size_t count) {
  bool keep_alive = true;
  for (std::size_t i = 0; i < count && count_ > 0; ++i) {
    QueuedResponse& front = at(0);
    keep_alive = keep_alive && front.keep_alive;
    front.hold_timer.reset();
    // Its storage serves the thread's next answer (freshResponse()) while still in the
    // cache; kept in the place when the thread has a spare already (complete() reuses it).
    recycleResponse(std::move(front.response));
    head_ = (head_ + 1) % slots_.size();
    --count_;
  }
  return keep_alive;
}

void ResponseQueue::cancelHolds() {
  for (std::size_t i = 0; i < count_; ++i) {
    if (at(i).hold_timer) {
      at(i).hold_timer->cancel();
    }
  }
}

}  // namespace sluice::http
