#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

/// A tiny blocking HTTP/1.1 client for tests (Beast, synchronous, keep-alive), and raw
/// socket helpers to play slow or malformed clients.
namespace sluice::test {

struct HttpResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  /// The first header with this name (case-insensitive); "" when absent.
  std::string header(std::string_view name) const;
  bool hasHeader(std::string_view name) const;
};

/// A unix socket file to connect to instead of a TCP host and port.
struct UnixSocket {
  std::string path;
};

/// One keep-alive connection, opened lazily and reopened after the server closed it.
/// Every call throws std::runtime_error on a network error or timeout.
class HttpClient {
 public:
  HttpClient(std::string host, std::uint16_t port,
             std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  /// Over a unix socket; requests carry `Host: localhost`.
  explicit HttpClient(UnixSocket socket,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  ~HttpClient();
  HttpClient(HttpClient&&) noexcept;
  HttpClient& operator=(HttpClient&&) noexcept;

  HttpResponse request(std::string_view method, std::string_view target, std::string body = {},
                       const std::vector<std::pair<std::string, std::string>>& headers = {});
  HttpResponse get(std::string_view target) { return request("GET", target); }
  HttpResponse post(std::string_view target, std::string body) {
    return request("POST", target, std::move(body));
  }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A plain blocking TCP (or unix socket) connection to play a misbehaving client.
class RawConnection {
 public:
  RawConnection(const std::string& host, std::uint16_t port);
  explicit RawConnection(const UnixSocket& socket);
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  /// Sends all bytes; false when the peer has closed or reset the connection.
  bool send(std::string_view data);
  /// Ends the sending side (a FIN); the connection can still read.
  void shutdownWrite();
  /// Sends `data` in as few segments as it fits in (corked, then uncorked); false as send().
  bool sendCorked(std::string_view data);
  /// Sends `data` and the FIN in one segment (corked, then shut down for writing), so that
  /// the peer finds both at once; false as send().
  bool sendLast(std::string_view data);
  /// Sends each send() at once in its own segment (TCP_NODELAY), not held back by Nagle.
  void noDelay();
  /// Reads until the peer closes, `max_bytes` arrived, or `timeout` passes.
  std::string readUntilClosed(std::chrono::milliseconds timeout, std::size_t max_bytes = 1 << 20);
  /// True when the peer closes (EOF or reset) within `timeout`; data read is discarded.
  bool waitClosed(std::chrono::milliseconds timeout);
  /// True when the peer has already closed (EOF or reset), without waiting; data that
  /// arrived is kept for the next read.
  bool closed();
  /// True when bytes have arrived and not been read yet, without waiting.
  bool hasData();
  /// Reads one whole response (headers and Content-Length body) within `timeout`;
  /// "" on timeout or close before a full response.
  std::string readResponse(std::chrono::milliseconds timeout);

 private:
  int fd_ = -1;
  std::string pending_;
};

}  // namespace sluice::test
