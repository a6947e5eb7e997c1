#pragma once

#include <sys/epoll.h>
#include <sys/socket.h>

#include <boost/asio/error.hpp>
// Also Asio's detail headers used here (reactor, reactor_op, socket_ops, handler_work): the
// socket's headers include them in the order they compile in, which they do not on their own.
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
#include <cerrno>
#include <cstddef>
#include <type_traits>
#include <utility>

namespace sluice {

/// Reading from a stream socket without a failed recv before each wait.
///
/// Asio's reactor tries a read at once when a read starts (before waiting on epoll), unless
/// the previous read found the socket empty (end of stream). After a request and its answer,
/// that speculative read nearly always fails with EAGAIN: one system call per answer for
/// nothing. asyncReadSomeDrainAware() tells the reactor when a read emptied the socket
/// (done_and_exhausted, under the descriptor's lock, as Asio does for an end of stream), and
/// the next read waits for epoll's next edge instead of trying first. This is nginx's rule:
/// a read that returned less than its buffer emptied the socket, unless the peer's FIN has
/// arrived (EPOLLRDHUP), which a read may take along with the last bytes.
///
/// enableDrainAwareReads() adds EPOLLRDHUP to the events Asio's reactor registered for the
/// socket, so that the events epoll reports for it (which the reactor keeps in the
/// descriptor's state until the next ones) say whether a FIN had arrived. A short read then
/// empties the socket unless those events carry EPOLLRDHUP. Nothing can be lost: a read takes
/// everything the socket holds up to its buffer's size, so a short one left nothing; anything
/// arriving later, bytes or a FIN, raises a new edge (Asio's epoll is edge-triggered), whose
/// events are reported afresh and make the reactor try again; a FIN that had arrived before
/// the events were reported is in them. The read itself is a plain recv(), without a message
/// header to copy in and out.
///
/// Where EPOLLRDHUP cannot be added (a unix socket, which is read as before; a socket not
/// registered with the reactor), asyncReadSomeDrainAware() is Asio's async_read_some. Other
/// reads (Beast's, TLS, a linger) are Asio's own and mix freely with these. Built on the
/// internals of Asio's epoll reactor (Boost 1.81, Debian 12's): the operation is Asio's
/// receive operation with another perform step; the reactor's epoll descriptor and the
/// descriptor state's registered events are reached through explicit instantiations (which
/// C++ exempts from access checks). Per-operation cancellation slots are not supported
/// (cancel() and close() are).
using GenericStreamSocket = boost::asio::generic::stream_protocol::socket;
/// The same socket bound to its io_context's own executor: an operation on it neither copies
/// nor compares a type-erased executor (any_io_executor's type checks are string
/// comparisons), which a connection reading once per call pays on every read.
using IoContextStreamSocket =
    boost::asio::basic_stream_socket<boost::asio::generic::stream_protocol,
                                     boost::asio::io_context::executor_type>;

/// Registers EPOLLRDHUP for a TCP socket (on its I/O thread, before its first read); true
/// when asyncReadSomeDrainAware() can tell an emptied socket.
bool enableDrainAwareReads(GenericStreamSocket& socket);
bool enableDrainAwareReads(IoContextStreamSocket& socket);

/// As socket.async_read_some(buffer, handler): handler(error_code, bytes), end of stream as
/// boost::asio::error::eof. `drain_aware` is what enableDrainAwareReads() returned: false
/// makes it Asio's async_read_some. `Socket`: GenericStreamSocket or IoContextStreamSocket.
template <typename Socket, typename Handler>
void asyncReadSomeDrainAware(Socket& socket, bool drain_aware, boost::asio::mutable_buffer buffer,
                             Handler&& handler);

namespace drain_aware_detail {

/// The socket's implementation (Asio keeps it protected): a pointer to the member, named
/// through a derived class, applies to any socket.
template <typename Socket>
struct ImplAccess : Socket {
  static auto& of(Socket& socket) { return socket.*(&ImplAccess::impl_); }
};

/// The socket service's start of an operation (Asio keeps it protected): what Asio's own
/// async_read_some does with its operation, without looking the reactor up by type (a string
/// comparison per registered service) on each read.
template <typename Service>
struct StartAccess : Service {
  template <typename Impl>
  static void startRead(Service& service, Impl& impl, boost::asio::detail::reactor_op* op) {
    (service.*(&StartAccess::start_op))(impl, boost::asio::detail::reactor::read_op, op,
                                        /*is_continuation=*/false, /*is_non_blocking=*/true,
                                        /*noop=*/false);
  }
};

/// The events epoll last reported for a socket, which the reactor keeps in the descriptor's
/// state (its operation's task result) until it reports the next ones. The state derives
/// privately from Asio's operation, which keeps the result protected: a C-style cast reaches
/// the base, a pointer to the member named through a derived class reads it.
struct ReportedEvents : boost::asio::detail::scheduler_operation {
  static unsigned int of(boost::asio::detail::reactor::per_descriptor_data state) {
    const auto* operation = (const boost::asio::detail::scheduler_operation*)state;
    return operation->*(&ReportedEvents::task_result_);
  }
};

/// Asio's receive operation (reactive_socket_recv_op) whose perform step says when the read
/// emptied the socket.
template <typename Handler, typename IoExecutor>
class ReadOp : public boost::asio::detail::reactor_op {
 public:
  BOOST_ASIO_DEFINE_HANDLER_PTR(ReadOp);

  ReadOp(int socket, boost::asio::detail::reactor::per_descriptor_data state,
         boost::asio::mutable_buffer buffer, Handler& handler, const IoExecutor& io_ex)
      : reactor_op(boost::system::error_code(), &ReadOp::doPerform, &ReadOp::doComplete),
        socket_(socket),
        state_(state),
        buffer_(buffer),
        handler_(std::move(handler)),
        work_(handler_, io_ex) {}

  /// One recv(), on the reactor's side (under the descriptor's lock).
  static status doPerform(reactor_op* base) {
    auto* op = static_cast<ReadOp*>(base);
    ssize_t n = 0;
    do {
      n = ::recv(op->socket_, op->buffer_.data(), op->buffer_.size(), MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return not_done;  // queued: waits for the next edge
      }
      op->ec_ = boost::system::error_code(errno, boost::asio::error::get_system_category());
      return done;
    }
    op->bytes_transferred_ = static_cast<std::size_t>(n);
    if (n == 0) {
      op->ec_ = boost::asio::error::eof;
      return done_and_exhausted;
    }
    // Less than the buffer: the socket held no more, and no FIN, unless epoll said one had
    // come (this read may have taken it with the bytes; the next read must find it).
    if (static_cast<std::size_t>(n) < op->buffer_.size() &&
        (ReportedEvents::of(op->state_) & EPOLLRDHUP) == 0) {
      return done_and_exhausted;
    }
    return done;  // the next read tries at once, as Asio's do
  }

  static void doComplete(void* owner, boost::asio::detail::operation* base,
                         const boost::system::error_code& /*ec*/,
                         std::size_t /*bytes_transferred*/) {
    // As Asio's own reactive_socket_recv_op: free the operation before the upcall.
    auto* op = static_cast<ReadOp*>(base);
    ptr p = {boost::asio::detail::addressof(op->handler_), op, op};
    boost::asio::detail::handler_work<Handler, IoExecutor> w(std::move(op->work_));
    boost::asio::detail::binder2<Handler, boost::system::error_code, std::size_t> bound(
        op->handler_, op->ec_, op->bytes_transferred_);
    p.h = boost::asio::detail::addressof(bound.handler_);
    p.reset();
    if (owner != nullptr) {
      boost::asio::detail::fenced_block b(boost::asio::detail::fenced_block::half);
      w.complete(bound, bound.handler_);
    }
  }

 private:
  int socket_;
  boost::asio::detail::reactor::per_descriptor_data state_;
  boost::asio::mutable_buffer buffer_;
  Handler handler_;
  boost::asio::detail::handler_work<Handler, IoExecutor> work_;
};

}  // namespace drain_aware_detail

template <typename Socket, typename Handler>
void asyncReadSomeDrainAware(Socket& socket, bool drain_aware, boost::asio::mutable_buffer buffer,
                             Handler&& handler) {
  namespace detail = boost::asio::detail;
  if (!drain_aware || buffer.size() == 0 || !socket.is_open()) {
    socket.async_read_some(buffer, std::forward<Handler>(handler));
    return;
  }
  auto& io_object = drain_aware_detail::ImplAccess<Socket>::of(socket);
  auto& impl = io_object.get_implementation();
  using Decayed = std::decay_t<Handler>;
  using Op = drain_aware_detail::ReadOp<Decayed, typename Socket::executor_type>;
  Decayed h(std::forward<Handler>(handler));
  typename Op::ptr p = {detail::addressof(h), Op::ptr::allocate(h), nullptr};
  p.p = new (p.v) Op(impl.socket_, impl.reactor_data_, buffer, h, io_object.get_executor());
  // Started as Asio starts its own reads: on the reactor (a read tried at once unless the last
  // one emptied the socket), or completed at once with the error of making it non-blocking.
  using Service = std::remove_reference_t<decltype(io_object.get_service())>;
  drain_aware_detail::StartAccess<Service>::startRead(io_object.get_service(), impl, p.p);
  p.v = p.p = nullptr;
}

}  // namespace sluice
