// GrpcConnection (src/grpc/grpc_connection.cpp), the gRPC listener's HTTP/2 and gRPC framing,
// fed what a hostile client may send: whatever arrives, it never crashes, never holds more
// streams than it advertises, answers every call it handed on at most once, and accounts
// for each one (answered, abandoned, or still waiting).
//
// Input: the first byte picks the handling (bit 0: calls are answered at once, else left
// waiting until the timer; bit 1: answers are errors; bit 2: the client preface is sent
// first, so that the rest reaches the frame layer; bits 4-7: how the bytes are split into
// reads); the rest is the bytes on the connection.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "grpc/grpc_connection.hpp"

namespace {

using sluice::grpc::GrpcCallHandler;
using sluice::grpc::GrpcConnection;
using sluice::grpc::StatusCode;

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

class Handler final : public GrpcCallHandler {
 public:
  void onCall(std::int32_t stream, std::string_view message,
              std::optional<GrpcConnection::Clock::time_point> /*deadline*/) override {
    SLUICE_FUZZ_CHECK(waiting.insert(stream).second);
    SLUICE_FUZZ_CHECK(message.size() <= (1u << 12));
    if (answer_now && connection != nullptr) {
      waiting.erase(stream);
      if (errors) {
        connection->fail(stream, StatusCode::kUnavailable, "store down\n%");
      } else {
        connection->reply(stream, message, (stream & 2) != 0);
      }
    }
  }
  void onCallAbandoned(std::int32_t stream, StatusCode) override {
    SLUICE_FUZZ_CHECK(waiting.erase(stream) == 1);
  }
  void onCallRefused(StatusCode code) override { SLUICE_FUZZ_CHECK(code != StatusCode::kOk); }

  GrpcConnection* connection = nullptr;
  std::set<std::int32_t> waiting;
  bool answer_now = true;
  bool errors = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::uint8_t mode = data[0];
  std::string wire;
  if ((mode & 4) != 0) {
    wire.append(kPreface);
  }
  wire.append(reinterpret_cast<const char*>(data + 1), size - 1);

  Handler handler;
  handler.answer_now = (mode & 1) != 0;
  handler.errors = (mode & 2) != 0;
  sluice::grpc::GrpcServerState state;
  state.serving = true;
  state.reflection = true;
  sluice::grpc::GrpcLimits limits;
  limits.max_concurrent_streams = 8;
  limits.max_header_list_bytes = 512;
  limits.max_message_bytes = 1 << 12;
  limits.request_timeout = std::chrono::milliseconds(100);
  auto now = GrpcConnection::Clock::time_point{} + std::chrono::hours(1);
  GrpcConnection connection(handler, state, limits, now);
  handler.connection = &connection;

  const std::size_t chunk = std::size_t{1} << (mode >> 4);  // 1 B .. 32 KiB
  std::string out;
  for (std::size_t at = 0; at < wire.size(); at += chunk) {
    const bool ok = connection.receive(std::string_view(wire).substr(at, chunk), now);
    connection.output(out);
    SLUICE_FUZZ_CHECK(connection.openStreams() <= limits.max_concurrent_streams);
    if (!ok) {
      break;
    }
    now += std::chrono::milliseconds(7);
    if (auto next = connection.nextTimer(); next && *next <= now) {
      connection.onTimer(now);
      connection.output(out);
    }
    out.clear();
  }
  // Whatever is still waiting is answered late: at most once, and never for a gone call.
  for (std::int32_t stream : std::set<std::int32_t>(handler.waiting)) {
    if (connection.waiting(stream)) {
      connection.reply(stream, "late", false);
    }
  }
  connection.onTimer(now + std::chrono::hours(1));
  connection.healthChanged();
  connection.goAway();
  connection.output(out);
  return 0;
}
