// The gRPC server's built-in services, answered without grpc++: grpc.health.v1 (Check and
// Watch, under the service name envoyproxy/ratelimit registers) and server reflection
// (for grpcurl), from protobuf's generated descriptor pool.

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <algorithm>
#include <string>
#include <vector>

#include "grpc/grpc_connection.hpp"
#include "grpc/grpc_stream.hpp"
#include "grpc/proto_wire.hpp"

namespace sluice::grpc {

using wire::putBytes;
using wire::putVarint;
using wire::WireReader;

namespace {

/// HealthCheckRequest's service (field 1, the last one wins); false when malformed.
[[gnu::cold, gnu::noinline]] bool parseHealthRequest(std::string_view message,
                                                     std::string_view& service) {
  WireReader reader{message};
  std::uint32_t field = 0;
  std::string_view bytes;
  bool bad = false;
  while (reader.next(field, bytes, bad)) {
    if (field == 1) {
      service = bytes;
    }
  }
  return !bad;
}

}  // namespace

void GrpcConnection::serveHealthCheck(Stream& stream, std::string_view message) {
  std::string_view service;
  bool bad = false;
  // The usual request: nothing, or the service alone (field 1, shorter than 128 bytes).
  if (message.size() >= 2 && message[0] == '\x0a' &&
      static_cast<unsigned char>(message[1]) == message.size() - 2) {
    service = message.substr(2);
  } else if (!message.empty()) {
    bad = !parseHealthRequest(message, service);
  }
  if (bad) {
    finishStream(stream, StatusCode::kInternal, "cannot parse HealthCheckRequest");
    return;
  }
  const bool known = service.empty() || service == kHealthServiceName;
  const bool serving = state_.serving.load(std::memory_order_relaxed);
  if (stream.method == Method::kHealthCheck) {
    if (!known) {
      finishStream(stream, StatusCode::kNotFound, "unknown service");
      return;
    }
    // The whole answer at once (its message behind the gRPC prefix, status OK): one
    // submission, as a decided call's reply.
    static constexpr char kServing[] = {0, 0, 0, 0, 2, 0x08, 0x01};
    static constexpr char kNotServing[] = {0, 0, 0, 0, 2, 0x08, 0x02};
    answerOk(stream, {serving ? kServing : kNotServing, sizeof(kServing)});
    return;
  }
  // Watch: the status now, then each change, until the client ends the call.
  stream.deadline.reset();
  if (!known) {
    sendMessage(stream, std::string_view("\x08\x03", 2));  // SERVICE_UNKNOWN
    stream.watched.reset();                                // nothing more is sent
    return;
  }
  stream.watched = serving;
  sendMessage(stream, serving ? std::string_view("\x08\x01", 2) : std::string_view("\x08\x02", 2));
}

void GrpcConnection::healthChanged() {
  const bool serving = state_.serving.load(std::memory_order_relaxed);
  for (auto& stream : streams_) {
    if (stream->method == Method::kHealthWatch && stream->watched && !stream->answered &&
        *stream->watched != serving) {
      stream->watched = serving;
      sendMessage(*stream,
                  serving ? std::string_view("\x08\x01", 2) : std::string_view("\x08\x02", 2));
    }
  }
}

void GrpcConnection::serveReflection(Stream& stream, std::string_view message) {
  namespace pb = google::protobuf;
  WireReader reader{message};
  std::uint32_t field = 0;
  std::string_view bytes;
  bool bad = false;
  std::string host;
  std::string response;
  std::string inner;
  int kind = 0;
  std::string_view argument;
  while (reader.next(field, bytes, bad)) {
    if (field == 1) {
      host.assign(bytes);
    } else if (field >= 3 && field <= 7) {
      kind = static_cast<int>(field);
      argument = bytes;
    }
  }
  if (bad) {
    finishStream(stream, StatusCode::kInternal, "cannot parse ServerReflectionRequest");
    return;
  }
  // A reflection client (grpcurl) may keep its stream open between questions.
  stream.request_until.reset();
  putBytes(response, 1, host);
  putBytes(response, 2, message);
  auto error = [&](StatusCode code, std::string_view text) {
    inner.clear();
    putVarint(inner, 1 << 3);
    putVarint(inner, static_cast<std::uint64_t>(code));
    putBytes(inner, 2, text);
    putBytes(response, 7, inner);
  };
  if (kind == 7) {
    for (std::string_view name : {std::string_view("envoy.service.ratelimit.v3.RateLimitService"),
                                  std::string_view("grpc.health.v1.Health"),
                                  std::string_view("grpc.reflection.v1alpha.ServerReflection")}) {
      std::string service;
      putBytes(service, 1, name);
      putBytes(inner, 1, service);
    }
    putBytes(response, 6, inner);
  } else if (kind == 3 || kind == 4) {
    const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
    const pb::FileDescriptor* file = kind == 3
                                         ? pool->FindFileByName(std::string(argument))
                                         : pool->FindFileContainingSymbol(std::string(argument));
    if (file == nullptr) {
      error(StatusCode::kNotFound, kind == 3 ? "file not found" : "symbol not found");
    } else {
      // The file and everything it imports, as grpc++'s reflection answers.
      std::vector<const pb::FileDescriptor*> files{file};
      for (std::size_t i = 0; i < files.size(); ++i) {
        pb::FileDescriptorProto proto;
        files[i]->CopyTo(&proto);
        putBytes(inner, 1, proto.SerializeAsString());
        for (int d = 0; d < files[i]->dependency_count(); ++d) {
          if (std::find(files.begin(), files.end(), files[i]->dependency(d)) == files.end()) {
            files.push_back(files[i]->dependency(d));
          }
        }
      }
      putBytes(response, 4, inner);
    }
  } else {
    error(StatusCode::kUnimplemented, "not served by this reflection service");
  }
  sendMessage(stream, response);
}

}  // namespace sluice::grpc
