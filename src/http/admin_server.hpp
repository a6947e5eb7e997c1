#pragma once

#include <memory>
#include <string>
#include <vector>

#include "http/admin_routes.hpp"
#include "http/server.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/store/store.hpp"

namespace boost::asio {
class io_context;
}

namespace sluice::http {

/// A store of one decision I/O thread, reset on that thread (Redis stores are bound to
/// their io_context, and each keeps its own local over-limit cache).
struct AdminResetTarget {
  boost::asio::io_context* io = nullptr;
  Store* store = nullptr;
};

/// The admin listener (`--admin-listen`): its own one-thread Server with addAdminRoutes().
/// `DELETE /limits` runs Store::reset() on every target's thread and answers once all have
/// finished, with the sum of the buckets they removed.
///
/// Life cycle: construct, listen(), start() (serves on a thread of its own), stop() (drains
/// and joins; also run by the destructor). The targets must outlive stop().
class AdminListener {
 public:
  /// `top` (may be null) answers GET /limits/top and must outlive the listener.
  AdminListener(ServerOptions options, Metrics& metrics, HandlerContext operations,
                std::vector<AdminResetTarget> targets, const TopDenialsBoard* top = nullptr);
  ~AdminListener();
  AdminListener(const AdminListener&) = delete;
  AdminListener& operator=(const AdminListener&) = delete;

  /// Binds (kUnavailable when the address is taken or invalid).
  Status listen();
  std::uint16_t port() const;
  void start();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::http
