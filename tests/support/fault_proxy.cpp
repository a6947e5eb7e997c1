#include "support/fault_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <list>
#include <stdexcept>
#include <vector>

namespace sluice::test {
namespace {

using Clock = std::chrono::steady_clock;

void setNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

void closeWithReset(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  ::close(fd);
}

int connectUpstream(const std::string& host, int port) {
  // Close-on-exec everywhere: a child process started later by the test (sluice,
  // redis-server) must not hold a copy, or closing ours would send no FIN.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return -1;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  // Loopback: the connect completes (or is refused) at once.
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setNonBlocking(fd);
  return fd;
}

struct Chunk {
  Clock::time_point release;
  std::string data;
};

struct Connection {
  int client = -1;
  int server = -1;
  std::string to_server;
  std::deque<Chunk> to_client;
  Clock::time_point next_drip{};
  bool half_open = false;      ///< upstream closed, client kept silent
  bool blackholed = false;     ///< silent for good: everything read is dropped
  bool reset_pending = false;  ///< the next reply is cut in half and the connection reset
  bool server_eof = false;
  bool dead = false;
};

}  // namespace

struct FaultProxy::Impl {
  std::list<Connection> connections;
};

FaultProxy::FaultProxy(int upstream_port, std::string upstream_host)
    : upstream_port_(upstream_port), upstream_host_(std::move(upstream_host)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 64) != 0 || ::pipe2(wake_fds_, O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("fault proxy: cannot listen");
  }
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  setNonBlocking(listen_fd_);
  setNonBlocking(wake_fds_[0]);
  thread_ = std::thread([this] { run(); });
}

FaultProxy::~FaultProxy() {
  stop_ = true;
  char c = 0;
  (void)!::write(wake_fds_[1], &c, 1);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_fds_[0]);
  ::close(wake_fds_[1]);
}

void FaultProxy::wake() {
  char c = 0;
  (void)!::write(wake_fds_[1], &c, 1);
}

std::string FaultProxy::url(int db) const {
  return "redis://127.0.0.1:" + std::to_string(port_) + "/" + std::to_string(db);
}

void FaultProxy::setLatency(std::chrono::milliseconds delay) {
  std::lock_guard lock(mutex_);
  faults_.latency = delay;
  wake();
}

void FaultProxy::setBlackhole(bool on) {
  std::lock_guard lock(mutex_);
  faults_.blackhole = on;
  wake();
}

void FaultProxy::setDrip(std::size_t bytes, std::chrono::milliseconds interval) {
  std::lock_guard lock(mutex_);
  faults_.drip_bytes = bytes;
  faults_.drip_interval = interval;
  wake();
}

void FaultProxy::resetMidReply(std::string needle) {
  std::lock_guard lock(mutex_);
  faults_.reset_needle = std::move(needle);
  reset_fired_ = false;
  wake();
}

void FaultProxy::setRefuse(bool on) {
  std::lock_guard lock(mutex_);
  faults_.refuse = on;
  wake();
}

void FaultProxy::halfOpenExisting() {
  std::lock_guard lock(mutex_);
  faults_.half_open_now = true;
  wake();
}

void FaultProxy::resetAll() {
  std::lock_guard lock(mutex_);
  faults_.reset_all_now = true;
  wake();
}

void FaultProxy::clear() {
  std::lock_guard lock(mutex_);
  faults_ = Faults{};
  wake();
}

void FaultProxy::run() {
  Impl impl;
  auto& connections = impl.connections;
  std::vector<char> buffer(64 * 1024);
  while (!stop_) {
    const auto now = Clock::now();
    std::vector<pollfd> fds;
    fds.push_back({listen_fd_, POLLIN, 0});
    fds.push_back({wake_fds_[0], POLLIN, 0});
    auto wait = std::chrono::milliseconds(50);
    for (Connection& c : connections) {
      if (c.dead) {
        continue;
      }
      if (!c.to_client.empty()) {
        auto until = std::chrono::ceil<std::chrono::milliseconds>(
            std::max(c.to_client.front().release, c.next_drip) - now);
        wait = std::clamp(until, std::chrono::milliseconds(1), wait);
      }
    }
    // Index i of `fds` from 2 on: two per live connection (client, server or -1).
    std::vector<Connection*> polled;
    for (Connection& c : connections) {
      if (c.dead) {
        continue;
      }
      polled.push_back(&c);
      fds.push_back({c.client, POLLIN, 0});
      fds.push_back(
          {c.server, static_cast<short>(POLLIN | (c.to_server.empty() ? 0 : POLLOUT)), 0});
    }
    ::poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
    // The faults as they are now, after the wait: a fault set while poll() waited applies
    // to the bytes that woke it.
    Faults faults;
    {
      std::lock_guard lock(mutex_);
      faults = faults_;
      faults_.half_open_now = false;
      faults_.reset_all_now = false;
    }
    for (Connection& c : connections) {
      if (faults.blackhole) {
        c.blackholed = true;
        c.to_client.clear();
        c.to_server.clear();
      }
      if ((faults.reset_all_now || faults.refuse) && !c.dead && !c.half_open) {
        closeWithReset(c.client);
        c.client = -1;
        c.dead = true;
        ++resets_;
      }
      if (faults.half_open_now && !c.dead && c.server >= 0) {
        ::close(c.server);
        c.server = -1;
        c.half_open = true;
        c.to_client.clear();
        c.to_server.clear();
      }
    }
    if (fds[1].revents & POLLIN) {
      while (::read(wake_fds_[0], buffer.data(), buffer.size()) > 0) {
      }
    }
    if (fds[0].revents & POLLIN) {
      for (;;) {
        int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (client < 0) {
          break;
        }
        ++accepted_;
        if (faults.refuse) {
          closeWithReset(client);
          ++resets_;
          continue;
        }
        int one = 1;
        ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setNonBlocking(client);
        int server = connectUpstream(upstream_host_, upstream_port_);
        if (server < 0) {
          ::close(client);  // the server is down: the client sees the connection close
          continue;
        }
        Connection c;
        c.client = client;
        c.server = server;
        c.blackholed = faults.blackhole;
        connections.push_back(std::move(c));
      }
    }

    const auto read_at = Clock::now();
    for (std::size_t i = 0; i < polled.size(); ++i) {
      Connection& c = *polled[i];
      if (c.dead) {
        continue;
      }
      const pollfd& cp = fds[2 + 2 * i];
      const pollfd& sp = fds[3 + 2 * i];
      if (cp.revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = ::read(c.client, buffer.data(), buffer.size());
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          c.dead = true;  // the client left
          continue;
        }
        if (n > 0 && !c.half_open && !c.blackholed) {
          std::string_view data(buffer.data(), static_cast<std::size_t>(n));
          if (!faults.reset_needle.empty() && data.find(faults.reset_needle) != std::string::npos) {
            c.reset_pending = true;
            std::lock_guard lock(mutex_);
            faults_.reset_needle.clear();
          }
          c.to_server.append(data);
        }
      }
      if (c.server >= 0 && (sp.revents & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t n = ::read(c.server, buffer.data(), buffer.size());
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          c.server_eof = true;
          ::close(c.server);
          c.server = -1;
        } else if (n > 0 && !c.blackholed) {
          c.to_client.push_back(
              {read_at + faults.latency, std::string(buffer.data(), static_cast<std::size_t>(n))});
        }
      }
      if (c.server >= 0 && !c.to_server.empty()) {
        ssize_t n = ::send(c.server, c.to_server.data(), c.to_server.size(), MSG_NOSIGNAL);
        if (n > 0) {
          c.to_server.erase(0, static_cast<std::size_t>(n));
        }
      }
    }

    const auto write_at = Clock::now();
    for (Connection& c : connections) {
      if (c.dead) {
        continue;
      }
      while (!c.to_client.empty() && c.to_client.front().release <= write_at &&
             c.next_drip <= write_at) {
        Chunk& chunk = c.to_client.front();
        if (c.reset_pending) {
          const std::size_t half = chunk.data.size() / 2;
          if (half > 0) {
            (void)!::send(c.client, chunk.data.data(), half, MSG_NOSIGNAL);
          }
          ++resets_;
          reset_fired_ = true;
          closeWithReset(c.client);
          c.client = -1;
          c.dead = true;
          break;
        }
        std::size_t size = chunk.data.size();
        if (faults.drip_bytes > 0) {
          size = std::min(size, faults.drip_bytes);
          c.next_drip = write_at + faults.drip_interval;
        }
        // send(MSG_NOSIGNAL): a peer that closed its end gets EPIPE, not this process a SIGPIPE.
        ssize_t n = ::send(c.client, chunk.data.data(), size, MSG_NOSIGNAL);
        if (n <= 0) {
          if (n < 0 && errno != EAGAIN && errno != EINTR) {
            c.dead = true;
          }
          break;
        }
        chunk.data.erase(0, static_cast<std::size_t>(n));
        if (chunk.data.empty()) {
          c.to_client.pop_front();
        }
        if (faults.drip_bytes > 0) {
          break;
        }
      }
      if (!c.dead && c.server_eof && c.to_client.empty() && !c.half_open) {
        c.dead = true;  // the server left and everything it said was delivered
      }
    }

    for (auto it = connections.begin(); it != connections.end();) {
      if (it->dead) {
        if (it->client >= 0) {
          ::close(it->client);
        }
        if (it->server >= 0) {
          ::close(it->server);
        }
        it = connections.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (Connection& c : connections) {
    if (c.client >= 0) {
      ::close(c.client);
    }
    if (c.server >= 0) {
      ::close(c.server);
    }
  }
}

}  // namespace sluice::test
