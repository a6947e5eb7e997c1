#pragma once

#include <memory>
#include <string>

#include "sluice/common/metrics.hpp"
#include "sluice/common/top_denials.hpp"
#include "sluice/decision/limit_overrides.hpp"
#include "sluice/decision/limit_reset.hpp"
#include "sluice/http/routes.hpp"
#include "sluice/http/server.hpp"

namespace sluice::http {

/// The admin listener (`--admin-listen`): its own one-thread Server with addAdminRoutes().
/// `DELETE /limits` asks `reset` (the decision layer's LimitReset, which deletes on every
/// decision thread) and answers on the listener's own thread once it calls back.
///
/// Life cycle: construct, listen(), start() (serves on a thread of its own), stop() (drains
/// and joins; also run by the destructor). `reset` must outlive stop().
/// What the admin listener serves besides DELETE /limits and the read-only views.
struct AdminExtras {
  const TopDenialsBoard* top = nullptr;       ///< GET /limits/top; null: 404
  const LimitOverrides* overrides = nullptr;  ///< /limits/overrides; null: 404
  /// `--admin-token-file`: every request needs `Authorization: Bearer <its token>`; the
  /// file is read by listen() and again whenever it changes. Empty: no token.
  std::string token_file;
};

class AdminListener {
 public:
  /// What `extras` points to must outlive the listener.
  AdminListener(ServerOptions options, Metrics& metrics, HandlerContext operations,
                const LimitReset& reset, AdminExtras extras = {});
  ~AdminListener();
  AdminListener(const AdminListener&) = delete;
  AdminListener& operator=(const AdminListener&) = delete;

  /// Reads the token file (kInvalidArgument when unreadable or empty), then binds
  /// (kUnavailable when the address is taken or invalid).
  Status listen();
  std::uint16_t port() const;
  void start();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::http
