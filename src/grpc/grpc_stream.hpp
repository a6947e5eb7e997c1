#pragma once

// What the HTTP/2 connection (grpc_connection.cpp) and its built-in services
// (grpc_builtin_services.cpp: health, reflection) share; private to the grpc module.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "grpc/grpc_connection.hpp"

namespace sluice::grpc {

inline constexpr std::string_view kRlsPath =
    "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
inline constexpr std::string_view kHealthCheckPath = "/grpc.health.v1.Health/Check";
inline constexpr std::string_view kHealthWatchPath = "/grpc.health.v1.Health/Watch";
inline constexpr std::string_view kReflectionV1AlphaPath =
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
inline constexpr std::string_view kReflectionV1Path =
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
/// Kuadrant's limitador service (proto/kuadrant/service/ratelimit/v1/kuadrantrls.proto).
inline constexpr std::string_view kKuadrantService =
    "/kuadrant.service.ratelimit.v1.RateLimitService/";

/// The Kuadrant method of a :path, if it is one.
inline std::optional<RlsCall> kuadrantCall(std::string_view path) {
  if (path.substr(0, kKuadrantService.size()) != kKuadrantService) {
    return std::nullopt;
  }
  const std::string_view method = path.substr(kKuadrantService.size());
  if (method == "CheckRateLimit") {
    return RlsCall::kKuadrantCheck;
  }
  if (method == "Report") {
    return RlsCall::kKuadrantReport;
  }
  if (method == "Reserve") {
    return RlsCall::kKuadrantReserve;
  }
  if (method == "Commit") {
    return RlsCall::kKuadrantCommit;
  }
  return std::nullopt;
}
/// The service name envoyproxy/ratelimit registers with grpc.health.v1.
inline constexpr std::string_view kHealthServiceName = "ratelimit";

enum class Method { kUnknown, kRls, kHealthCheck, kHealthWatch, kReflection };

/// The method a :path names (and, for a rate-limit call, which one in `call`); kReflection
/// whether or not reflection is on.
inline Method methodOfPath(std::string_view path, RlsCall& call) {
  if (path == kRlsPath) {
    call = RlsCall::kShouldRateLimit;
    return Method::kRls;
  }
  if (path == kHealthCheckPath) {
    return Method::kHealthCheck;
  }
  if (path == kHealthWatchPath) {
    return Method::kHealthWatch;
  }
  if (auto kuadrant = kuadrantCall(path)) {
    call = *kuadrant;
    return Method::kRls;
  }
  if (path == kReflectionV1AlphaPath || path == kReflectionV1Path) {
    return Method::kReflection;
  }
  return Method::kUnknown;
}

/// The request pseudo-header fields seen on a stream (Stream::pseudo); a request lacking
/// one of kRequiredPseudo is malformed.
inline constexpr std::uint8_t kPseudoMethod = 1;
inline constexpr std::uint8_t kPseudoScheme = 2;
inline constexpr std::uint8_t kPseudoPath = 4;
inline constexpr std::uint8_t kPseudoAuthority = 8;
inline constexpr std::uint8_t kRequiredPseudo = kPseudoMethod | kPseudoScheme | kPseudoPath;

/// One HTTP/2 stream (one call) of a connection.
struct GrpcConnection::Stream {
  std::int32_t id = 0;
  Stream* next_spare = nullptr;              // in GrpcConnection::spare_
  std::size_t index = 0;                     // in streams_
  Method method = Method::kUnknown;          // set once the request's headers are in
  Method path_method = Method::kUnknown;     // what :path names (methodOfPath())
  RlsCall call = RlsCall::kShouldRateLimit;  // for Method::kRls
  std::string path;  // :path, kept for an unknown method's error and for reflection
  std::string in;    // request bytes received, framed
  std::optional<Clock::time_point> deadline;       // grpc-timeout
  std::optional<Clock::time_point> request_until;  // the request must be whole by then
  std::size_t header_bytes = 0;
  StatusCode early_status = StatusCode::kOk;  // found while reading the headers
  std::string early_message;
  std::uint8_t pseudo = 0;    // kPseudo* bits
  bool regular_seen = false;  // a regular header field came (pseudo ones must come first)
  bool malformed = false;     // RFC 9113 section 8.1.1: reset with PROTOCOL_ERROR
  bool bad_method = false;
  bool not_grpc = false;
  bool headers_done = false;
  bool request_done = false;
  bool dispatched = false;    // given to onCall(), not answered yet
  bool answered = false;      // status submitted (or being sent)
  bool headers_sent = false;  // response HEADERS submitted
  bool degraded = false;
  std::optional<bool> watched;  // Watch: the status last sent (none: an unknown service)

  static void clearIfSet(std::string& text) {
    if (!text.empty()) {
      text.clear();
    }
  }

  void reset(std::int32_t stream_id) {
    id = stream_id;
    method = path_method = Method::kUnknown;
    call = RlsCall::kShouldRateLimit;
    // An empty string is left as it is: clear() writes its terminator, a line of the heap
    // the call may not touch otherwise.
    clearIfSet(path);
    clearIfSet(in);
    deadline.reset();
    request_until.reset();
    header_bytes = 0;
    early_status = StatusCode::kOk;
    clearIfSet(early_message);
    pseudo = 0;
    regular_seen = malformed = false;
    bad_method = not_grpc = headers_done = request_done = dispatched = answered = false;
    headers_sent = degraded = false;
    watched.reset();
  }
};

inline GrpcConnection::Stream* GrpcConnection::streamOf(std::int32_t id) const {
  if (last_stream_ != nullptr && last_stream_->id == id) {
    return last_stream_;
  }
  return lookUpStream(id);
}

}  // namespace sluice::grpc
