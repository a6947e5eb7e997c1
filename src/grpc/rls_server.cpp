#include "sluice/grpc/rls_server.hpp"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/basic_socket_acceptor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "grpc/rls_session.hpp"
#include "grpc/unix_socket.hpp"

namespace sluice::grpc {
namespace {

using tcp = net::ip::tcp;
using GenericAcceptor = net::basic_socket_acceptor<net::generic::stream_protocol>;

constexpr std::string_view kUnixPrefix = "unix:";
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);
/// After the drain, how long shutdown() waits for the I/O threads to close what is left.
constexpr auto kCloseWait = std::chrono::seconds(2);

/// "HOST:PORT" or "[V6]:PORT" into host and port.
std::optional<std::pair<std::string, std::string>> splitHostPort(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return std::nullopt;
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::make_pair(host.empty() ? std::string("0.0.0.0") : host, address.substr(colon + 1));
}

}  // namespace

/// Accepts on one address and hands the connections to the I/O threads in turn.
class RlsAcceptor {
 public:
  RlsAcceptor(GenericAcceptor acceptor, std::shared_ptr<RlsShared> shared, bool tcp)
      : acceptor_(std::move(acceptor)),
        shared_(std::move(shared)),
        retry_(acceptor_.get_executor()),
        tcp_(tcp) {}

  void accept() {
    IoSlot& target = *shared_->slots[next_];
    next_ = (next_ + 1) % shared_->slots.size();
    acceptor_.async_accept(target.io->get_executor(),
                           [this, &target](boost::system::error_code ec, GenericSocket socket) {
                             onAccept(ec, std::move(socket), target);
                           });
  }

  void close() {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
  }

 private:
  void onAccept(boost::system::error_code ec, GenericSocket socket, IoSlot& target) {
    if (ec == net::error::operation_aborted || shared_->stopping) {
      return;
    }
    if (ec) {
      if (!failing_) {
        spdlog::warn("gRPC: accept failing: {}; retrying every {} ms", ec.message(),
                     kAcceptRetryDelay.count());
        failing_ = true;
      }
      retry_.expires_after(kAcceptRetryDelay);
      retry_.async_wait([this](boost::system::error_code wec) {
        if (!wec && !shared_->stopping) {
          accept();
        }
      });
      return;
    }
    failing_ = false;
    if (tcp_) {
      boost::system::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
    }
    net::post(*target.io, [shared = shared_, &target, socket = std::move(socket)]() mutable {
      if (shared->stopping) {
        return;
      }
      std::make_shared<RlsSession>(std::move(socket), shared, target)->start();
    });
    accept();
  }

  GenericAcceptor acceptor_;
  std::shared_ptr<RlsShared> shared_;
  std::size_t next_ = 0;
  net::steady_timer retry_;
  bool tcp_;
  bool failing_ = false;
};

struct RlsServer::Impl {
  Impl(RlsServerOptions options, std::vector<RlsWorker> workers, Metrics& metrics)
      : shared(std::make_shared<RlsShared>(std::move(options), std::move(workers), metrics)) {}

  /// Runs `job` on every I/O thread and waits (at most `limit`) until all have run it.
  bool onEveryThread(const std::function<void(IoSlot&)>& job, std::chrono::milliseconds limit) {
    auto remaining = std::make_shared<std::pair<std::mutex, std::size_t>>();
    auto done = std::make_shared<std::condition_variable>();
    remaining->second = shared->slots.size();
    for (auto& slot : shared->slots) {
      net::post(*slot->io, [slot = slot.get(), job, remaining, done] {
        job(*slot);
        std::lock_guard lock(remaining->first);
        if (--remaining->second == 0) {
          done->notify_all();
        }
      });
    }
    std::unique_lock lock(remaining->first);
    return done->wait_for(lock, limit, [&] { return remaining->second == 0; });
  }

  // The server's own I/O thread (without serve_on_workers) goes last, after the I/O objects
  // bound to it.
  std::unique_ptr<net::io_context> own_io;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> own_guard;
  std::thread own_thread;
  std::shared_ptr<RlsShared> shared;
  std::vector<std::unique_ptr<RlsAcceptor>> acceptors;
  std::vector<std::string> addresses;
  struct OwnedSocket {
    std::string path;
    dev_t device = 0;
    ino_t inode = 0;
  };
  std::vector<OwnedSocket> owned_sockets;
  std::mutex mutex;
  bool started = false;
  bool shut_down = false;
  // The TLS files' watcher: a thread of its own (reading files is no I/O thread's work).
  std::thread tls_watcher;
  std::mutex tls_mutex;
  std::condition_variable tls_wake;
  bool tls_stop = false;

  /// The I/O threads that serve connections: the workers', or one of the server's own.
  void makeSlots() {
    if (shared->options.serve_on_workers) {
      for (std::size_t i = 0; i < shared->workers.size(); ++i) {
        auto slot = std::make_unique<IoSlot>();
        slot->io = shared->workers[i].io;
        slot->worker = static_cast<int>(i);
        shared->slots.push_back(std::move(slot));
      }
      return;
    }
    own_io = std::make_unique<net::io_context>(1);
    auto slot = std::make_unique<IoSlot>();
    slot->io = own_io.get();
    shared->slots.push_back(std::move(slot));
  }

  static Error listenError(const std::string& address, const std::string& why) {
    return makeError(ErrorKind::kUnavailable,
                     "--grpc-listen: cannot listen on " + address + ": " + why);
  }

  /// unix:/PATH: bound, given its file mode before listen(), remembered for removal.
  Status listenUnix(const std::string& address) {
    boost::system::error_code ec;
    GenericAcceptor acceptor(*shared->slots.front()->io);
    const std::string path = address.substr(kUnixPrefix.size());
    if (auto status = prepareUnixSocketPath(path); !status) {
      return makeError(ErrorKind::kUnavailable, "--grpc-listen: " + status.error().message);
    }
    const net::generic::stream_protocol::endpoint endpoint(
        net::local::stream_protocol::endpoint{path});
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) {
      acceptor.bind(endpoint, ec);
    }
    if (ec) {
      return listenError(address, ec.message());
    }
    struct stat info {};
    if (::lstat(path.c_str(), &info) == 0) {
      owned_sockets.push_back({path, info.st_dev, info.st_ino});
    }
    // Before listen(): until then a connect() is refused, so nobody gets in under the umask.
    if (::chmod(path.c_str(), static_cast<mode_t>(shared->options.unix_mode)) != 0) {
      spdlog::warn("gRPC: cannot chmod {:o} {}", shared->options.unix_mode, path);
    }
    acceptor.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return listenError(address, ec.message());
    }
    addresses.push_back(address);
    acceptors.push_back(std::make_unique<RlsAcceptor>(std::move(acceptor), shared, false));
    return {};
  }

  /// HOST:PORT (port 0: the one the system chose is the address given back).
  Status listenTcp(const std::string& address) {
    boost::system::error_code ec;
    net::io_context& accept_io = *shared->slots.front()->io;
    GenericAcceptor acceptor(accept_io);
    auto parts = splitHostPort(address);
    if (!parts) {
      return listenError(address, "expected HOST:PORT or unix:/PATH");
    }
    tcp::resolver resolver(accept_io);
    auto results = resolver.resolve(parts->first, parts->second, ec);
    if (ec || results.empty()) {
      return listenError(address, "cannot resolve: " + ec.message());
    }
    const tcp::endpoint endpoint = results.begin()->endpoint();
    const net::generic::stream_protocol::endpoint generic(endpoint);
    acceptor.open(generic.protocol(), ec);
    if (!ec) {
      // SO_REUSEADDR (TIME_WAIT), never SO_REUSEPORT: a port in use fails here.
      acceptor.set_option(net::socket_base::reuse_address(true), ec);
    }
    if (!ec) {
      acceptor.bind(generic, ec);
    }
    if (!ec) {
      acceptor.listen(net::socket_base::max_listen_connections, ec);
    }
    if (ec) {
      return listenError(address, ec.message());
    }
    if (parts->second == "0") {
      const auto local = acceptor.local_endpoint(ec);
      tcp::endpoint bound;
      std::memcpy(bound.data(), local.data(), local.size());
      bound.resize(local.size());
      addresses.push_back(address.substr(0, address.size() - 1) + std::to_string(bound.port()));
    } else {
      addresses.push_back(address);
    }
    acceptors.push_back(std::make_unique<RlsAcceptor>(std::move(acceptor), shared, true));
    return {};
  }

  void watchTls() {
    const TlsFiles files = *shared->options.tls;
    std::string stamp = tlsFilesStamp(files);
    std::string rejected;
    std::unique_lock lock(tls_mutex);
    while (!tls_wake.wait_for(lock, shared->options.tls_reload_interval,
                              [this] { return tls_stop; })) {
      const std::string now = tlsFilesStamp(files);
      if (now == stamp || now == rejected) {
        continue;
      }
      auto context = makeServerTlsContext(files);
      if (!context) {
        // Often a rotation half done (the certificate written, not yet its key): tried
        // again when the files change next.
        spdlog::warn("gRPC TLS: the changed files do not load, keeping the previous ones: {}",
                     context.error().message);
        shared->tls_rejected->inc();
        rejected = now;
        continue;
      }
      {
        std::lock_guard swap(shared->mutex);
        shared->tls_context = std::move(*context);
      }
      stamp = now;
      rejected.clear();
      shared->tls_reloaded->inc();
      spdlog::info("gRPC TLS: reloaded {} and {}{}; new connections use them", files.cert_file,
                   files.key_file,
                   files.client_ca_file.empty() ? "" : " and " + files.client_ca_file);
    }
  }
};

RlsServer::RlsServer(RlsServerOptions options, std::vector<RlsWorker> workers, Metrics& metrics)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(workers), metrics)) {}

RlsServer::~RlsServer() { shutdown(); }

Status RlsServer::start() {
  Impl& impl = *impl_;
  RlsShared& shared = *impl.shared;
  if (shared.workers.empty()) {
    return makeError(ErrorKind::kInternal, "gRPC: no I/O thread to decide on");
  }
  if (shared.options.tls) {
    auto context = makeServerTlsContext(*shared.options.tls);
    if (!context) {
      return context.error();
    }
    shared.tls_context = std::move(*context);
  }
  impl.makeSlots();
  for (const std::string& address : shared.options.listen) {
    Status listening =
        address.starts_with(kUnixPrefix) ? impl.listenUnix(address) : impl.listenTcp(address);
    if (!listening) {
      return listening;
    }
  }
  for (auto& acceptor : impl.acceptors) {
    acceptor->accept();
  }
  if (impl.own_io) {
    impl.own_guard.emplace(impl.own_io->get_executor());
    impl.own_thread = std::thread([io = impl.own_io.get()] { io->run(); });
  }
  if (shared.options.tls) {
    impl.tls_watcher = std::thread([&impl] { impl.watchTls(); });
  }
  {
    std::lock_guard lock(impl.mutex);
    impl.started = true;
  }
  setServing(true);
  return {};
}

std::vector<std::string> RlsServer::addresses() const { return impl_->addresses; }

void RlsServer::setServing(bool serving) {
  Impl& impl = *impl_;
  std::lock_guard lock(impl.mutex);
  if (!impl.started || impl.shut_down) {
    return;
  }
  if (impl.shared->state.serving.exchange(serving) == serving) {
    return;
  }
  for (auto& slot : impl.shared->slots) {
    net::post(*slot->io, [slot = slot.get()] {
      std::vector<RlsSession*> sessions(slot->sessions.begin(), slot->sessions.end());
      for (RlsSession* session : sessions) {
        session->healthChanged();
      }
    });
  }
}

void RlsServer::shutdown() {
  Impl& impl = *impl_;
  {
    std::lock_guard lock(impl.mutex);
    if (impl.shut_down || !impl.started) {
      impl.shut_down = true;
      return;
    }
    impl.shut_down = true;
  }
  RlsShared& shared = *impl.shared;
  shared.state.serving = false;
  shared.stopping = true;
  if (impl.tls_watcher.joinable()) {
    {
      std::lock_guard lock(impl.tls_mutex);
      impl.tls_stop = true;
    }
    impl.tls_wake.notify_all();
    impl.tls_watcher.join();
  }
  // The socket files go first: while the acceptor is open, no other server takes them for
  // stale.
  for (const auto& socket : impl.owned_sockets) {
    struct stat info {};
    if (::lstat(socket.path.c_str(), &info) == 0 && info.st_dev == socket.device &&
        info.st_ino == socket.inode) {
      ::unlink(socket.path.c_str());
    }
  }
  impl.owned_sockets.clear();
  // GOAWAY everywhere; the calls received are served until the drain timeout.
  impl.onEveryThread(
      [&impl](IoSlot& slot) {
        if (&slot == impl.shared->slots.front().get()) {
          for (auto& acceptor : impl.acceptors) {
            acceptor->close();
          }
        }
        std::vector<RlsSession*> sessions(slot.sessions.begin(), slot.sessions.end());
        for (RlsSession* session : sessions) {
          session->goAway();
        }
      },
      shared.options.drain_timeout);
  {
    std::unique_lock lock(shared.mutex);
    shared.changed.wait_for(lock, shared.options.drain_timeout,
                            [&shared] { return shared.live_sessions == 0; });
  }
  impl.onEveryThread(
      [](IoSlot& slot) {
        std::vector<RlsSession*> sessions(slot.sessions.begin(), slot.sessions.end());
        for (RlsSession* session : sessions) {
          session->close();
        }
      },
      kCloseWait);
  if (impl.own_io) {
    impl.own_guard.reset();
    impl.own_io->stop();
    impl.own_thread.join();
  }
}

void describeGrpcMetrics(Metrics& metrics) {
  metrics.describe(kCallsMetric, Metrics::Type::kCounter,
                   "gRPC ShouldRateLimit calls by the status code their client saw (OK includes "
                   "OVER_LIMIT answers).");
  metrics.describe(kCancelledMetric, Metrics::Type::kCounter,
                   "gRPC ShouldRateLimit calls the client gave up on (cancel, deadline, lost "
                   "connection) before their answer, by stage: queued (not decided, nothing "
                   "charged) or deciding (the store's decision stands; the answer is dropped).");
  metrics.describe(kTlsReloadsMetric, Metrics::Type::kCounter,
                   "Changes of the gRPC listener's TLS files seen, by result: reloaded (new "
                   "connections use them) or rejected (they did not load; the previous ones "
                   "stay in use).");
  metrics.describe(kInFlightMetric, Metrics::Type::kGauge,
                   "gRPC ShouldRateLimit calls received and not answered yet.");
}

}  // namespace sluice::grpc
