#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/store/redis_store.hpp"

/// Denied-request events for analytics, decoupled from the request path by a bounded queue.
namespace sluice {

/// One denied request.
struct DenialEvent {
  Micros time_us = 0;  ///< when it was decided (wall clock, since the Unix epoch)
  std::string domain;
  std::string client;      ///< the request's clientId ("" when it sent none)
  std::string descriptor;  ///< the denying descriptor as "key=value,key=value" ("" if none)
  std::string rule;        ///< the name of the denying limit
};

/// Where denials go. publish() is thread-safe and never blocks on I/O: it only enqueues
/// (or drops and counts when the queue is full).
class DenialEventSink {
 public:
  virtual ~DenialEventSink() = default;
  virtual void publish(DenialEvent event) = 0;
};

struct EventStreamOptions {
  RedisOptions redis;                                 ///< where the stream lives (host, db, auth)
  std::string stream = "sluice:denials";              ///< the stream key
  std::size_t max_len = 100'000;                      ///< XADD MAXLEN ~ max_len
  std::size_t queue_capacity = 10'000;                ///< events waiting to be written
  std::size_t batch_size = 256;                       ///< events per pipelined round trip
  std::chrono::milliseconds command_timeout{1000};    ///< per round trip and per connect
  std::chrono::milliseconds reconnect_backoff{1000};  ///< wait after a failed connection
};

/// A background publisher: one thread with one blocking hiredis connection drains the queue
/// in batches of pipelined `XADD <stream> MAXLEN ~ <max_len> * time .. domain .. client ..
/// descriptor .. rule ..`, in the order the events were published. While Redis is
/// unreachable (or a batch fails) the drained events are dropped and counted; a connection
/// is retried at most once per reconnect_backoff.
///
/// Metrics: events_published_total, events_dropped_total{reason="queue_full"|
/// "redis_unavailable"|"stopped"}, gauge events_queue_length.
class EventPublisher : public DenialEventSink {
 public:
  /// Starts the background thread. Idempotent.
  virtual void start() = 0;
  /// Writes what is still queued (if Redis answers), then stops the thread. Idempotent.
  /// A failure while draining drops the rest, so this waits at most about two
  /// command_timeouts for an unresponsive Redis. Events published after stop() are dropped
  /// (reason "stopped").
  virtual void stop() = 0;
};

std::unique_ptr<EventPublisher> makeRedisEventPublisher(const EventStreamOptions& options,
                                                        Metrics& metrics);

}  // namespace sluice
