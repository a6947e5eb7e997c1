#include "grpc/rls_session.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <functional>

#include "grpc/proto_wire.hpp"
#include "sluice/common/drain_aware_read.hpp"

namespace sluice::grpc {
namespace {

/// Output a connection may have queued before it stops reading its client.
constexpr std::size_t kMaxPendingOutput = 1 << 20;

StatusCode statusCodeOf(const Error& error) {
  switch (error.kind) {
    case ErrorKind::kInvalidArgument:
      return StatusCode::kInvalidArgument;
    default:
      // The store failed (timeout, connection, script) with --failure-mode closed, or the
      // server is not ready: UNAVAILABLE, so that Envoy's failure_mode_deny applies.
      return StatusCode::kUnavailable;
  }
}

}  // namespace

RlsSession::RlsSession(GenericSocket socket, std::shared_ptr<RlsShared> shared, IoSlot& slot)
    : shared_(std::move(shared)),
      slot_(slot),
      socket_(std::move(socket)),
      timer_(socket_.get_executor()),
      connection_(*this, shared_->state, shared_->limits, Clock::now()) {
  if (auto context = shared_->currentTls()) {
    tls_context_ = std::move(context);
    tls_.emplace(std::move(socket_), *tls_context_);
  }
}

void RlsSession::start() {
  slot_.sessions.insert(this);
  {
    std::lock_guard lock(shared_->mutex);
    ++shared_->live_sessions;
  }
  boost::system::error_code ec;
  socket().non_blocking(true, ec);
  // Plaintext: the wait for the next call costs no failed read
  // (sluice/common/drain_aware_read.hpp).
  drain_aware_ = !tls_ && enableDrainAwareReads(socket_);
  const auto now = Clock::now();
  age_at_ = now + shared_->options.max_connection_age;
  if (tls_) {
    // The handshake has the request timeout; HTTP/2 starts once it is done.
    handshake_until_ = now + shared_->options.request_timeout;
    armTimer();
    tls_->async_handshake(
        net::ssl::stream_base::server,
        [self = shared_from_this()](boost::system::error_code hec) { self->onHandshake(hec); });
    return;
  }
  begin();
}

void RlsSession::onHandshake(boost::system::error_code ec) {
  handshake_until_.reset();
  if (closed_) {
    return;
  }
  if (ec) {
    // A client without a valid certificate, a wrong SAN, not TLS at all: logged at debug
    // (a scanner must not fill the log), refused.
    spdlog::debug("gRPC: TLS handshake refused: {}", ec.message());
    close();
    return;
  }
  begin();
}

void RlsSession::begin() {
  if (shared_->stopping) {
    connection_.goAway();
  }
  flush();
  armTimer();
  doRead();
}

void RlsSession::goAway() {
  connection_.goAway();
  flush();
  closeIfDone();
}

void RlsSession::healthChanged() {
  connection_.healthChanged();
  flush();
}

void RlsSession::close() {
  if (closed_) {
    return;
  }
  closed_ = true;
  for (auto& [stream, posted] : posted_) {
    posted->gone = true;
  }
  posted_.clear();
  // Their decisions are still coming: counted when they come, as the client's cancels.
  for (auto [stream, deadline] : dispatched_) {
    if (connection_.waiting(stream)) {
      gone_[stream] = deadline;
    }
  }
  dispatched_.clear();
  boost::system::error_code ignored;
  timer_.cancel();
  socket().shutdown(net::socket_base::shutdown_both, ignored);
  socket().close(ignored);
  slot_.sessions.erase(this);
  std::lock_guard lock(shared_->mutex);
  --shared_->live_sessions;
  shared_->changed.notify_all();
}

void RlsSession::onCall(std::int32_t stream, std::string_view message,
                        std::optional<Clock::time_point> deadline) {
  shared_->in_flight.add(1);
  dispatched_.emplace_back(stream, deadline);
  in_call_ = true;
  // One request message per connection, refilled by each call: protobuf's Clear() keeps
  // the strings and repeated fields it allocated, so a warm connection parses without
  // allocating (cheaper than an arena, which registers a destructor per string).
  rls::RateLimitRequest* request = &request_;
  if (deadline && *deadline <= Clock::now()) {
    // Its deadline passed while it was read (a grpc-timeout of a few nanoseconds): not
    // decided, nothing charged.
    shared_->cancelled_queued->inc();
    answerError(stream, StatusCode::kDeadlineExceeded, "deadline passed before decided");
  } else if (const RlsCall call = connection_.callOf(stream);
             call != RlsCall::kShouldRateLimit && call != RlsCall::kKuadrantCheck) {
    if (auto parsed = parseCall(call, message); !parsed) {
      answerError(stream,
                  parsed.error().kind == ErrorKind::kInternal ? StatusCode::kInternal
                                                              : StatusCode::kInvalidArgument,
                  parsed.error().message);
    } else if (slot_.worker >= 0) {
      decideHere(stream, std::move(*parsed));
    } else {
      post(stream, std::move(*parsed), deadline);
    }
  } else if (slot_.worker >= 0) {
    decideHere(stream, message);
  } else if (auto usual = readUsualRequest(message)) {
    decideParsed(stream, *usual, deadline);
  } else if (!request->ParseFromArray(message.data(), static_cast<int>(message.size()))) {
    answerError(stream, StatusCode::kInternal, "cannot parse RateLimitRequest");
  } else {
    auto parsed = toDecisionRequest(*request);
    decideParsed(stream, parsed, deadline);
  }
  in_call_ = false;
}

void RlsSession::decideParsed(std::int32_t stream, Result<DecisionRequest>& parsed,
                              std::optional<Clock::time_point> deadline) {
  if (!parsed) {
    answerError(stream, StatusCode::kInvalidArgument, parsed.error().message);
  } else if (slot_.worker >= 0) {
    decideHere(stream, std::move(*parsed));
  } else {
    post(stream, std::move(*parsed), deadline);
  }
}

void RlsSession::onCallAbandoned(std::int32_t stream, StatusCode code) {
  std::optional<Clock::time_point> deadline;
  if (auto it = findDispatched(stream); it != dispatched_.end()) {
    deadline = it->second;
    forgetDispatched(it);
  }
  auto posted = posted_.find(stream);
  if (posted != posted_.end()) {
    posted->second->gone = true;
  }
  if (code == StatusCode::kDeadlineExceeded) {
    // Answered DEADLINE_EXCEEDED by the connection: that is what its client saw.
    shared_->count(code);
    shared_->in_flight.add(-1);
  } else if (posted != posted_.end()) {
    // Waiting in a worker's queue (or decided there): counted now, as what its client saw.
    const bool expired = deadline && *deadline <= Clock::now();
    shared_->count(expired ? StatusCode::kDeadlineExceeded : StatusCode::kCancelled);
    shared_->in_flight.add(-1);
  } else {
    // The client went away while the store decided it here: counted once the decision is
    // in, as what the client saw by then (DEADLINE_EXCEEDED once its deadline passed).
    gone_[stream] = deadline;
  }
}

void RlsSession::settleGone(std::int32_t stream, Counter* stage) {
  if (stage != nullptr) {
    stage->inc();
  }
  auto it = gone_.find(stream);
  if (it == gone_.end()) {
    return;
  }
  const bool expired = it->second && *it->second <= Clock::now();
  shared_->count(expired ? StatusCode::kDeadlineExceeded : StatusCode::kCancelled);
  shared_->in_flight.add(-1);
  gone_.erase(it);
}

void RlsSession::answerError(std::int32_t stream, StatusCode code, std::string_view message) {
  if (!connection_.waiting(stream)) {
    return;
  }
  if (auto it = findDispatched(stream); it != dispatched_.end()) {
    forgetDispatched(it);
  }
  shared_->count(code);
  shared_->in_flight.add(-1);
  connection_.fail(stream, code, message);
}

void RlsSession::answer(std::int32_t stream, std::string_view framed, bool degraded) {
  if (auto it = findDispatched(stream); it != dispatched_.end()) {
    forgetDispatched(it);
  }
  shared_->count(StatusCode::kOk);
  shared_->in_flight.add(-1);
  connection_.replyFramed(stream, framed, degraded);
}

namespace {

/// `message` behind its 5-byte gRPC prefix, in `framed`.
template <typename Message>
void frame(const Message& message, std::string& framed) {
  const std::size_t size = message.ByteSizeLong();
  framed.assign(wire::kFrameHeaderBytes + size, '\0');
  wire::writeFrameHeader(framed.data(), size);
  message.SerializeWithCachedSizesToArray(
      reinterpret_cast<std::uint8_t*>(framed.data() + wire::kFrameHeaderBytes));
}

}  // namespace

Result<DecisionRequest> RlsSession::parseCall(RlsCall call, std::string_view message) {
  const int size = static_cast<int>(message.size());
  switch (call) {
    case RlsCall::kKuadrantReserve: {
      kuadrant::ReserveRequest reserve;
      if (!reserve.ParseFromArray(message.data(), size)) {
        return makeError(ErrorKind::kInternal, "cannot parse ReserveRequest");
      }
      return fromReserveRequest(reserve);
    }
    case RlsCall::kKuadrantCommit: {
      kuadrant::CommitRequest commit;
      if (!commit.ParseFromArray(message.data(), size)) {
        return makeError(ErrorKind::kInternal, "cannot parse CommitRequest");
      }
      return fromCommitRequest(commit);
    }
    default:
      break;
  }
  if (!request_.ParseFromArray(message.data(), size)) {
    return makeError(ErrorKind::kInternal, "cannot parse RateLimitRequest");
  }
  auto parsed = toDecisionRequest(request_);
  if (parsed && call == RlsCall::kKuadrantReport) {
    parsed->charge = Charge::kReport;  // Kuadrant's Report: charged, never denied
  }
  return parsed;
}

std::optional<CallError> RlsSession::encode(const Decision& decision, bool headers,
                                            rls::RateLimitResponse& response, std::string& framed) {
  if (auto error = reservationError(decision)) {
    return error;
  }
  if (decision.request.reservation.op == HoldOp::kReserve) {
    kuadrant::ReserveResponse reserve;
    toReserveResponse(decision, reserve);
    frame(reserve, framed);
    return std::nullopt;
  }
  if (decision.request.reservation.op == HoldOp::kCommit) {
    kuadrant::CommitResponse commit;
    toCommitResponse(decision, commit);
    frame(commit, framed);
    return std::nullopt;
  }
  if (encodeResponse(decision, headers, framed)) {
    return std::nullopt;
  }
  response.Clear();
  toResponse(decision, headers, response);
  frame(response, framed);
  return std::nullopt;
}

void RlsSession::decideHere(std::int32_t stream, DecisionRequest&& request) {
  DecisionService& decisions = *shared_->workers[static_cast<std::size_t>(slot_.worker)].decisions;
  decisions.decide(std::move(request),
                   [self = shared_from_this(), stream](Result<Decision>&& decision) {
                     self->onDecided(stream, decision, true);
                   });
}

void RlsSession::decideHere(std::int32_t stream, std::string_view message) {
  DecisionService& decisions = *shared_->workers[static_cast<std::size_t>(slot_.worker)].decisions;
  DecisionService::Callback done = [self = shared_from_this(),
                                    stream](Result<Decision>&& decision) {
    // Left where it is: the service's storage serves its next request.
    self->onDecided(stream, decision, false);
  };
  Status filled = decisions.decideInPlace(
      [this, message](DecisionRequest& into) { return fillRequest(message, into); }, done);
  if (!filled) {
    answerError(stream,
                filled.error().kind == ErrorKind::kInternal ? StatusCode::kInternal
                                                            : StatusCode::kInvalidArgument,
                filled.error().message);
  }
}

Status RlsSession::fillRequest(std::string_view message, DecisionRequest& into) {
  if (std::optional<Status> usual = readUsualRequestInto(message, into)) {
    return *usual;
  }
  into.clearForReuse();
  if (!request_.ParseFromArray(message.data(), static_cast<int>(message.size()))) {
    return makeError(ErrorKind::kInternal, "cannot parse RateLimitRequest");
  }
  return fillDecisionRequest(request_, into);
}

void RlsSession::onDecided(std::int32_t stream, Result<Decision>& decision, bool recycle) {
  if (closed_ || !connection_.waiting(stream)) {
    // The client went away (or its deadline passed) while the store decided: the
    // decision stands (charged once), the answer goes nowhere.
    settleGone(stream, shared_->cancelled_deciding);
    if (decision && recycle) {
      recycleDecision(std::move(*decision));
    }
    return;
  }
  if (!decision) {
    answerError(stream, statusCodeOf(decision.error()), decision.error().message);
  } else if (auto error =
                 encode(*decision, shared_->options.response_headers, response_, framed_)) {
    answerError(stream, error->code, error->message);
  } else {
    answer(stream, framed_, decision->degraded);  // framed_ keeps its capacity for the next
  }
  if (decision && recycle) {
    recycleDecision(std::move(*decision));
  }
  if (!in_call_) {
    flush();
    armTimer();
  }
}

void RlsSession::post(std::int32_t stream, DecisionRequest&& request,
                      std::optional<Clock::time_point> deadline) {
  auto posted = std::make_shared<PostedCall>();
  posted->session = weak_from_this();
  posted->home = slot_.io;
  posted->shared = shared_;
  posted->stream = stream;
  posted_[stream] = posted;
  const std::size_t index =
      shared_->next_worker.fetch_add(1, std::memory_order_relaxed) % shared_->workers.size();
  RlsWorker worker = shared_->workers[index];
  net::post(*worker.io, [worker, posted, deadline, request = std::move(request)]() mutable {
    // Its turn has come: a call nobody waits for any more is not charged.
    if (posted->gone || (deadline && *deadline <= Clock::now())) {
      posted->shared->cancelled_queued->inc();
      net::post(*posted->home, [posted] {
        if (auto self = posted->session.lock()) {
          self->posted_.erase(posted->stream);
          self->answerQueuedLate(posted->stream);
        }
      });
      return;
    }
    worker.decisions->decide(std::move(request), [posted](Result<Decision> decision) {
      onPostedDecided(posted, std::move(decision));
    });
  });
}

void RlsSession::onPostedDecided(const std::shared_ptr<PostedCall>& posted,
                                 Result<Decision> decision) {
  std::string framed;
  std::optional<Error> error;
  std::optional<CallError> call_error;
  bool degraded = false;
  if (decision) {
    rls::RateLimitResponse response;
    call_error = encode(*decision, posted->shared->options.response_headers, response, framed);
    degraded = decision->degraded;
    recycleDecision(std::move(*decision));
  } else {
    error = decision.error();
  }
  net::post(*posted->home, [posted, framed = std::move(framed), error = std::move(error),
                            call_error = std::move(call_error), degraded]() mutable {
    auto self = posted->session.lock();
    if (!self) {
      return;
    }
    const std::int32_t stream = posted->stream;
    self->posted_.erase(stream);
    if (self->closed_ || !self->connection_.waiting(stream)) {
      self->settleGone(stream, self->shared_->cancelled_deciding);
      return;
    }
    if (error) {
      self->answerError(stream, statusCodeOf(*error), error->message);
    } else if (call_error) {
      self->answerError(stream, call_error->code, call_error->message);
    } else {
      self->answer(stream, framed, degraded);
    }
    self->flush();
    self->armTimer();
  });
}

void RlsSession::answerQueuedLate(std::int32_t stream) {
  if (closed_ || !connection_.waiting(stream)) {
    settleGone(stream, nullptr);  // the worker counted the stage
    return;
  }
  answerError(stream, StatusCode::kDeadlineExceeded, "deadline passed before decided");
  flush();
  armTimer();
}

void RlsSession::doRead() {
  if (closed_ || reading_ || read_paused_) {
    return;
  }
  reading_ = true;
  auto done = [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
    self->onRead(ec, n);
  };
  if (tls_) {
    tls_->async_read_some(net::buffer(input_), std::move(done));
  } else {
    asyncReadSomeDrainAware(socket_, drain_aware_, net::buffer(input_), std::move(done));
  }
}

void RlsSession::onRead(boost::system::error_code ec, std::size_t n) {
  reading_ = false;
  if (closed_) {
    return;
  }
  if (ec) {
    close();
    return;
  }
  const bool ok = connection_.receive(std::string_view(input_.data(), n), Clock::now());
  flush();
  if (!ok) {
    if (!connection_.error().empty()) {
      spdlog::debug("gRPC: connection ended: {}", connection_.error());
    }
    closing_ = true;  // written what is pending (a GOAWAY), then closed
    closeIfDone();
    return;
  }
  if (closeIfDone()) {
    return;
  }
  armTimer();
  if (pending_.size() > kMaxPendingOutput) {
    read_paused_ = true;  // the client does not read its answers: stop reading its calls
    return;
  }
  doRead();
}

void RlsSession::flush() {
  if (closed_) {
    return;
  }
  connection_.output(pending_);
  if (writing_ || pending_.empty() || handshake_until_) {
    return;
  }
  if (!tls_) {
    boost::system::error_code ec;
    const std::size_t sent = socket_.write_some(net::buffer(pending_), ec);
    if (ec && ec != net::error::would_block && ec != net::error::try_again) {
      close();
      return;
    }
    pending_.erase(0, sent);
    if (pending_.empty()) {
      return;
    }
  }
  writing_ = true;
  writing_buffer_.swap(pending_);
  auto done = [self = shared_from_this()](boost::system::error_code wec, std::size_t) {
    self->onWrite(wec);
  };
  if (tls_) {
    net::async_write(*tls_, net::buffer(writing_buffer_), std::move(done));
  } else {
    net::async_write(socket_, net::buffer(writing_buffer_), std::move(done));
  }
}

void RlsSession::onWrite(boost::system::error_code ec) {
  writing_ = false;
  writing_buffer_.clear();
  if (closed_) {
    return;
  }
  if (ec) {
    close();
    return;
  }
  flush();
  if (closeIfDone()) {
    return;
  }
  if (read_paused_ && pending_.size() <= kMaxPendingOutput) {
    read_paused_ = false;
    doRead();
  }
}

bool RlsSession::closeIfDone() {
  if (closed_) {
    return true;
  }
  if ((closing_ || connection_.done()) && !writing_ && pending_.empty()) {
    close();
    return true;
  }
  return false;
}

void RlsSession::armTimer() {
  if (closed_) {
    return;
  }
  Clock::time_point next = grace_at_ ? *grace_at_ : age_at_;
  if (auto call = connection_.nextTimer(); call && *call < next) {
    next = *call;
  }
  if (handshake_until_ && *handshake_until_ < next) {
    next = *handshake_until_;
  }
  if (timer_armed_ && timer_at_ <= next) {
    return;
  }
  timer_armed_ = true;
  timer_at_ = next;
  timer_.expires_at(next);
  timer_.async_wait(
      [self = shared_from_this()](boost::system::error_code ec) { self->onTimer(ec); });
}

void RlsSession::onTimer(boost::system::error_code ec) {
  // Cancelled: closed, or re-armed (the newer wait is the one that counts).
  if (closed_ || ec) {
    return;
  }
  timer_armed_ = false;
  const auto now = Clock::now();
  if (handshake_until_ && *handshake_until_ <= now) {
    close();  // no TLS handshake within the request timeout
    return;
  }
  connection_.onTimer(now);
  if (grace_at_ && *grace_at_ <= now) {
    // The calls still open after the grace are cut off.
    flush();
    close();
    return;
  }
  if (!grace_at_ && age_at_ <= now) {
    connection_.goAway();
    grace_at_ = now + shared_->options.max_connection_age_grace;
  }
  flush();
  if (!closeIfDone()) {
    armTimer();
  }
}

RlsSession::DispatchedIt RlsSession::findDispatched(std::int32_t stream) {
  return std::find_if(dispatched_.begin(), dispatched_.end(),
                      [stream](const auto& call) { return call.first == stream; });
}

void RlsSession::forgetDispatched(DispatchedIt it) {
  *it = dispatched_.back();
  dispatched_.pop_back();
}

}  // namespace sluice::grpc
