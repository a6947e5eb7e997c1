#include "http/listener.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <system_error>
#include <utility>

#include "http/session.hpp"
#include "http/worker.hpp"

namespace sluice::http {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using ReusePort = net::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);

Error unavailable(const std::string& where, const std::string& why) {
  return makeError(ErrorKind::kUnavailable, "cannot listen on " + where + ": " + why);
}

std::string errnoText(int error) {
  return std::error_code(error, std::generic_category()).message();
}

/// Whether a server accepts on the unix socket `path`: connect() succeeds, or would block
/// (its backlog is full). nullopt with `error` set when it cannot tell.
std::optional<bool> socketIsLive(const std::string& path, int& error) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = errno;
    return std::nullopt;
  }
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  const int result = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  error = result == 0 ? 0 : errno;
  ::close(fd);
  if (result == 0 || error == EAGAIN || error == EINPROGRESS) {
    return true;
  }
  if (error == ECONNREFUSED) {
    return false;
  }
  return std::nullopt;
}

/// Makes room for a new socket at `path`: nothing there, or a stale socket removed.
Status clearSocketPath(const std::string& path, const std::string& where) {
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) {
    if (errno == ENOENT) {
      return {};
    }
    return unavailable(where, errnoText(errno));
  }
  if (!S_ISSOCK(status.st_mode)) {
    return unavailable(where, "the path exists and is not a socket (not removed)");
  }
  int error = 0;
  const std::optional<bool> live = socketIsLive(path, error);
  if (!live) {
    return unavailable(where, "cannot tell whether the socket is in use: " + errnoText(error));
  }
  if (*live) {
    return unavailable(where, "another server is listening on this socket");
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return unavailable(where, "cannot remove the stale socket: " + errnoText(errno));
  }
  spdlog::info("replaced the stale socket {} (no server was listening on it)", path);
  return {};
}

}  // namespace

void SocketFile::remove() {
  if (path.empty()) {
    return;
  }
  struct stat status {};
  if (::lstat(path.c_str(), &status) == 0 && status.st_dev == device && status.st_ino == inode) {
    ::unlink(path.c_str());
  }
  path.clear();
}

Listener::Listener(Worker& owner, GenericAcceptor acceptor, std::vector<Worker*> targets,
                   std::optional<SocketFile> socket_file)
    : owner_(owner),
      acceptor_(std::move(acceptor)),
      targets_(std::move(targets)),
      socket_file_(std::move(socket_file)),
      tcp_(!socket_file_.has_value()) {}

Listener::~Listener() {
  if (socket_file_) {
    socket_file_->remove();
  }
}

void Listener::accept() {
  Worker& target = *targets_[next_target_];
  next_target_ = next_target_ + 1 == targets_.size() ? 0 : next_target_ + 1;
  // The socket belongs to the target's io_context: its session runs on the target's thread.
  const net::any_io_executor executor = target.ioc.get_executor();
  acceptor_.async_accept(executor,
                         [this, &target](boost::system::error_code ec, GenericSocket socket) {
                           onAccept(ec, std::move(socket), target);
                         });
}

void Listener::close() {
  // The file goes first: while the acceptor is open, no other server takes it for stale.
  if (socket_file_) {
    socket_file_->remove();
  }
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  if (retry_) {
    retry_->cancel();
  }
}

void Listener::onAccept(boost::system::error_code ec, GenericSocket socket, Worker& target) {
  if (ec == net::error::operation_aborted || owner_.stopping) {
    return;
  }
  if (ec) {
    // Typically EMFILE: back off instead of spinning on the error.
    if (!failing_) {
      spdlog::warn("accept on thread {} failing: {}; retrying every {} ms", owner_.index,
                   ec.message(), kAcceptRetryDelay.count());
      failing_ = true;
    }
    retry_.emplace(owner_.ioc);
    retry_->expires_after(kAcceptRetryDelay);
    retry_->async_wait([this](boost::system::error_code wec) {
      if (!wec && !owner_.stopping) {
        accept();
      }
    });
    return;
  }
  if (failing_) {
    spdlog::info("accept on thread {} works again", owner_.index);
    failing_ = false;
  }
  if (&target == &owner_) {
    startSession(target, std::move(socket), tcp_);
  } else {
    net::post(target.ioc, [&target, socket = std::move(socket), tcp = tcp_]() mutable {
      startSession(target, std::move(socket), tcp);
    });
  }
  accept();
}

void Listener::startSession(Worker& worker, GenericSocket socket, bool tcp) {
  boost::system::error_code ignored;
  if (worker.stopping || worker.sessions.size() >= worker.options.max_connections_per_thread) {
    socket.close(ignored);
    return;
  }
  if (tcp) {
    socket.set_option(tcp::no_delay(true), ignored);
  }
  std::make_shared<Session>(std::move(socket), worker)->start();
}

Result<tcp::endpoint> probeListenEndpoint(net::io_context& control, const std::string& host,
                                          std::uint16_t port) {
  const std::string where = ListenAddress::tcp(host, port).toString();
  boost::system::error_code ec;
  tcp::endpoint endpoint;
  auto address = net::ip::make_address(host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, port);
  } else {
    tcp::resolver resolver(control);
    auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec || results.empty()) {
      return makeError(ErrorKind::kUnavailable,
                       "cannot resolve listen address " + where + ": " + ec.message());
    }
    endpoint = results.begin()->endpoint();
  }

  // SO_REUSEPORT would silently share the port with another process of ours; a probe
  // bind without it fails if anyone already listens there.
  tcp::acceptor probe(control);
  probe.open(endpoint.protocol(), ec);
  if (!ec) {
    probe.set_option(net::socket_base::reuse_address(true), ec);
  }
  if (!ec) {
    probe.bind(endpoint, ec);
  }
  if (ec) {
    return unavailable(where, ec.message());
  }
  endpoint.port(probe.local_endpoint().port());
  return endpoint;
}

Result<GenericAcceptor> openSharedAcceptor(net::io_context& ioc, const tcp::endpoint& endpoint,
                                           const std::string& where) {
  const net::generic::stream_protocol::endpoint generic(endpoint);
  boost::system::error_code ec;
  GenericAcceptor acceptor(ioc);
  acceptor.open(generic.protocol(), ec);
  if (!ec) {
    acceptor.set_option(net::socket_base::reuse_address(true), ec);
  }
  if (!ec) {
    acceptor.set_option(ReusePort(true), ec);
  }
  if (!ec) {
    acceptor.bind(generic, ec);
  }
  if (!ec) {
    acceptor.listen(net::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    return unavailable(where, ec.message());
  }
  return acceptor;
}

Result<GenericAcceptor> openUnixAcceptor(net::io_context& ioc, const std::string& path,
                                         unsigned mode, SocketFile& socket_file) {
  const std::string where = ListenAddress::unixSocket(path).toString();
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path)) {
    return unavailable(where, "a unix socket path has 1 to " +
                                  std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
  }
  if (auto cleared = clearSocketPath(path, where); !cleared) {
    return cleared.error();
  }
  const net::generic::stream_protocol::endpoint endpoint(
      net::local::stream_protocol::endpoint{path});
  boost::system::error_code ec;
  GenericAcceptor acceptor(ioc);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) {
    acceptor.bind(endpoint, ec);
  }
  if (ec) {
    return unavailable(where, ec.message());
  }
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) {
    return unavailable(where, errnoText(errno));
  }
  socket_file = SocketFile{path, status.st_dev, status.st_ino};
  // Before listen(): until then a connect() is refused, so nobody gets in under the umask.
  if (::chmod(path.c_str(), static_cast<mode_t>(mode)) != 0) {
    const int error = errno;
    socket_file.remove();
    return unavailable(where, "cannot set its mode: " + errnoText(error));
  }
  acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    socket_file.remove();
    return unavailable(where, ec.message());
  }
  return acceptor;
}

}  // namespace sluice::http
