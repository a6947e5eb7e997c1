#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "grpc/tls_context.hpp"
#include "sluice/common/flag_registry.hpp"

namespace sluice::grpc {

/// The gRPC listener's settings as the flags give them (the "gRPC" flags of --help).
struct GrpcSettings {
  /// --grpc-listen: Envoy's Rate Limit Service v3 on "HOST:PORT" and/or "unix:/path"
  /// (empty: no gRPC).
  std::vector<std::string> grpc_listen;
  unsigned grpc_unix_mode = 0660;
  std::chrono::milliseconds grpc_max_connection_age{std::chrono::hours(24)};
  std::chrono::milliseconds grpc_max_connection_age_grace{std::chrono::hours(1)};
  bool grpc_response_headers = true;  ///< rate-limit headers in response_headers_to_add
  bool grpc_reflection = false;       ///< grpc.reflection.v1alpha on the gRPC listener
  /// --grpc-tls-*: TLS on the gRPC listener when cert_file is set (mutual with client_ca_file).
  TlsFiles grpc_tls;
};

/// Adds the --grpc-* flags, bound to `settings`.
void addGrpcFlags(FlagRegistry& registry, GrpcSettings& settings);

}  // namespace sluice::grpc
