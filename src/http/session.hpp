#pragma once

#include <array>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "http/request_parser.hpp"
#include "http/response_queue.hpp"
#include "sluice/http/message.hpp"
#include "sluice/http/server.hpp"

namespace sluice::http {

struct Worker;

/// One HTTP/1.1 connection (the session of Beast's advanced_server example): reads requests
/// with deadlines (idle, request, write), dispatches each to the worker's router, and
/// writes the answers in request order from its ResponseQueue, several per write when
/// pipelined (at most max_pipelined read ahead). Requests it cannot read get 413, 431 or
/// 400 and the connection closes after lingering. Lives on its worker's thread; handlers
/// keep it alive through shared_from_this().
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(boost::asio::generic::stream_protocol::socket socket, Worker& worker);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Registers with the worker, notes the peer address (kUnixSocketPeer on a unix socket)
  /// and starts reading.
  void start();

  /// The server is stopping: close now if idle, else finish what is in flight.
  void shutdown();

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kReadChunk = 4096;

  enum class Phase { kIdleWait, kRequest };

  /// A deadline on a timer that is re-armed only when it must fire earlier: extending a
  /// deadline (every request does) costs no timer operation; a timer that fires before the
  /// current deadline re-arms itself for it.
  struct Deadline {
    explicit Deadline(const boost::asio::any_io_executor& executor) : timer(executor) {}
    boost::asio::steady_timer timer;
    Clock::time_point when = Clock::time_point::max();  // max: disarmed
    bool armed = false;
  };

  // Reading.
  void doRead();
  void updateIdleTimer();
  void onFirstBytes(boost::beast::error_code ec, std::size_t n);
  void readRequest();
  void onHeader(boost::beast::error_code ec);
  void readBody();
  template <typename Done>
  bool parseBuffered(bool eager, Done done, boost::beast::error_code& ec);
  void onRequest(boost::beast::error_code ec);
  void onReadError(boost::beast::error_code ec);
  void refuse(int status, const std::string& message, unsigned version);
  /// A request read whole (request_, or the worker's plain_request): queued for its answer
  /// and dispatched; then the next.
  void handOn(Request& request, unsigned version, bool keep_alive);

  // Dispatching.
  QueuedResponse& enqueue(bool keep_alive, unsigned version);
  void dispatch(Request& request, std::uint64_t id);
  void complete(std::uint64_t id, Response&& response);
  void onHandlerAnswer(std::uint64_t id, Response&& response);

  // Writing.
  void maybeWrite();
  void onWrite(boost::beast::error_code ec);

  // Closing.
  bool closeIfDone();
  void gracefulClose();
  void lingerRead();
  void close();

  // Deadlines.
  void setDeadline(Deadline& deadline, Clock::time_point when);
  static void clearDeadline(Deadline& deadline) { deadline.when = Clock::time_point::max(); }

  Worker& worker_;
  const ServerOptions& options_;
  boost::asio::generic::stream_protocol::socket socket_;  // TCP or unix
  boost::beast::flat_buffer buffer_;
  // The request Beast's parser fills (plain requests go to the worker's plain_request),
  // refilled in place: its strings keep their capacity, so a warm connection reads a
  // request without allocating.
  Request request_;
  std::optional<RequestParser> parser_;  // declared after the request it fills
  ResponseQueue queue_;
  std::string out_;              // what an asynchronous write still has to send
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
  // A request is being parsed from the buffer and answered without leaving the stack of an
  // I/O completion: the next request (pipelined) is read through Beast's asynchronous
  // operations, so that the stack does not grow with the number of requests in the buffer.
  bool parsing_inline_ = false;
  bool send_inline_ = false;  // the socket is non-blocking: maybeWrite() sends at once
  bool drain_aware_ = false;  // waits for a request without a failed read first
  bool dispatching_ = false;  // inside onRequest()'s dispatch: request_ is in use
  // While handOn() dispatches a request: when its answer was completed (complete()), so that
  // the wait for the next request arms its idle deadline without reading the clock again.
  bool handing_on_ = false;
  Clock::time_point answered_at_{};
  std::size_t lingered_ = 0;
  std::string peer_;
  // Answers the handlers still owe, and the reference that keeps the session alive for them.
  std::size_t unanswered_ = 0;
  std::shared_ptr<Session> pending_self_;
  std::array<char, kReadChunk> discard_{};
};

}  // namespace sluice::http
