#pragma once

#include <memory>

#include "http/admin_routes.hpp"
#include "http/server.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/decision/limit_reset.hpp"

namespace sluice::http {

/// The admin listener (`--admin-listen`): its own one-thread Server with addAdminRoutes().
/// `DELETE /limits` asks `reset` (the decision layer's LimitReset, which deletes on every
/// decision thread) and answers on the listener's own thread once it calls back.
///
/// Life cycle: construct, listen(), start() (serves on a thread of its own), stop() (drains
/// and joins; also run by the destructor). `reset` must outlive stop().
class AdminListener {
 public:
  /// `top` (may be null) answers GET /limits/top and must outlive the listener.
  AdminListener(ServerOptions options, Metrics& metrics, HandlerContext operations,
                const LimitReset& reset, const TopDenialsBoard* top = nullptr);
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
