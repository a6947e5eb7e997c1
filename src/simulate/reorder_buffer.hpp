#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <vector>

#include "simulate/prefetch.hpp"
#include "sluice/common/clock.hpp"
#include "sluice/simulate/access_record.hpp"

namespace sluice::simulate {

/// Lines waiting to be replayed in time order: the access log's writer takes lines from
/// several I/O threads, so neighbours can be out of order by a little. A line is replayed
/// once a line kReorderWindowUs later has been read (or the buffer holds kMaxPending).
/// Lines come out by (time, order read). Most lines arrive in order: those go to a queue
/// (in order by construction), the others to a heap, and the next line is the earlier of
/// the two fronts: the order of one heap, at the cost of a queue for a sorted log.
class ReorderBuffer {
 public:
  static constexpr Micros kReorderWindowUs = kMicrosPerSecond;
  static constexpr std::size_t kMaxPending = 1 << 16;

  LoggedRequest& slot() {
    if (free_.empty()) {
      storage_.push_back(std::make_unique<LoggedRequest>());
      free_.push_back(storage_.back().get());
    }
    return *free_.back();
  }
  /// Queues the slot just filled.
  void push() {
    LoggedRequest* line = free_.back();
    free_.pop_back();
    newest_ = std::max(newest_, line->time_us);
    const Item item{line->time_us, seq_++, line};
    if (in_order_.empty() || item.time_us >= in_order_.back().time_us) {
      in_order_.push_back(item);
    } else {
      late_.push(item);
    }
  }
  /// The next line due (all of them when `drain`), or null.
  LoggedRequest* pop(bool drain) {
    const bool from_queue =
        !in_order_.empty() && (late_.empty() || late_.top() > in_order_.front());
    if (!from_queue && late_.empty()) {
      return nullptr;
    }
    const Item& next = from_queue ? in_order_.front() : late_.top();
    if (!drain && next.time_us > newest_ - kReorderWindowUs &&
        in_order_.size() + late_.size() < kMaxPending) {
      return nullptr;
    }
    LoggedRequest* line = next.line;
    if (from_queue) {
      in_order_.pop_front();
      prefetchAhead();
    } else {
      late_.pop();
    }
    return line;
  }
  /// Gives a popped line's slot back.
  void release(LoggedRequest* line) { free_.push_back(line); }

 private:
  struct Item {
    Micros time_us;
    std::uint64_t seq;
    LoggedRequest* line;
    bool operator>(const Item& o) const {
      return time_us != o.time_us ? time_us > o.time_us : seq > o.seq;
    }
  };
  /// Lines queued a second ago are out of the processor's caches: the lines a few places
  /// behind the front are asked for in steps, each reading what the step before fetched
  /// (the line, then its descriptors, then their entries), so that the line popped next
  /// is matched without waiting for memory. Hints only.
  void prefetchAhead() const {
    const std::size_t queued = in_order_.size();
    if (queued > kLineAhead) {
      const LoggedRequest* far = in_order_[kLineAhead].line;
      const char* object = reinterpret_cast<const char*>(far);
      for (std::size_t offset = 0; offset < sizeof(LoggedRequest); offset += 64) {
        prefetchLine(object + offset);
      }
      prefetchLine(object + sizeof(LoggedRequest) - 1);
    }
    if (queued > kDescriptorsAhead) {
      const auto& descriptors = in_order_[kDescriptorsAhead].line->request.descriptors;
      if (!descriptors.empty()) {
        prefetchLine(descriptors.data());
      }
    }
    if (queued > kEntriesAhead) {
      for (const Descriptor& d : in_order_[kEntriesAhead].line->request.descriptors) {
        if (!d.empty()) {
          prefetchLine(d.data());
          prefetchLine(reinterpret_cast<const char*>(d.data() + d.size()) - 1);
        }
      }
    }
  }
  static constexpr std::size_t kLineAhead = 12;
  static constexpr std::size_t kDescriptorsAhead = 8;
  static constexpr std::size_t kEntriesAhead = 4;

  std::vector<std::unique_ptr<LoggedRequest>> storage_;
  std::vector<LoggedRequest*> free_;
  std::deque<Item> in_order_;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> late_;
  std::uint64_t seq_ = 0;
  Micros newest_ = 0;
};

}  // namespace sluice::simulate
