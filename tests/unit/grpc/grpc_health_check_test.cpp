// grpc.health.v1.Health/Check as GrpcConnection answers it, seen by an HTTP/2 client
// (nghttp2's client session, in memory): the response headers, the message's exact bytes
// and the trailers, for each way a HealthCheckRequest may be encoded.
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "grpc/grpc_connection.hpp"

namespace sluice::grpc {
namespace {

class NoCalls final : public GrpcCallHandler {
 public:
  void onCall(std::int32_t, std::string_view,
              std::optional<std::chrono::steady_clock::time_point>) override {
    ADD_FAILURE() << "a health check reached the rate-limit handler";
  }
  void onCallAbandoned(std::int32_t, StatusCode) override {}
  void onCallRefused(StatusCode) override {}
};

/// What the client saw of one call.
struct Answer {
  std::map<std::string, std::string> headers;
  std::string message;  // the DATA bytes, gRPC prefix included
  std::map<std::string, std::string> trailers;
  bool closed = false;
};

class GrpcHealthCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nghttp2_session_callbacks* callbacks = nullptr;
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onData);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onClose);
    nghttp2_session_client_new(&client_, callbacks, this);
    nghttp2_session_callbacks_del(callbacks);
    nghttp2_submit_settings(client_, NGHTTP2_FLAG_NONE, nullptr, 0);
    state_.serving = true;
  }
  void TearDown() override { nghttp2_session_del(client_); }

  /// One Check call with `message` (unframed) as its request; the exchange runs to its end.
  Answer check(std::string_view message) {
    std::string framed(5, '\0');
    framed[4] = static_cast<char>(message.size());
    framed.append(message);
    request_ = framed;
    request_pos_ = 0;
    const nghttp2_nv headers[] = {field(":method", "POST"),
                                  field(":scheme", "http"),
                                  field(":path", "/grpc.health.v1.Health/Check"),
                                  field(":authority", "localhost"),
                                  field("content-type", "application/grpc"),
                                  field("te", "trailers")};
    nghttp2_data_provider provider{};
    provider.read_callback = readRequest;
    const std::int32_t id =
        nghttp2_submit_request(client_, nullptr, headers, std::size(headers), &provider, nullptr);
    EXPECT_GT(id, 0);
    current_ = &answers_[id];
    for (int round = 0; round < 8 && !current_->closed; ++round) {
      exchange();
    }
    EXPECT_TRUE(current_->closed);
    return *current_;
  }

  /// The client's bytes to the server, the server's back.
  void exchange() {
    std::string to_server;
    const std::uint8_t* data = nullptr;
    for (ssize_t n; (n = nghttp2_session_mem_send(client_, &data)) > 0;) {
      to_server.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    }
    ASSERT_TRUE(server_.receive(to_server, std::chrono::steady_clock::now()));
    std::string to_client;
    server_.output(to_client);
    ASSERT_EQ(
        nghttp2_session_mem_recv(client_, reinterpret_cast<const std::uint8_t*>(to_client.data()),
                                 to_client.size()),
        static_cast<ssize_t>(to_client.size()));
  }

  static nghttp2_nv field(std::string_view name, std::string_view value) {
    return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
            reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
            value.size(), NGHTTP2_NV_FLAG_NONE};
  }
  static GrpcHealthCheckTest& self(void* user) { return *static_cast<GrpcHealthCheckTest*>(user); }
  static ssize_t readRequest(nghttp2_session*, std::int32_t, std::uint8_t* buffer,
                             std::size_t length, std::uint32_t* flags, nghttp2_data_source*,
                             void* user) {
    auto& t = self(user);
    const std::size_t n = std::min(length, t.request_.size() - t.request_pos_);
    std::copy_n(t.request_.data() + t.request_pos_, n, buffer);
    t.request_pos_ += n;
    if (t.request_pos_ == t.request_.size()) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return static_cast<ssize_t>(n);
  }
  static int onHeader(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                      std::size_t name_length, const std::uint8_t* value, std::size_t value_length,
                      std::uint8_t, void* user) {
    Answer& answer = self(user).answers_[frame->hd.stream_id];
    auto& fields = frame->headers.cat == NGHTTP2_HCAT_HEADERS ? answer.trailers : answer.headers;
    fields[std::string(reinterpret_cast<const char*>(name), name_length)] =
        std::string(reinterpret_cast<const char*>(value), value_length);
    return 0;
  }
  static int onData(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* data,
                    std::size_t length, void* user) {
    self(user).answers_[id].message.append(reinterpret_cast<const char*>(data), length);
    return 0;
  }
  static int onClose(nghttp2_session*, std::int32_t id, std::uint32_t, void* user) {
    self(user).answers_[id].closed = true;
    return 0;
  }

  NoCalls handler_;
  GrpcServerState state_;
  GrpcConnection server_{handler_, state_, GrpcLimits{}, std::chrono::steady_clock::now()};
  nghttp2_session* client_ = nullptr;
  std::map<std::int32_t, Answer> answers_;
  Answer* current_ = nullptr;
  std::string request_;
  std::size_t request_pos_ = 0;
};

const std::string kServing("\0\0\0\0\x02\x08\x01", 7);
const std::string kNotServing("\0\0\0\0\x02\x08\x02", 7);

TEST_F(GrpcHealthCheckTest, AnswersServingWithHeadersMessageAndTrailers) {
  const Answer answer = check(std::string_view("\x0a\x09ratelimit", 11));
  EXPECT_EQ(answer.headers.at(":status"), "200");
  EXPECT_EQ(answer.headers.at("content-type"), "application/grpc");
  EXPECT_EQ(answer.headers.count("grpc-status"), 0u);  // not Trailers-Only
  EXPECT_EQ(answer.message, kServing);
  EXPECT_EQ(answer.trailers, (std::map<std::string, std::string>{{"grpc-status", "0"}}));
}

TEST_F(GrpcHealthCheckTest, AnEmptyRequestAsksForTheServerAsAWhole) {
  EXPECT_EQ(check("").message, kServing);
  // The empty service spelled out (field 1, zero bytes).
  EXPECT_EQ(check(std::string_view("\x0a\x00", 2)).message, kServing);
}

TEST_F(GrpcHealthCheckTest, AnswersNotServingWhileTheServerIsNot) {
  state_.serving = false;
  const Answer answer = check(std::string_view("\x0a\x09ratelimit", 11));
  EXPECT_EQ(answer.message, kNotServing);
  EXPECT_EQ(answer.trailers.at("grpc-status"), "0");
}

TEST_F(GrpcHealthCheckTest, ReadsTheServiceWhereverTheRequestPutsIt) {
  // An unknown field before it, the field repeated (the last one counts), a long varint length.
  EXPECT_EQ(check(std::string_view("\x10\x01\x0a\x09ratelimit", 13)).message, kServing);
  EXPECT_EQ(check(std::string_view("\x0a\x03"
                                   "abc\x0a\x09ratelimit",
                                   16))
                .message,
            kServing);
  EXPECT_EQ(check(std::string_view("\x0a\x89\x00ratelimit", 12)).message, kServing);
  // The usual request followed by another service: the last one counts.
  const Answer replaced = check(std::string_view("\x0a\x09ratelimit\x0a\x01x", 14));
  EXPECT_EQ(replaced.message, "");
  EXPECT_EQ(replaced.headers.at("grpc-status"), "5");
}

TEST_F(GrpcHealthCheckTest, AnUnknownServiceIsNotFound) {
  const Answer answer = check(std::string_view("\x0a\x05other", 7));
  EXPECT_EQ(answer.message, "");
  // Trailers-Only: the status in the only HEADERS frame.
  EXPECT_EQ(answer.headers.at("grpc-status"), "5");
  EXPECT_EQ(answer.headers.at("grpc-message"), "unknown service");
}

TEST_F(GrpcHealthCheckTest, AMalformedRequestIsInternal) {
  // A length past the end; a second byte that matches the size after a key that is not
  // field 1's (wire type 3).
  EXPECT_EQ(check(std::string_view("\x0a\x05"
                                   "ab",
                                   4))
                .headers.at("grpc-status"),
            "13");
  EXPECT_EQ(check(std::string_view("\x0b\x01x", 3)).headers.at("grpc-status"), "13");
}

}  // namespace
}  // namespace sluice::grpc
