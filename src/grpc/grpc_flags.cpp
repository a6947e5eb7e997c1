#include "sluice/grpc/grpc_flags.hpp"

namespace sluice::grpc {

// Declarative table: the flags, one entry each (tests/tools/check_sizes.py).
void addGrpcFlags(FlagRegistry& registry, GrpcSettings& settings) {
  namespace set = flag_setters;
  using std::chrono::milliseconds;
  registry.section("gRPC (Envoy's Rate Limit Service)");
  registry.add({.name = "grpc-listen",
                .metavar = "ADDRESS",
                .help = "Envoy's gRPC Rate Limit Service v3 on HOST:PORT and/or unix:/PATH; "
                        "repeat the flag or separate with commas (default off)",
                .set = [&settings](std::string_view value) -> Status {
                  // gRPC's unix: URIs are absolute; an address repeated is served once.
                  auto list = parseListenList(
                      value,
                      ListenListRules{.absolute_unix_paths = true, .duplicates_are_errors = false});
                  if (!list) {
                    return list.error();
                  }
                  settings.grpc_listen.clear();
                  for (const ListenTarget& target : *list) {
                    settings.grpc_listen.push_back(target.text);
                  }
                  return {};
                },
                .repeatable = true,
                .envoy_variables = "GRPC_UDS, GRPC_HOST, GRPC_PORT"});
  registry.add({.name = "grpc-unix-mode",
                .metavar = "MODE",
                .help = "permissions of a gRPC unix socket, octal (default 0660)",
                .set = set::fileMode(settings.grpc_unix_mode)});
  registry.add({.name = "grpc-max-connection-age-ms",
                .metavar = "MS",
                .help = "gRPC connections get GOAWAY after this age (default 86400000, 24 h)",
                .set = set::milliseconds(settings.grpc_max_connection_age, milliseconds(1),
                                         milliseconds(2'147'483'647)),
                .envoy_variables = "GRPC_MAX_CONNECTION_AGE"});
  registry.add({.name = "grpc-max-connection-age-grace-ms",
                .metavar = "MS",
                .help = "then calls still running get this long (default 3600000, 1 h)",
                .set = set::milliseconds(settings.grpc_max_connection_age_grace, milliseconds(1),
                                         milliseconds(2'147'483'647)),
                .envoy_variables = "GRPC_MAX_CONNECTION_AGE_GRACE"});
  registry.add({.name = "grpc-response-headers",
                .metavar = "BOOL",
                .help = "gRPC answers carry the rate-limit headers in response_headers_to_add "
                        "(default true)",
                .set = set::boolean(settings.grpc_response_headers),
                .envoy_variables = "LIMIT_RESPONSE_HEADERS_ENABLED"});
  registry.add({.name = "grpc-reflection",
                .metavar = "BOOL",
                .help = "gRPC server reflection (grpc.reflection.v1alpha, for grpcurl) on the "
                        "gRPC listener (default false)",
                .set = set::boolean(settings.grpc_reflection)});
  auto file = [&registry](const char* name, const char* metavar, const char* help,
                          std::string& field, const char* envoy) {
    registry.add({.name = name,
                  .metavar = metavar,
                  .help = help,
                  .set = flag_setters::text(field),
                  .envoy_variables = envoy});
  };
  file("grpc-tls-cert", "FILE", "TLS on the gRPC listener: its PEM certificate chain (default off)",
       settings.grpc_tls.cert_file, "GRPC_SERVER_USE_TLS, GRPC_SERVER_TLS_CERT");
  file("grpc-tls-key", "FILE", "the PEM private key of --grpc-tls-cert", settings.grpc_tls.key_file,
       "GRPC_SERVER_TLS_KEY");
  file("grpc-tls-client-ca", "FILE", "mutual TLS: clients need a certificate signed by this CA",
       settings.grpc_tls.client_ca_file, "GRPC_CLIENT_TLS_CACERT");
  file("grpc-tls-client-san", "NAME", "mutual TLS: the client certificate must have this SAN",
       settings.grpc_tls.client_san, "GRPC_CLIENT_TLS_SAN");
}

}  // namespace sluice::grpc
