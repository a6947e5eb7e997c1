// A call's request header fields, as the gRPC server acts on them: the pseudo-header fields
// (RFC 9113 section 8.3.1), content-type, grpc-timeout, and the fields HTTP/2 forbids.
// nghttp2's HTTP messaging layer is off (grpc_connection.cpp): these are its checks that
// matter to a server that reads these fields only and passes none of them on.

#include <string>

#include "grpc/grpc_connection.hpp"
#include "grpc/grpc_stream.hpp"

namespace sluice::grpc {

void GrpcConnection::onPseudoHeader(Stream& stream, std::string_view name, std::string_view value) {
  std::uint8_t field = 0;
  if (name == ":path") {
    field = value.empty() ? 0 : kPseudoPath;
    stream.path.assign(value);
  } else if (name == ":method") {
    field = kPseudoMethod;
    stream.bad_method = value != "POST";
  } else if (name == ":scheme") {
    field = kPseudoScheme;
  } else if (name == ":authority") {
    field = kPseudoAuthority;
  }
  // Unknown (or a response's), repeated, after a regular field, an empty :path: malformed.
  if (field == 0 || stream.regular_seen || (stream.pseudo & field) != 0) {
    stream.malformed = true;
    return;
  }
  stream.pseudo |= field;
}

void GrpcConnection::onRegularHeader(Stream& stream, std::string_view name,
                                     std::string_view value) {
  switch (name.size()) {
    case 2:
      // TE: "trailers" only (RFC 9113 section 8.2.2).
      stream.malformed |= name == "te" && value != "trailers";
      return;
    case 7:
      stream.malformed |= name == "upgrade";
      return;
    case 10:
      stream.malformed |= name == "connection" || name == "keep-alive";
      return;
    case 12:
      if (name == "content-type") {
        stream.not_grpc = !(value.starts_with("application/grpc") &&
                            (value.size() == 16 || value[16] == '+' || value[16] == ';'));
      } else if (name == "grpc-timeout") {
        if (auto timeout = parseGrpcTimeout(value)) {
          stream.deadline = now_ + std::chrono::duration_cast<Clock::duration>(*timeout);
        }
      }
      return;
    case 16:
      stream.malformed |= name == "proxy-connection";
      return;
    case 17:
      stream.malformed |= name == "transfer-encoding";
      return;
    default:
      return;
  }
}

std::optional<std::chrono::nanoseconds> parseGrpcTimeout(std::string_view value) {
  if (value.size() < 2 || value.size() > 9) {
    return std::nullopt;
  }
  std::int64_t amount = 0;
  for (char c : value.substr(0, value.size() - 1)) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    amount = amount * 10 + (c - '0');
  }
  // Ten years fits a steady_clock time point with room to spare; a longer deadline is
  // none in practice.
  constexpr std::int64_t kMaxSeconds = 10LL * 366 * 24 * 3600;
  std::int64_t per_unit_ns = 0;
  switch (value.back()) {
    case 'H':
      per_unit_ns = 3'600'000'000'000;
      break;
    case 'M':
      per_unit_ns = 60'000'000'000;
      break;
    case 'S':
      per_unit_ns = 1'000'000'000;
      break;
    case 'm':
      per_unit_ns = 1'000'000;
      break;
    case 'u':
      per_unit_ns = 1'000;
      break;
    case 'n':
      per_unit_ns = 1;
      break;
    default:
      return std::nullopt;
  }
  if (amount > kMaxSeconds * 1'000'000'000 / per_unit_ns) {
    return std::chrono::seconds(kMaxSeconds);
  }
  return std::chrono::nanoseconds(amount * per_unit_ns);
}

}  // namespace sluice::grpc
