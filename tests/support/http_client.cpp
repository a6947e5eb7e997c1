#include "support/http_client.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>

namespace sluice::test {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

void setTimeouts(int fd, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

}  // namespace

std::string HttpResponse::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (equalsIgnoreCase(k, name)) {
      return v;
    }
  }
  return {};
}

bool HttpResponse::hasHeader(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(),
                     [&](const auto& h) { return equalsIgnoreCase(h.first, name); });
}

struct HttpClient::Impl {
  std::string host;
  std::uint16_t port = 0;
  std::string unix_path;  // when set, instead of host and port
  std::chrono::milliseconds timeout;
  net::io_context ioc;
  std::optional<net::generic::stream_protocol::socket> socket;
  beast::flat_buffer buffer;

  void connect() {
    socket.emplace(ioc);
    if (!unix_path.empty()) {
      socket->connect(net::generic::stream_protocol::endpoint(
          net::local::stream_protocol::endpoint(unix_path)));
    } else {
      tcp::resolver resolver(ioc);
      tcp::socket tcp_socket(ioc);
      net::connect(tcp_socket, resolver.resolve(host, std::to_string(port)));
      const auto protocol = tcp_socket.local_endpoint().protocol();
      socket->assign(net::generic::stream_protocol(protocol.family(), protocol.protocol()),
                     tcp_socket.release());
    }
    setTimeouts(socket->native_handle(), timeout);
    buffer.clear();
  }

  HttpResponse exchange(const bhttp::request<bhttp::string_body>& req) {
    bhttp::write(*socket, req);
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(64 << 20);
    parser.header_limit(1 << 20);
    bhttp::read(*socket, buffer, parser);
    auto res = parser.release();
    HttpResponse out;
    out.status = static_cast<int>(res.result_int());
    for (const auto& field : res) {
      out.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    out.body = std::move(res.body());
    if (!res.keep_alive()) {
      beast::error_code ignored;
      socket->close(ignored);
      socket.reset();
    }
    return out;
  }
};

HttpClient::HttpClient(std::string host, std::uint16_t port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->host = std::move(host);
  impl_->port = port;
  impl_->timeout = timeout;
}

HttpClient::HttpClient(UnixSocket socket, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->host = "localhost";
  impl_->unix_path = std::move(socket.path);
  impl_->timeout = timeout;
}

HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&&) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&&) noexcept = default;

HttpResponse HttpClient::request(std::string_view method, std::string_view target, std::string body,
                                 const std::vector<std::pair<std::string, std::string>>& headers) {
  bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
  req.set(bhttp::field::host,
          impl_->unix_path.empty() ? impl_->host + ":" + std::to_string(impl_->port) : impl_->host);
  if (!body.empty()) {
    req.set(bhttp::field::content_type, "application/json");
  }
  for (const auto& [k, v] : headers) {
    req.set(k, v);
  }
  req.body() = std::move(body);
  req.prepare_payload();
  // A reused keep-alive connection may have been closed by the server (idle timeout):
  // retry once on a fresh one.
  for (int attempt = 0;; ++attempt) {
    bool reused = impl_->socket.has_value();
    try {
      if (!impl_->socket) {
        impl_->connect();
      }
      return impl_->exchange(req);
    } catch (const std::exception& e) {
      impl_->socket.reset();
      if (!reused || attempt > 0) {
        throw std::runtime_error(std::string(method) + " " + std::string(target) + ": " + e.what());
      }
    }
  }
}

RawConnection::RawConnection(const std::string& host, std::uint16_t port) {
  net::io_context ioc;
  tcp::resolver resolver(ioc);
  tcp::socket socket(ioc);
  net::connect(socket, resolver.resolve(host, std::to_string(port)));
  fd_ = socket.release();
}

RawConnection::RawConnection(const UnixSocket& socket) {
  net::io_context ioc;
  net::local::stream_protocol::socket local(ioc);
  local.connect(net::local::stream_protocol::endpoint(socket.path));
  fd_ = local.release();
}

RawConnection::~RawConnection() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

bool RawConnection::send(std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

void RawConnection::shutdownWrite() { ::shutdown(fd_, SHUT_WR); }

bool RawConnection::sendCorked(std::string_view data) {
  int on = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
  const bool sent = send(data);
  on = 0;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
  return sent;
}

bool RawConnection::sendLast(std::string_view data) {
  const int on = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
  if (!send(data)) {
    return false;
  }
  shutdownWrite();
  return true;
}

void RawConnection::noDelay() {
  const int on = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
}

std::string RawConnection::readUntilClosed(std::chrono::milliseconds timeout,
                                           std::size_t max_bytes) {
  std::string out = std::move(pending_);
  pending_.clear();
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[16384];
  while (out.size() < max_bytes) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      break;
    }
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r <= 0) {
      if (r < 0 && errno == EINTR) {
        continue;
      }
      break;
    }
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      break;
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

bool RawConnection::waitClosed(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[16384];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return false;
    }
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      return false;
    }
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      return true;  // EOF or reset
    }
  }
}

bool RawConnection::closed() {
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) {
    return false;
  }
  char c = 0;
  const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

bool RawConnection::hasData() {
  if (!pending_.empty()) {
    return true;
  }
  char c = 0;
  return ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 1;
}

std::string RawConnection::readResponse(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[16384];
  for (;;) {
    auto header_end = pending_.find("\r\n\r\n");
    if (header_end != std::string::npos) {
      std::size_t length = 0;
      std::string head = pending_.substr(0, header_end);
      std::string lower = head;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (auto pos = lower.find("content-length:"); pos != std::string::npos) {
        length = std::stoul(head.substr(pos + 15));
      }
      std::size_t total = header_end + 4 + length;
      if (pending_.size() >= total) {
        std::string response = pending_.substr(0, total);
        pending_.erase(0, total);
        return response;
      }
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return {};
    }
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      return {};
    }
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      return {};
    }
    pending_.append(buf, static_cast<std::size_t>(n));
  }
}

}  // namespace sluice::test
