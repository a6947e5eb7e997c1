// A call's request header fields, as the gRPC server acts on them: the pseudo-header fields
// (RFC 9113 section 8.3.1), content-type, grpc-timeout, and the fields HTTP/2 forbids.
// The HTTP/2 session (http2_session.cpp) checks framing only: these are the checks of a
// request's fields that matter to a server that reads these fields only and passes none of
// them on.

#include <string>

#include "grpc/grpc_connection.hpp"
#include "grpc/grpc_stream.hpp"

namespace sluice::grpc {

namespace {

/// A request pseudo-header field's kPseudo* bit (RFC 9113 section 8.3.1), 0 for a field a
/// request must not carry.
std::uint8_t pseudoHeaderBit(std::string_view name) {
  switch (name.size()) {
    case 5:
      return name == ":path" ? kPseudoPath : 0;
    case 7:
      return name == ":method" ? kPseudoMethod : name == ":scheme" ? kPseudoScheme : 0;
    case 10:
      return name == ":authority" ? kPseudoAuthority : 0;
    default:
      return 0;
  }
}

// The rare cases, out of the way of the usual call's fields (a header field's callback runs
// about eight times a call; its code stays in a few cache lines).

template <typename StreamT>
[[gnu::cold, gnu::noinline]] void headerListTooLarge(StreamT& stream, std::uint32_t limit) {
  if (stream.early_status == StatusCode::kOk) {
    stream.early_status = StatusCode::kResourceExhausted;
    stream.early_message = "header list larger than " + std::to_string(limit) + " bytes";
  }
}

/// The method of a :path other than ShouldRateLimit's and Check's.
template <typename StreamT>
[[gnu::cold, gnu::noinline]] void otherMethod(StreamT& stream, std::string_view path) {
  stream.path_method = methodOfPath(path, stream.call);
  if (stream.path_method == Method::kUnknown || stream.path_method == Method::kReflection) {
    stream.path.assign(path);
  }
}

template <typename StreamT>
void onPseudoHeader(StreamT& stream, std::string_view name, std::string_view value) {
  // Unknown (or a response's), repeated, after a regular field, an empty :path: malformed.
  const std::uint8_t field = pseudoHeaderBit(name);
  if (field == kPseudoPath) {
    // Known methods are told apart here, without keeping the path.
    if (value == kRlsPath) {
      stream.path_method = Method::kRls;
      stream.call = RlsCall::kShouldRateLimit;
    } else if (value == kHealthCheckPath) {
      stream.path_method = Method::kHealthCheck;
    } else {
      otherMethod(stream, value);
    }
  } else if (field == kPseudoMethod) {
    stream.bad_method = value != "POST";
  }
  if (field == 0 || stream.regular_seen || (stream.pseudo & field) != 0 ||
      (field == kPseudoPath && value.empty())) [[unlikely]] {
    stream.malformed = true;
  }
  stream.pseudo |= field;
}

}  // namespace

void GrpcConnection::onField(void* user, std::string_view name, std::string_view value) {
  auto* stream = static_cast<Stream*>(user);
  // HPACK's accounting of a header list (RFC 9113 section 6.5.2).
  stream->header_bytes += name.size() + value.size() + 32;
  if (stream->header_bytes > limits_.max_header_list_bytes) [[unlikely]] {
    headerListTooLarge(*stream, limits_.max_header_list_bytes);
    return;
  }
  if (name.empty()) [[unlikely]] {
    stream->malformed = true;
    return;
  }
  if (name[0] == ':') {
    onPseudoHeader(*stream, name, value);
    return;
  }
  stream->regular_seen = true;
  switch (name.size()) {
    case 2:
      // TE: "trailers" only (RFC 9113 section 8.2.2).
      stream->malformed |= name == "te" && value != "trailers";
      break;
    case 7:
      stream->malformed |= name == "upgrade";
      break;
    case 10:
      stream->malformed |= name == "connection" || name == "keep-alive";
      break;
    case 12:
      if (name == "content-type") {
        stream->not_grpc = !(value.starts_with("application/grpc") &&
                             (value.size() == 16 || value[16] == '+' || value[16] == ';'));
      } else if (name == "grpc-timeout") {
        if (auto timeout = parseGrpcTimeout(value)) {
          stream->deadline = now_ + std::chrono::duration_cast<Clock::duration>(*timeout);
        }
      }
      break;
    case 16:
      stream->malformed |= name == "proxy-connection";
      break;
    case 17:
      stream->malformed |= name == "transfer-encoding";
      break;
    default:
      break;
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
