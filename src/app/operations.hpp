#pragma once

#include <memory>
#include <string>
#include <vector>

#include "app/access_log.hpp"
#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/common/top_denials.hpp"
#include "sluice/decision/decision.hpp"
#include "sluice/decision/lease_tracker.hpp"
#include "sluice/decision/limit_overrides.hpp"
#include "sluice/decision/limit_reset.hpp"
#include "sluice/http/admin_server.hpp"
#include "sluice/http/routes.hpp"
#include "sluice/store/event_stream.hpp"
#include "sluice/store/store.hpp"

namespace boost::asio {
class io_context;
}

namespace sluice::app {

struct AppOptions;

/// The operators' side of the process, owned by the server (app.cpp): the access log, the
/// denied-request event publisher, the decision observers and the admin listener.
///
/// Wiring, in this order:
///   auto ops = Operations::create(options, metrics, clock);       // before the threads
///   per I/O thread: parts.observers = ops->observers(metrics_observer);
///                   ops->addResetTarget(server.ioContext(i), *t.store, context);
///   ops->start();                                                 // after the loop
///   server.run(); ops->stop();                                    // before the stores go
class Operations {
 public:
  /// Opens the access log and prepares the event publisher (not yet connected). Errors
  /// (kInvalidArgument): an access log that cannot be opened, a bad --events-redis URL.
  static Result<std::unique_ptr<Operations>> create(const AppOptions& options, Metrics& metrics,
                                                    const Clock& clock);
  ~Operations();
  Operations(const Operations&) = delete;
  Operations& operator=(const Operations&) = delete;

  /// The observers this side adds to one I/O thread's DecisionService: the access log and
  /// the denial events (shared by every thread; thread-safe), and, with the admin listener,
  /// this thread's own GET /limits/top counter. Call once per I/O thread, before start();
  /// they live as long as this.
  std::vector<DecisionObserver*> observers();

  /// Registers one I/O thread's store for DELETE /limits; `context` gives the admin
  /// listener its read-only views (rules, metrics, readiness).
  void addResetTarget(boost::asio::io_context& io, Store& store,
                      const http::HandlerContext& context);

  /// DELETE /limits tells `leases` (which outlives this) of the buckets it deleted: their
  /// leases are no longer outstanding. Call before start().
  void followLeases(LeaseTracker& leases) { leases_ = &leases; }

  /// Starts the event publisher and binds and starts the admin listener (kUnavailable when
  /// its address is taken).
  Status start();

  /// Stops the admin listener and flushes the event publisher. Idempotent.
  void stop();

 private:
  Operations(const AppOptions& options, Metrics& metrics, const Clock& clock);

  Metrics& metrics_;
  const Clock& clock_;
  http::ServerOptions admin_options_;
  bool admin_enabled_ = false;
  std::unique_ptr<AccessLog> access_log_;
  std::unique_ptr<EventPublisher> events_;
  std::vector<std::unique_ptr<DecisionObserver>> observers_;
  TopDenialsBoard top_;                                           // one TopDenials per thread
  std::vector<std::unique_ptr<DecisionObserver>> top_observers_;  // their recorders
  std::vector<ResetTarget> targets_;
  http::HandlerContext admin_context_;
  LeaseTracker* leases_ = nullptr;
  std::unique_ptr<LimitReset> reset_;          // DELETE /limits over targets_, built by start()
  std::unique_ptr<LimitOverrides> overrides_;  // /limits/overrides, built by start()
  std::string admin_token_file_;
  std::size_t max_overrides_ = 10'000;
  std::unique_ptr<http::AdminListener> admin_;
};

}  // namespace sluice::app
