#include "http/server.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <deque>
#include <optional>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

namespace sluice::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using BeastRequest = bhttp::request<bhttp::string_body>;
using ReusePort = net::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

constexpr std::size_t kReadChunk = 4096;
/// How long the I/O threads outlive the drain timeout for a stop participant.
constexpr std::chrono::seconds kStopParticipantGrace{5};
// After answering a request we refuse (413, 431, 400), the client may still be sending:
// read and discard for a while so that closing does not reset the connection before the
// client has read the answer.
constexpr auto kLingerTimeout = std::chrono::seconds(2);
constexpr std::size_t kMaxLingerBytes = 8 << 20;
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

class Session;

/// Everything one I/O thread owns. Member order matters for destruction: the io_context
/// is destroyed after the I/O objects declared below it and before the session registry
/// and router declared above it (pending handlers may hold sessions that unregister).
struct Worker {
  Worker(const ServerOptions& opts, unsigned idx) : options(opts), index(idx) {}

  const ServerOptions& options;
  unsigned index;
  std::shared_ptr<const Router> router;
  std::vector<Histogram*> latency;  // per route index, then one for unmatched paths
  std::unordered_set<Session*> sessions;
  bool stopping = false;
  net::io_context ioc{1};
  std::optional<tcp::acceptor> acceptor;
  std::optional<net::steady_timer> accept_retry;
  std::optional<net::steady_timer> drain_timer;
  bool accept_failing = false;  // logged once per streak of failures, not per retry
  /// A stop participant (Server::setStopParticipant) still needs this thread.
  bool held = false;
  bool drain_extended = false;

  void accept();
  void beginStop(bool hold);
  void onDrainTimeout(beast::error_code ec);
  void release();
  void stopIfDone();
  void sessionGone(Session* session);
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Worker& worker)
      : worker_(worker),
        options_(worker.options),
        socket_(std::move(socket)),
        buffer_(worker.options.max_header_bytes + worker.options.max_body_bytes + kReadChunk),
        idle_deadline_(socket_.get_executor()),
        request_deadline_(socket_.get_executor()),
        write_deadline_(socket_.get_executor()) {}

  ~Session() { worker_.sessionGone(this); }

  void start() {
    worker_.sessions.insert(this);
    beast::error_code ec;
    auto remote = socket_.remote_endpoint(ec);
    if (!ec) {
      auto address = remote.address();
      if (address.is_v6() && address.to_v6().is_v4_mapped()) {
        address = net::ip::make_address_v4(net::ip::v4_mapped, address.to_v6());
      }
      peer_ = address.to_string();
    }
    doRead();
  }

  /// The server is stopping: close now if idle, else finish what is in flight.
  void shutdown() {
    if (closed_) {
      return;
    }
    if (queue_.empty() && !writing_ && !(reading_ && phase_ == Phase::kRequest)) {
      close();
    }
  }

 private:
  enum class Phase { kIdleWait, kRequest };

  struct Slot {
    std::uint64_t id = 0;
    bool keep_alive = true;
    bool answered = false;
    bool ready = false;
    unsigned version = 11;
    std::size_t route_index = 0;
    Clock::time_point started;
    Response response;
    std::unique_ptr<net::steady_timer> hold_timer;
  };

  /// A deadline on a timer that is re-armed only when it must fire earlier: extending a
  /// deadline (every request does) costs no timer operation; a timer that fires before the
  /// current deadline re-arms itself for it.
  struct Deadline {
    explicit Deadline(const net::any_io_executor& executor) : timer(executor) {}
    net::steady_timer timer;
    Clock::time_point when = Clock::time_point::max();  // max: disarmed
    bool armed = false;
  };

  // ---- reading -------------------------------------------------------------------------

  void doRead() {
    if (closed_ || reading_ || no_more_reads_ || lingering_ ||
        queue_.size() >= options_.max_pipelined) {
      return;
    }
    if (worker_.stopping && buffer_.size() == 0) {
      // Draining: requests already received are served, new ones are not awaited.
      no_more_reads_ = true;
      closeIfDone();
      return;
    }
    reading_ = true;
    if (buffer_.size() > 0) {
      readRequest();
      return;
    }
    phase_ = Phase::kIdleWait;
    updateIdleTimer();
    socket_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->onFirstBytes(ec, n);
                            });
  }

  // The idle deadline runs only while nothing is pending: an answer held for shaping or a
  // slow store must not make the connection look idle.
  void updateIdleTimer() {
    if (!(reading_ && phase_ == Phase::kIdleWait) || closed_) {
      return;
    }
    if (queue_.empty() && !writing_) {
      setDeadline(idle_deadline_, Clock::now() + options_.idle_timeout);
    } else {
      clearDeadline(idle_deadline_);
    }
  }

  void onFirstBytes(beast::error_code ec, std::size_t n) {
    if (lingering_ || closed_) {
      return;
    }
    buffer_.commit(n);
    if (ec) {
      reading_ = false;
      clearDeadline(idle_deadline_);
      if (ec == net::error::eof) {
        no_more_reads_ = true;
        closeIfDone();
      } else {
        close();
      }
      return;
    }
    readRequest();
  }

  void readRequest() {
    phase_ = Phase::kRequest;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
    parser_->body_limit(options_.max_body_bytes);
    clearDeadline(idle_deadline_);
    setDeadline(request_deadline_, Clock::now() + options_.request_timeout);
    bhttp::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->onHeader(ec); });
  }

  void onHeader(beast::error_code ec) {
    if (lingering_ || closed_) {
      return;
    }
    if (ec) {
      onRequest(ec);
      return;
    }
    auto expect = parser_->get()[bhttp::field::expect];
    if (beast::iequals(expect, "100-continue") && !parser_->is_done() && !writing_ &&
        queue_.empty()) {
      writing_ = true;
      net::async_write(socket_, net::buffer(kContinue.data(), kContinue.size()),
                       [self = shared_from_this()](beast::error_code wec, std::size_t) {
                         self->writing_ = false;
                         if (self->closed_ || self->lingering_) {
                           return;
                         }
                         if (wec) {
                           self->close();
                           return;
                         }
                         self->readBody();
                       });
      return;
    }
    readBody();
  }

  void readBody() {
    bhttp::async_read(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->onRequest(ec); });
  }

  void onRequest(beast::error_code ec) {
    if (lingering_ || closed_) {
      return;
    }
    reading_ = false;
    clearDeadline(request_deadline_);
    if (ec) {
      onReadError(ec);
      return;
    }
    BeastRequest req = parser_->release();
    parser_.reset();
    bool keep_alive = req.keep_alive() && !worker_.stopping;
    if (!keep_alive) {
      no_more_reads_ = true;
    }
    Slot& slot = enqueue(keep_alive, req.version());
    dispatch(std::move(req), slot.id);
    doRead();
  }

  void onReadError(beast::error_code ec) {
    if (ec == bhttp::error::end_of_stream) {
      no_more_reads_ = true;
      closeIfDone();
      return;
    }
    unsigned version = parser_ && parser_->get().version() >= 10 ? parser_->get().version() : 11;
    if (ec == bhttp::error::body_limit) {
      refuse(413,
             "body: larger than the limit of " + std::to_string(options_.max_body_bytes) + " bytes",
             version);
    } else if (ec == bhttp::error::header_limit) {
      refuse(431,
             "headers: larger than the limit of " + std::to_string(options_.max_header_bytes) +
                 " bytes",
             version);
    } else if (ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
               ec != bhttp::error::partial_message) {
      refuse(400, "request: malformed HTTP (" + ec.message() + ")", version);
    } else {
      // Network errors, a client gone mid-request, or our deadline closing the socket.
      close();
    }
  }

  /// Answers a request that could not be read, then closes the connection.
  void refuse(int status, const std::string& message, unsigned version) {
    no_more_reads_ = true;
    Slot& slot = enqueue(false, version);
    slot.route_index = worker_.router ? worker_.router->routes().size() : 0;
    complete(slot.id, jsonError(status, message));
  }

  // ---- dispatching -----------------------------------------------------------------------

  Slot& enqueue(bool keep_alive, unsigned version) {
    Slot& slot = queue_.emplace_back();
    slot.id = next_id_++;
    slot.keep_alive = keep_alive;
    slot.version = version;
    slot.started = Clock::now();
    return slot;
  }

  void dispatch(BeastRequest&& req, std::uint64_t id) {
    // One Request per session, refilled in place: its strings keep their capacity.
    Request& request = request_;
    request.method.assign(req.method_string());
    request.target.assign(req.target());
    request.path.assign(request.target, 0, request.target.find('?'));
    std::size_t count = 0;
    for (const auto& field : req) {
      if (count == request.headers.size()) {
        request.headers.emplace_back();
      }
      Header& header = request.headers[count++];
      header.name.assign(field.name_string());
      header.value.assign(field.value());
    }
    request.headers.resize(count);
    request.body = std::move(req.body());
    if (request.peer != peer_) {
      request.peer = peer_;
    }

    const Router& router = *worker_.router;
    Router::Match match = router.route(request.method, request.path);
    slotById(id)->route_index = match.route_index;
    if (match.route == nullptr) {
      Response response;
      if (match.status == 405) {
        response = jsonError(405, "method: " + request.method + " is not allowed on " +
                                      request.path + " (allowed: " + match.allow + ")");
        response.headers.push_back(Header{"Allow", match.allow});
      } else {
        response = jsonError(404, "path: no endpoint " + request.path);
      }
      complete(id, std::move(response));
      return;
    }
    Respond respond = [self = shared_from_this(), id](Response response) {
      self->complete(id, std::move(response));
    };
    try {
      match.route->handler(request_, std::move(respond));
    } catch (const std::exception& e) {
      spdlog::error("handler for {} {} failed: {}", request.method, request.path, e.what());
      complete(id, jsonError(500, "internal error"));
    }
  }

  Slot* slotById(std::uint64_t id) {
    if (queue_.empty() || id < queue_.front().id || id > queue_.back().id) {
      return nullptr;
    }
    return &queue_[static_cast<std::size_t>(id - queue_.front().id)];
  }

  void complete(std::uint64_t id, Response response) {
    if (closed_) {
      return;
    }
    Slot* slot = slotById(id);
    if (slot == nullptr || slot->answered) {
      return;
    }
    slot->answered = true;
    if (slot->route_index < worker_.latency.size()) {
      worker_.latency[slot->route_index]->observe(
          std::chrono::duration<double>(Clock::now() - slot->started).count());
    }
    auto hold = response.hold;
    slot->response = std::move(response);
    if (hold.count() > 0) {
      slot->hold_timer = std::make_unique<net::steady_timer>(socket_.get_executor());
      slot->hold_timer->expires_after(hold);
      slot->hold_timer->async_wait([self = shared_from_this(), id](beast::error_code ec) {
        if (ec || self->closed_) {
          return;
        }
        if (Slot* s = self->slotById(id)) {
          s->ready = true;
          self->maybeWrite();
        }
      });
      return;
    }
    slot->ready = true;
    maybeWrite();
  }

  /// HTTP/1.1 wire format, as Beast would write it: status line, Server, Content-Type,
  /// the response's headers, Connection when it differs from the version's default, and
  /// Content-Length. CR and LF never reach the wire inside a header.
  static void serialize(std::string& out, const Response& response, unsigned version,
                        bool keep_alive) {
    auto number = [&out](std::uint64_t value) {
      std::array<char, 24> digits{};
      auto result = std::to_chars(digits.data(), digits.data() + digits.size(), value);
      out.append(digits.data(), static_cast<std::size_t>(result.ptr - digits.data()));
    };
    auto clean = [&out](std::string_view text) {
      if (text.find_first_of("\r\n") == std::string_view::npos) {
        out += text;
        return;
      }
      for (char c : text) {
        if (c != '\r' && c != '\n') {
          out += c;
        }
      }
    };
    out += version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
    number(static_cast<std::uint64_t>(response.status));
    out += ' ';
    out += reasonPhrase(response.status);
    out += "\r\nServer: sluice\r\nContent-Type: ";
    clean(response.content_type);
    out += "\r\n";
    for (const auto& header : response.headers) {
      clean(header.name);
      out += ": ";
      clean(header.value);
      out += "\r\n";
    }
    out += response.header_lines;
    if (version >= 11 && !keep_alive) {
      out += "Connection: close\r\n";
    } else if (version == 10 && keep_alive) {
      out += "Connection: keep-alive\r\n";
    }
    bool no_body = response.status < 200 || response.status == 204 || response.status == 304;
    if (!no_body) {
      out += "Content-Length: ";
      number(response.body.size());
      out += "\r\n";
    }
    out += "\r\n";
    if (!no_body) {
      out += response.body;
    }
  }

  // ---- writing ---------------------------------------------------------------------------

  /// Writes every answer that is ready at the front of the queue in one write.
  void maybeWrite() {
    if (closed_ || writing_ || queue_.empty() || !queue_.front().ready) {
      return;
    }
    out_.clear();
    write_count_ = 0;
    bool reading_request = reading_ && phase_ == Phase::kRequest;
    for (Slot& slot : queue_) {
      if (!slot.ready) {
        break;
      }
      if (worker_.stopping && write_count_ + 1 == queue_.size() && !reading_request) {
        // The last answer while draining tells the client that the connection ends here.
        slot.keep_alive = false;
      }
      serialize(out_, slot.response, slot.version, slot.keep_alive);
      ++write_count_;
      if (!slot.keep_alive) {
        break;
      }
    }
    writing_ = true;
    updateIdleTimer();  // a request being read keeps its own deadline
    setDeadline(write_deadline_, Clock::now() + options_.write_timeout);
    net::async_write(
        socket_, net::buffer(out_),
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->onWrite(ec); });
  }

  void onWrite(beast::error_code ec) {
    writing_ = false;
    clearDeadline(write_deadline_);
    if (closed_) {
      return;
    }
    if (ec) {
      close();
      return;
    }
    bool keep_alive = true;
    for (std::size_t i = 0; i < write_count_; ++i) {
      keep_alive = keep_alive && queue_.front().keep_alive;
      queue_.pop_front();
    }
    write_count_ = 0;
    if (!keep_alive) {
      gracefulClose();
      return;
    }
    if (closeIfDone()) {
      return;
    }
    maybeWrite();
    doRead();
    updateIdleTimer();
  }

  // ---- closing ---------------------------------------------------------------------------

  /// Closes when nothing is left to answer and nothing more will be read. True if closed.
  bool closeIfDone() {
    bool reading_request = reading_ && phase_ == Phase::kRequest;
    if (queue_.empty() && !writing_ && !reading_request && (no_more_reads_ || worker_.stopping)) {
      gracefulClose();
      return true;
    }
    return false;
  }

  void gracefulClose() {
    if (closed_ || lingering_) {
      return;
    }
    lingering_ = true;
    no_more_reads_ = true;
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    if (ec) {
      close();
      return;
    }
    // A pending read (waiting for the next request) completes as aborted and is ignored.
    socket_.cancel(ec);
    clearDeadline(idle_deadline_);
    setDeadline(request_deadline_, Clock::now() + kLingerTimeout);
    lingerRead();
  }

  void lingerRead() {
    socket_.async_read_some(net::buffer(discard_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->lingered_ += n;
                              if (ec || self->lingered_ > kMaxLingerBytes) {
                                self->close();
                                return;
                              }
                              self->lingerRead();
                            });
  }

  void close() {
    if (closed_) {
      return;
    }
    closed_ = true;
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    idle_deadline_.timer.cancel();
    request_deadline_.timer.cancel();
    write_deadline_.timer.cancel();
    for (auto& slot : queue_) {
      if (slot.hold_timer) {
        slot.hold_timer->cancel();
      }
    }
  }

  // ---- deadlines -------------------------------------------------------------------------

  void setDeadline(Deadline& deadline, Clock::time_point when) {
    deadline.when = when;
    if (deadline.armed && deadline.timer.expiry() <= when) {
      return;  // fires earlier and re-arms itself for `when`
    }
    deadline.armed = true;
    deadline.timer.expires_at(when);  // a pending wait completes as aborted
    deadline.timer.async_wait([self = shared_from_this(), &deadline](beast::error_code ec) {
      if (ec) {
        return;  // replaced by an earlier expiry, or the session closed
      }
      deadline.armed = false;
      if (self->closed_ || deadline.when == Clock::time_point::max()) {
        return;
      }
      if (deadline.when > Clock::now()) {
        self->setDeadline(deadline, deadline.when);
        return;
      }
      // A slow or idle client, a client that does not read, or a linger that ran out.
      self->close();
    });
  }

  static void clearDeadline(Deadline& deadline) { deadline.when = Clock::time_point::max(); }

  Worker& worker_;
  const ServerOptions& options_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  Request request_;
  std::deque<Slot> queue_;
  std::uint64_t next_id_ = 0;
  std::string out_;              // the answers being written
  std::size_t write_count_ = 0;  // how many queued answers out_ holds
  // Separate deadlines, so that each only ever moves later and rarely touches its timer.
  Deadline idle_deadline_;     // waiting for a request's first byte, nothing pending
  Deadline request_deadline_;  // first byte to last of a request; the linger after closing
  Deadline write_deadline_;
  Phase phase_ = Phase::kIdleWait;
  bool reading_ = false;
  bool writing_ = false;
  bool no_more_reads_ = false;
  bool lingering_ = false;
  bool closed_ = false;
  std::size_t lingered_ = 0;
  std::string peer_;
  std::array<char, kReadChunk> discard_{};
};

void Worker::accept() {
  acceptor->async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || stopping) {
      return;
    }
    if (ec) {
      // Typically EMFILE: back off instead of spinning on the error.
      if (!accept_failing) {
        spdlog::warn("accept on thread {} failing: {}; retrying every {} ms", index, ec.message(),
                     kAcceptRetryDelay.count());
        accept_failing = true;
      }
      accept_retry.emplace(ioc);
      accept_retry->expires_after(kAcceptRetryDelay);
      accept_retry->async_wait([this](beast::error_code wec) {
        if (!wec && !stopping) {
          accept();
        }
      });
      return;
    }
    if (accept_failing) {
      spdlog::info("accept on thread {} works again", index);
      accept_failing = false;
    }
    if (sessions.size() >= options.max_connections_per_thread) {
      beast::error_code ignored;
      socket.close(ignored);
    } else {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Session>(std::move(socket), *this)->start();
    }
    accept();
  });
}

void Worker::beginStop(bool hold) {
  if (stopping) {
    return;
  }
  stopping = true;
  held = hold;
  beast::error_code ignored;
  if (acceptor) {
    acceptor->close(ignored);
  }
  if (accept_retry) {
    accept_retry->cancel();
  }
  // shutdown() may close a session, whose destructor runs later from its handlers.
  std::vector<Session*> current(sessions.begin(), sessions.end());
  for (Session* session : current) {
    session->shutdown();
  }
  drain_timer.emplace(ioc);
  drain_timer->expires_after(options.drain_timeout);
  drain_timer->async_wait([this](beast::error_code ec) { onDrainTimeout(ec); });
  stopIfDone();
}

void Worker::onDrainTimeout(beast::error_code ec) {
  if (ec) {
    return;
  }
  if (held && !drain_extended) {
    // The stop participant cancels its own work at the drain timeout and needs this thread
    // a moment longer to answer what it cancelled.
    drain_extended = true;
    drain_timer->expires_after(kStopParticipantGrace);
    drain_timer->async_wait([this](beast::error_code next) { onDrainTimeout(next); });
    return;
  }
  spdlog::warn("thread {}: {} connection(s) still busy after the drain timeout; closing", index,
               sessions.size());
  ioc.stop();
}

void Worker::release() {
  held = false;
  stopIfDone();
}

void Worker::stopIfDone() {
  if (stopping && sessions.empty() && !held) {
    ioc.stop();
  }
}

void Worker::sessionGone(Session* session) {
  sessions.erase(session);
  stopIfDone();
}

}  // namespace

struct Server::Impl {
  Impl(ServerOptions opts, Metrics& m) : options(std::move(opts)), metrics(m) {
    unsigned n = std::max(1u, options.threads);
    for (unsigned i = 0; i < n; ++i) {
      workers.push_back(std::make_unique<Worker>(options, i));
    }
  }

  ServerOptions options;
  Metrics& metrics;
  std::uint16_t bound_port = 0;
  std::atomic<bool> stop_requested{false};
  std::atomic<unsigned> running{0};
  std::function<void(std::function<void()>)> stop_participant;
  net::io_context control{1};
  std::vector<std::unique_ptr<Worker>> workers;
};

Server::Server(ServerOptions options, Metrics& metrics)
    : impl_(std::make_unique<Impl>(std::move(options), metrics)) {}

Server::~Server() = default;

Status Server::listen() {
  const ServerOptions& o = impl_->options;
  std::string where = o.host + ":" + std::to_string(o.port);
  beast::error_code ec;
  tcp::endpoint endpoint;
  auto address = net::ip::make_address(o.host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, o.port);
  } else {
    tcp::resolver resolver(impl_->control);
    auto results = resolver.resolve(o.host, std::to_string(o.port), ec);
    if (ec || results.empty()) {
      return makeError(ErrorKind::kUnavailable,
                       "cannot resolve listen address " + where + ": " + ec.message());
    }
    endpoint = results.begin()->endpoint();
  }

  // SO_REUSEPORT would silently share the port with another process of ours; a probe
  // bind without it fails if anyone already listens there.
  {
    tcp::acceptor probe(impl_->control);
    probe.open(endpoint.protocol(), ec);
    if (!ec) {
      probe.set_option(net::socket_base::reuse_address(true), ec);
    }
    if (!ec) {
      probe.bind(endpoint, ec);
    }
    if (ec) {
      return makeError(ErrorKind::kUnavailable, "cannot listen on " + where + ": " + ec.message());
    }
    endpoint.port(probe.local_endpoint().port());
  }

  for (auto& worker : impl_->workers) {
    tcp::acceptor acceptor(worker->ioc);
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) {
      acceptor.set_option(net::socket_base::reuse_address(true), ec);
    }
    if (!ec) {
      acceptor.set_option(ReusePort(true), ec);
    }
    if (!ec) {
      acceptor.bind(endpoint, ec);
    }
    if (!ec) {
      acceptor.listen(net::socket_base::max_listen_connections, ec);
    }
    if (ec) {
      return makeError(ErrorKind::kUnavailable, "cannot listen on " + where + ": " + ec.message());
    }
    worker->acceptor.emplace(std::move(acceptor));
  }
  impl_->bound_port = endpoint.port();
  return {};
}

std::uint16_t Server::port() const { return impl_->bound_port; }

unsigned Server::threadCount() const { return static_cast<unsigned>(impl_->workers.size()); }

net::io_context& Server::ioContext(unsigned thread) { return impl_->workers.at(thread)->ioc; }

net::io_context& Server::controlContext() { return impl_->control; }

void Server::setRouter(unsigned thread, std::shared_ptr<const Router> router) {
  Worker& worker = *impl_->workers.at(thread);
  worker.latency.clear();
  for (const auto& route : router->routes()) {
    worker.latency.push_back(
        &impl_->metrics.histogram("http_request_duration_seconds", {{"endpoint", route.pattern}}));
  }
  worker.latency.push_back(&impl_->metrics.histogram(
      "http_request_duration_seconds", {{"endpoint", std::string(kUnmatchedEndpoint)}}));
  worker.router = std::move(router);
}

void Server::run() {
  Impl& impl = *impl_;
  auto guard = net::make_work_guard(impl.control);
  std::vector<std::thread> threads;
  impl.running = static_cast<unsigned>(impl.workers.size());
  for (auto& worker : impl.workers) {
    if (!worker->acceptor || !worker->router) {
      spdlog::error("Server::run() needs listen() and setRouter() for every thread");
      return;
    }
  }
  for (auto& worker : impl.workers) {
    worker->accept();
    threads.emplace_back([&impl, w = worker.get()] {
      for (;;) {
        try {
          w->ioc.run();
          break;
        } catch (const std::exception& e) {
          spdlog::error("I/O thread {}: unexpected exception: {}", w->index, e.what());
        }
      }
      if (--impl.running == 0) {
        net::post(impl.control, [&impl] { impl.control.stop(); });
      }
    });
  }
  impl.control.run();
  for (auto& thread : threads) {
    thread.join();
  }
}

void Server::setStopParticipant(std::function<void(std::function<void()> release)> begin) {
  impl_->stop_participant = std::move(begin);
}

void Server::stop() {
  if (impl_->stop_requested.exchange(true)) {
    return;
  }
  const bool hold = static_cast<bool>(impl_->stop_participant);
  for (auto& worker : impl_->workers) {
    net::post(worker->ioc, [w = worker.get(), hold] { w->beginStop(hold); });
  }
  if (hold) {
    impl_->stop_participant([impl = impl_.get()] {
      for (auto& worker : impl->workers) {
        net::post(worker->ioc, [w = worker.get()] { w->release(); });
      }
    });
  }
}

}  // namespace sluice::http
