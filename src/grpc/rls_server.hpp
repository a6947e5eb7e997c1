#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grpc/tls_context.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/common/result.hpp"
#include "sluice/decision/decision.hpp"

namespace boost::asio {
class io_context;
}

/// Envoy's Rate Limit Service v3 (`envoy.service.ratelimit.v3.RateLimitService`) and
/// `grpc.health.v1.Health` over HTTP/2 of our own (grpc_connection.hpp) on Asio.
namespace sluice::grpc {

struct RlsServerOptions {
  /// "HOST:PORT" ("[::1]:8081" for IPv6; port 0: any free port) or "unix:/absolute/path".
  std::vector<std::string> listen;
  /// Permissions of a unix socket file.
  unsigned unix_mode = 0660;
  /// GOAWAY after this age (envoyproxy/ratelimit's default: 24 h), then `grace` for the
  /// calls still running (1 h).
  std::chrono::milliseconds max_connection_age{std::chrono::hours(24)};
  std::chrono::milliseconds max_connection_age_grace{std::chrono::hours(1)};
  /// response_headers_to_add with the rate-limit headers (envoy's
  /// LIMIT_RESPONSE_HEADERS_ENABLED).
  bool response_headers = true;
  /// grpc.reflection.v1alpha.ServerReflection (what grpcurl uses to list and describe the
  /// services without their .proto files).
  bool reflection = false;
  /// Largest request message accepted (RESOURCE_EXHAUSTED beyond).
  std::size_t max_message_bytes = 1 << 20;
  /// A call's request must arrive whole within this (DEADLINE_EXCEEDED after it).
  std::chrono::milliseconds request_timeout{10'000};
  /// On shutdown, how long running calls may finish before they are cancelled.
  std::chrono::milliseconds drain_timeout{30'000};
  /// Connections are served on the workers' own threads, each call decided inline on the
  /// thread that read it (the server's mode). Without it the server runs an I/O thread of
  /// its own and posts each call to a worker (round-robin), the answer coming back.
  bool serve_on_workers = false;
  /// TLS (ALPN h2) on every address, mutual when tls->client_ca_file is set. The files are
  /// checked every tls_reload_interval and reloaded when they change: new connections get
  /// the new certificate, open ones keep theirs; a set that does not load is logged and the
  /// previous one stays in use.
  std::optional<TlsFiles> tls;
  std::chrono::milliseconds tls_reload_interval{1000};
};

/// Where calls are decided: one per I/O thread. The decision service is used only on its
/// io_context's thread.
struct RlsWorker {
  boost::asio::io_context* io = nullptr;
  DecisionService* decisions = nullptr;
};

/// The gRPC server: Envoy's unary ShouldRateLimit, grpc.health.v1 Check and Watch, and
/// (when asked) grpc.reflection's list and file queries, on TCP or unix sockets. With
/// serve_on_workers each connection lives on one worker's thread and its calls are decided
/// there; otherwise each call is posted to one worker (round-robin) and answered from there. A call
/// cancelled or past its deadline when its turn comes is answered CANCELLED / DEADLINE_EXCEEDED
/// without being decided (nothing is charged); one whose client goes away while the store decides
/// it keeps its decision (charged once) and is counted as cancelled
/// (grpc_calls_cancelled_total{stage}). SO_REUSEPORT is off: a port in use makes start() fail. A
/// unix socket path held by a live server is never taken over; a stale socket file is replaced; the
/// file gets `unix_mode` and is removed by shutdown().
///
/// Life cycle: construct, start(), setServing() as the store's health changes, shutdown()
/// (blocking; the workers' io_contexts must keep running until it returns), destroy.
class RlsServer {
 public:
  RlsServer(RlsServerOptions options, std::vector<RlsWorker> workers, Metrics& metrics);
  ~RlsServer();
  RlsServer(const RlsServer&) = delete;
  RlsServer& operator=(const RlsServer&) = delete;

  /// Binds every address and starts serving (health SERVING). Errors (kUnavailable) name
  /// the address: in use, a live unix socket, not a socket file, cannot bind; a TLS file
  /// that does not load (kInvalidArgument) is named with the reason.
  Status start();

  /// The bound addresses, as given but with the actual port for port 0.
  std::vector<std::string> addresses() const;

  /// grpc.health.v1 status of "ratelimit" and "": SERVING or NOT_SERVING. Thread-safe.
  void setServing(bool serving);

  /// Stops accepting calls, lets running ones finish within drain_timeout (then cancels
  /// them), removes unix socket files. Blocking; idempotent.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Declares the metric families of this module. Idempotent.
void describeGrpcMetrics(Metrics& metrics);

}  // namespace sluice::grpc
