#include "http/session.hpp"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/read.hpp>
#include <cstring>
#include <exception>
#include <tuple>
#include <utility>

#include "http/plain_request.hpp"
#include "http/worker.hpp"
#include "sluice/common/drain_aware_read.hpp"

namespace sluice::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

// After answering a request we refuse (413, 431, 400), the client may still be sending:
// read and discard for a while so that closing does not reset the connection before the
// client has read the answer.
constexpr auto kLingerTimeout = std::chrono::seconds(2);
constexpr std::size_t kMaxLingerBytes = 8 << 20;
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace

Session::Session(net::generic::stream_protocol::socket socket, Worker& worker)
    : worker_(worker),
      options_(worker.options),
      socket_(std::move(socket)),
      buffer_(worker.options.max_header_bytes + worker.options.max_body_bytes + kReadChunk),
      idle_deadline_(socket_.get_executor()),
      request_deadline_(socket_.get_executor()),
      write_deadline_(socket_.get_executor()) {}

Session::~Session() { worker_.sessionGone(this); }

void Session::start() {
  worker_.sessions.insert(this);
  beast::error_code ec;
  const auto remote = socket_.remote_endpoint(ec);
  if (!ec && remote.protocol().family() == AF_UNIX) {
    peer_ = kUnixSocketPeer;
  } else if (!ec && remote.size() <= sizeof(sockaddr_in6)) {
    tcp::endpoint ip;
    std::memcpy(ip.data(), remote.data(), remote.size());
    ip.resize(remote.size());
    auto address = ip.address();
    if (address.is_v6() && address.to_v6().is_v4_mapped()) {
      address = net::ip::make_address_v4(net::ip::v4_mapped, address.to_v6());
    }
    peer_ = address.to_string();
  }
  // Answers are sent with a non-blocking send first (maybeWrite()); Asio's asynchronous
  // operations work the same on a non-blocking socket.
  socket_.non_blocking(true, ec);
  send_inline_ = !ec;
  // The wait for the next request then costs no failed read (sluice/common/drain_aware_read.hpp).
  drain_aware_ = enableDrainAwareReads(socket_);
  doRead();
}

void Session::shutdown() {
  if (closed_) {
    return;
  }
  if (queue_.empty() && !writing_ && !(reading_ && phase_ == Phase::kRequest)) {
    close();
  }
}

// ---- reading ------------------------------------------------------------------------

void Session::doRead() {
  if (closed_ || reading_ || no_more_reads_ || lingering_ || dispatching_ ||
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
  asyncReadSomeDrainAware(socket_, drain_aware_, buffer_.prepare(kReadChunk),
                          [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                            self->onFirstBytes(ec, n);
                          });
}

// The idle deadline runs only while nothing is pending: an answer held for shaping or a
// slow store must not make the connection look idle.
void Session::updateIdleTimer() {
  if (!(reading_ && phase_ == Phase::kIdleWait) || closed_) {
    return;
  }
  if (queue_.empty() && !writing_) {
    // Right after an answer completed in the same handOn() (the usual case), its time is
    // now to within microseconds: a deadline of seconds needs no fresher reading.
    const Clock::time_point now =
        handing_on_ && answered_at_ != Clock::time_point{} ? answered_at_ : Clock::now();
    setDeadline(idle_deadline_, now + options_.idle_timeout);
  } else {
    clearDeadline(idle_deadline_);
  }
}

void Session::onFirstBytes(beast::error_code ec, std::size_t n) {
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

void Session::readRequest() {
  phase_ = Phase::kRequest;
  if (!parsing_inline_) {
    // The usual case: a plain request, all of it in the buffer, read without Beast's parser
    // (plain_request.hpp); anything else, or a request still arriving, is Beast's below.
    // Into the thread's request (worker.hpp), which every connection's plain requests
    // reuse: its strings stay in the cache, where one per connection would not. Its header
    // fields view buffer_ in place: consume() only moves the buffer's start, and nothing is
    // read into it before the handler has returned (doRead() waits for handOn()).
    unsigned version = 11;
    bool keep_alive = true;
    const auto data = buffer_.data();
    const std::size_t used =
        parsePlainRequest(std::string_view(static_cast<const char*>(data.data()), data.size()),
                          PlainLimits{options_.max_header_bytes, options_.max_body_bytes},
                          worker_.plain_request, version, keep_alive);
    if (used > 0) {
      buffer_.consume(used);
      clearDeadline(idle_deadline_);
      reading_ = false;
      // As below: a pipelined request behind this one is read by Beast's asynchronous read,
      // whose completion is posted, so that a buffer full of them does not recurse.
      parsing_inline_ = true;
      handOn(worker_.plain_request, version, keep_alive);
      parsing_inline_ = false;
      return;
    }
  }
  // The previous request has been answered or handed on: request_ can be refilled.
  parser_.reset();
  parser_.emplace(request_);
  parser_->header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
  parser_->body_limit(options_.max_body_bytes);
  clearDeadline(idle_deadline_);
  if (!parsing_inline_) {
    // The usual case: the whole header (and body) arrived with the first bytes. Parse it
    // here rather than through async_read_header and async_read, which would do the same
    // and then post their completions (two trips through the scheduler per request).
    parsing_inline_ = true;
    beast::error_code ec;
    bool header_done = parseBuffered(
        false, [this] { return parser_->is_header_done(); }, ec);
    if (header_done) {
      // The request deadline is not armed: whatever was read of it is in the buffer
      // already; readBody() arms it if the body has to be waited for.
      onHeader(ec);
      parsing_inline_ = false;
      return;
    }
    parsing_inline_ = false;
  }
  setDeadline(request_deadline_, Clock::now() + options_.request_timeout);
  bhttp::async_read_header(
      socket_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->onHeader(ec); });
}

/// Feeds the buffered bytes to the parser, as Beast's read operations begin by doing, until
/// `done()`. True when done or on a parse error (`ec`); false when more bytes are needed:
/// Beast's asynchronous read then goes on from the parser's state (the bytes parsed so far
/// are consumed from the buffer), so errors and limits are those of Beast's reads.
template <typename Done>
bool Session::parseBuffered(bool eager, Done done, beast::error_code& ec) {
  parser_->eager(eager);
  while (!done()) {
    if (buffer_.size() == 0) {
      return false;
    }
    std::size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (ec == bhttp::error::need_more) {
      ec = {};
      return false;
    }
    if (ec) {
      return true;
    }
    if (used == 0) {
      return false;
    }
  }
  return true;
}

void Session::onHeader(beast::error_code ec) {
  if (lingering_ || closed_) {
    return;
  }
  if (ec) {
    onRequest(ec);
    return;
  }
  if (parser_->is_done()) {
    onRequest(ec);  // no body, or all of it came with the header
    return;
  }
  std::string_view expect = request_.header("Expect");
  if (beast::iequals(expect, "100-continue") && !writing_ && queue_.empty()) {
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

void Session::readBody() {
  beast::error_code ec;
  if (parseBuffered(
          true, [this] { return parser_->is_done(); }, ec)) {
    onRequest(ec);
    return;
  }
  if (request_deadline_.when == Clock::time_point::max()) {
    setDeadline(request_deadline_, Clock::now() + options_.request_timeout);
  }
  bhttp::async_read(
      socket_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->onRequest(ec); });
}

void Session::onRequest(beast::error_code ec) {
  if (lingering_ || closed_) {
    return;
  }
  reading_ = false;
  clearDeadline(request_deadline_);
  if (ec) {
    onReadError(ec);
    return;
  }
  const unsigned version = parser_->version();
  const bool keep_alive = parser_->keepAlive();
  parser_.reset();
  handOn(request_, version, keep_alive);
}

void Session::handOn(Request& request, unsigned version, bool keep_alive) {
  {
    // The request is refilled by the next request's parser: that read waits for the end of
    // this block (doRead()), also when an answer is written at once (maybeWrite()).
    dispatching_ = true;
    keep_alive = keep_alive && !worker_.stopping;
    if (!keep_alive) {
      no_more_reads_ = true;
    }
    QueuedResponse& entry = enqueue(keep_alive, version);
    handing_on_ = true;
    answered_at_ = {};
    dispatch(request, entry.id);
  }
  dispatching_ = false;
  doRead();
  handing_on_ = false;
}

void Session::onReadError(beast::error_code ec) {
  if (ec == bhttp::error::end_of_stream) {
    no_more_reads_ = true;
    closeIfDone();
    return;
  }
  unsigned version = parser_ && parser_->version() >= 10 ? parser_->version() : 11;
  if (ec == bhttp::error::body_limit) {
    refuse(413,
           "body: larger than the limit of " + std::to_string(options_.max_body_bytes) + " bytes",
           version);
  } else if (ec == bhttp::error::header_limit) {
    refuse(
        431,
        "headers: larger than the limit of " + std::to_string(options_.max_header_bytes) + " bytes",
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
void Session::refuse(int status, const std::string& message, unsigned version) {
  no_more_reads_ = true;
  QueuedResponse& entry = enqueue(false, version);
  entry.route_index = worker_.router ? worker_.router->routes().size() : 0;
  complete(entry.id, jsonError(status, message));
}

// ---- dispatching --------------------------------------------------------------------

QueuedResponse& Session::enqueue(bool keep_alive, unsigned version) {
  return queue_.push(keep_alive, version, Clock::now());
}

void Session::dispatch(Request& request, std::uint64_t id) {
  // The parser filled method, target, headers and body (request_parser.hpp, plain_request.hpp).
  // clear() and append() keep path's capacity without assign()'s general replace.
  const std::string_view target = request.target;
  request.path.clear();
  request.path.append(target.data(), std::min(target.size(), target.find('?')));
  if (request.peer != peer_) {
    request.peer = peer_;
  }

  const Router& router = *worker_.router;
  Router::Match match = router.route(request.method, request.path);
  queue_.find(id)->route_index = match.route_index;
  if (match.route == nullptr) {
    Response response;
    if (match.status == 405) {
      response = jsonError(405, "method: " + request.method + " is not allowed on " + request.path +
                                    " (allowed: " + match.allow + ")");
      response.headers.push_back(Header{"Allow", match.allow});
    } else {
      response = jsonError(404, "path: no endpoint " + request.path);
    }
    complete(id, std::move(response));
    return;
  }
  // The session keeps itself alive while a handler holds an answer of it: the Respond is
  // then a pointer and a number, which std::function stores without allocating.
  ++unanswered_;
  Respond respond = [this, id](Response&& response) { onHandlerAnswer(id, std::move(response)); };
  try {
    match.route->handler(request, std::move(respond));
  } catch (const std::exception& e) {
    spdlog::error("handler for {} {} failed: {}", request.method, request.path, e.what());
    onHandlerAnswer(id, jsonError(500, "internal error"));
  }
  // Taken once the handler returns with an answer still owed, not before the call: the
  // usual answer comes within it (the memory store), and no reference is taken and dropped
  // for it. Until then the caller keeps the session alive (dispatch() runs in a completion
  // handler that holds it, or within onHandlerAnswer(), which holds the last reference), and
  // an answer owed can only come later on this thread.
  if (unanswered_ > 0 && !pending_self_) {
    pending_self_ = shared_from_this();
  }
}

void Session::onHandlerAnswer(std::uint64_t id, Response&& response) {
  QueuedResponse* entry = queue_.find(id);
  if (entry == nullptr || entry->answered) {
    return;
  }
  std::shared_ptr<Session> last;  // the last answer a handler owed: release the session after
  if (--unanswered_ == 0) {
    last = std::move(pending_self_);
  }
  complete(id, std::move(response));
}

void Session::complete(std::uint64_t id, Response&& response) {
  if (closed_) {
    return;
  }
  QueuedResponse* entry = queue_.find(id);
  if (entry == nullptr || entry->answered) {
    return;
  }
  entry->answered = true;
  const Clock::time_point now = Clock::now();
  answered_at_ = now;
  if (entry->route_index < worker_.latency.size()) {
    worker_.latency[entry->route_index]->observe(
        std::chrono::duration<double>(now - entry->started).count());
  }
  auto hold = response.hold;
  // A place whose written answer kept its storage (the thread had spares enough) gives it to
  // the thread's next answers.
  recycleResponse(std::move(entry->response));
  entry->response = std::move(response);
  if (hold.count() > 0) {
    entry->hold_timer = std::make_unique<net::steady_timer>(socket_.get_executor());
    entry->hold_timer->expires_after(hold);
    entry->hold_timer->async_wait([self = shared_from_this(), id](beast::error_code ec) {
      if (ec || self->closed_) {
        return;
      }
      if (QueuedResponse* s = self->queue_.find(id)) {
        s->ready = true;
        self->maybeWrite();
      }
    });
    return;
  }
  entry->ready = true;
  maybeWrite();
}

// ---- writing ------------------------------------------------------------------------

/// Writes every answer that is ready at the front of the queue in one write.
void Session::maybeWrite() {
  if (closed_ || writing_ || !queue_.frontReady()) {
    return;
  }
  // Written into the thread's buffer (worker.hpp), which stays in the cache; only what the
  // kernel does not take at once moves to the connection's own out_. The buffer keeps its
  // size from write to write (its first `length` bytes are this write's): it is not filled
  // with zeros for each answer before the answer is written over them.
  std::string& out = worker_.out;
  std::size_t length = 0;
  bool reading_request = reading_ && phase_ == Phase::kRequest;
  write_count_ = queue_.writeReady(out, length, worker_.stopping && !reading_request);
  writing_ = true;
  updateIdleTimer();  // a request being read keeps its own deadline
  // The socket is non-blocking (start()): send now, as async_write would begin by doing, and
  // finish here when the kernel took it all (the usual case), without posting a completion.
  beast::error_code ec;
  std::size_t sent = 0;
  if (send_inline_) {
    sent = socket_.write_some(net::buffer(out.data(), length), ec);
    if (ec == net::error::would_block || ec == net::error::try_again) {
      ec = {};
      sent = 0;
    }
    if (ec || sent == length) {
      onWrite(ec);
      return;
    }
  }
  out_.assign(out, sent, length - sent);
  setDeadline(write_deadline_, Clock::now() + options_.write_timeout);
  net::async_write(
      socket_, net::buffer(out_),
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->onWrite(ec); });
}

void Session::onWrite(beast::error_code ec) {
  writing_ = false;
  clearDeadline(write_deadline_);
  if (closed_) {
    return;
  }
  if (ec) {
    close();
    return;
  }
  bool keep_alive = queue_.popWritten(write_count_);
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

// ---- closing ------------------------------------------------------------------------

/// Closes when nothing is left to answer and nothing more will be read. True if closed.
bool Session::closeIfDone() {
  bool reading_request = reading_ && phase_ == Phase::kRequest;
  if (queue_.empty() && !writing_ && !reading_request && (no_more_reads_ || worker_.stopping)) {
    gracefulClose();
    return true;
  }
  return false;
}

void Session::gracefulClose() {
  if (closed_ || lingering_) {
    return;
  }
  lingering_ = true;
  no_more_reads_ = true;
  beast::error_code ec;
  socket_.shutdown(net::socket_base::shutdown_send, ec);
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

void Session::lingerRead() {
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

void Session::close() {
  if (closed_) {
    return;
  }
  closed_ = true;
  beast::error_code ec;
  socket_.shutdown(net::socket_base::shutdown_both, ec);
  socket_.close(ec);
  idle_deadline_.timer.cancel();
  request_deadline_.timer.cancel();
  write_deadline_.timer.cancel();
  queue_.cancelHolds();
}

// ---- deadlines ----------------------------------------------------------------------

void Session::setDeadline(Deadline& deadline, Clock::time_point when) {
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

}  // namespace sluice::http
