#include "support/eventual_latency_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace sluice::test {
namespace {

using Clock = std::chrono::steady_clock;

struct Chunk {
  Clock::time_point due;
  std::string bytes;
};

struct Link {
  int client = -1;
  int upstream = -1;
  std::deque<Chunk> to_upstream;
  std::deque<Chunk> to_client;
  bool closed = false;

  void close() {
    if (client >= 0) {
      ::close(client);
    }
    if (upstream >= 0) {
      ::close(upstream);
    }
    client = upstream = -1;
    closed = true;
  }
};

int connectTo(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool writeAll(int fd, const std::string& bytes) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      return false;
    }
    off += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

LatencyProxy::LatencyProxy(int target_port, std::chrono::milliseconds delay)
    : target_port_(target_port), delay_(delay) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("latency proxy: cannot listen");
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { run(); });
}

LatencyProxy::~LatencyProxy() {
  stop_ = true;
  thread_.join();
  ::close(listen_fd_);
}

std::string LatencyProxy::url() const {
  return "redis://127.0.0.1:" + std::to_string(port_) + "/0";
}

void LatencyProxy::run() {
  std::vector<std::unique_ptr<Link>> links;
  char buffer[16384];
  while (!stop_) {
    if (cut_) {
      for (auto& link : links) {
        link->close();
      }
    }
    std::erase_if(links, [](const auto& link) { return link->closed; });
    // Deliver what is due; find the next due time.
    const auto now = Clock::now();
    auto next = now + std::chrono::milliseconds(20);
    for (auto& link : links) {
      for (auto* queue : {&link->to_upstream, &link->to_client}) {
        const int fd = queue == &link->to_upstream ? link->upstream : link->client;
        while (!link->closed && !queue->empty() && queue->front().due <= now) {
          if (!writeAll(fd, queue->front().bytes)) {
            link->close();
            break;
          }
          queue->pop_front();
        }
        if (!queue->empty() && queue->front().due < next) {
          next = queue->front().due;
        }
      }
    }
    std::vector<pollfd> fds;
    fds.push_back({listen_fd_, POLLIN, 0});
    for (auto& link : links) {
      fds.push_back({link->client, POLLIN, 0});
      fds.push_back({link->upstream, POLLIN, 0});
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
    ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long>(0, wait.count())));
    if (fds[0].revents & POLLIN) {
      int client = ::accept(listen_fd_, nullptr, nullptr);
      if (client >= 0) {
        int upstream = cut_ ? -1 : connectTo(target_port_);
        if (upstream < 0) {
          ::close(client);
        } else {
          int one = 1;
          ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          auto link = std::make_unique<Link>();
          link->client = client;
          link->upstream = upstream;
          links.push_back(std::move(link));
        }
      }
    }
    const auto read_at = Clock::now();
    for (std::size_t i = 0; i + 1 < fds.size() && (i / 2) < links.size(); i += 2) {
      Link& link = *links[i / 2];
      for (int side = 0; side < 2 && !link.closed; ++side) {
        const pollfd& p = fds[1 + i + side];
        if ((p.revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
          continue;
        }
        ssize_t n = ::recv(p.fd, buffer, sizeof buffer, 0);
        if (n <= 0) {
          link.close();
          break;
        }
        auto& queue = side == 0 ? link.to_upstream : link.to_client;
        queue.push_back(Chunk{read_at + delay_, std::string(buffer, static_cast<std::size_t>(n))});
      }
    }
  }
  for (auto& link : links) {
    link->close();
  }
}

}  // namespace sluice::test
