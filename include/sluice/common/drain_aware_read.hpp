#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <boost/asio/error.hpp>
// Also Asio's detail headers used here (reactor, reactor_op, socket_ops, handler_work): the
// socket's headers include them in the order they compile in, which they do not on their own.
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/system/error_code.hpp>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

namespace sluice {

/// Reading from a stream socket without a failed recv before each wait.
///
/// Asio's reactor tries a read at once when a read starts (before waiting on epoll), unless
/// the previous read found the socket empty (end of stream). After a request and its answer,
/// that speculative read nearly always fails with EAGAIN: one system call per answer for
/// nothing. asyncReadSomeDrainAware() reads with recvmsg() and Linux's TCP_INQ, which hands
/// back how many bytes the socket still holds after the read, counting a received FIN as one.
/// When that is 0, it tells the reactor so (done_and_exhausted, under the descriptor's lock,
/// as Asio does for an end of stream), and the next read waits for epoll's next edge instead
/// of trying first. Nothing can be lost: the socket held nothing (no byte, no FIN) after that
/// read, and whatever arrives later raises a new edge (Asio's epoll is edge-triggered), which
/// makes the reactor try again. This is what nginx does with EPOLLRDHUP: no read after a
/// short one unless the peer closed.
///
/// enableDrainAwareReads() turns TCP_INQ on; where it is refused (a unix socket, an old
/// kernel), asyncReadSomeDrainAware() is Asio's async_read_some. Other reads (Beast's, TLS,
/// a linger) are Asio's own and mix freely with these. Built on the internals of Asio's
/// epoll reactor (Boost 1.81, Debian 12's): the operation is Asio's receive operation with
/// another perform step. Per-operation cancellation slots are not supported (cancel() and
/// close() are).
using GenericStreamSocket = boost::asio::generic::stream_protocol::socket;

/// Turns TCP_INQ on; true when asyncReadSomeDrainAware() can tell an emptied socket.
inline bool enableDrainAwareReads(GenericStreamSocket& socket) {
  const int on = 1;
  return ::setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_INQ, &on, sizeof(on)) == 0;
}

/// As socket.async_read_some(buffer, handler): handler(error_code, bytes), end of stream as
/// boost::asio::error::eof. `drain_aware` is what enableDrainAwareReads() returned: false
/// makes it Asio's async_read_some.
template <typename Handler>
void asyncReadSomeDrainAware(GenericStreamSocket& socket, bool drain_aware,
                             boost::asio::mutable_buffer buffer, Handler&& handler);

namespace drain_aware_detail {

/// The socket's implementation (Asio keeps it protected): a pointer to the member, named
/// through a derived class, applies to any socket.
struct ImplAccess : GenericStreamSocket {
  static auto& of(GenericStreamSocket& socket) { return socket.*(&ImplAccess::impl_); }
};

/// Asio's receive operation (reactive_socket_recv_op) with recvmsg() and TCP_INQ as its
/// perform step.
template <typename Handler, typename IoExecutor>
class ReadOp : public boost::asio::detail::reactor_op {
 public:
  BOOST_ASIO_DEFINE_HANDLER_PTR(ReadOp);

  ReadOp(int socket, boost::asio::mutable_buffer buffer, Handler& handler, const IoExecutor& io_ex)
      : reactor_op(boost::system::error_code(), &ReadOp::doPerform, &ReadOp::doComplete),
        socket_(socket),
        buffer_(buffer),
        handler_(std::move(handler)),
        work_(handler_, io_ex) {}

  /// One recvmsg(), on the reactor's side (under the descriptor's lock).
  static status doPerform(reactor_op* base) {
    auto* op = static_cast<ReadOp*>(base);
    iovec iov{op->buffer_.data(), op->buffer_.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = 0;
    do {
      n = ::recvmsg(op->socket_, &msg, MSG_DONTWAIT);
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
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == IPPROTO_TCP && c->cmsg_type == TCP_CM_INQ &&
          c->cmsg_len >= CMSG_LEN(sizeof(int))) {
        int left = 0;
        std::memcpy(&left, CMSG_DATA(c), sizeof(left));
        return left == 0 ? done_and_exhausted : done;
      }
    }
    return done;  // no count: the next read tries at once, as Asio's do
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
  boost::asio::mutable_buffer buffer_;
  Handler handler_;
  boost::asio::detail::handler_work<Handler, IoExecutor> work_;
};

}  // namespace drain_aware_detail

template <typename Handler>
void asyncReadSomeDrainAware(GenericStreamSocket& socket, bool drain_aware,
                             boost::asio::mutable_buffer buffer, Handler&& handler) {
  namespace detail = boost::asio::detail;
  if (!drain_aware || buffer.size() == 0 || !socket.is_open()) {
    socket.async_read_some(buffer, std::forward<Handler>(handler));
    return;
  }
  auto& io_object = drain_aware_detail::ImplAccess::of(socket);
  auto& impl = io_object.get_implementation();
  using Decayed = std::decay_t<Handler>;
  using Op = drain_aware_detail::ReadOp<Decayed, GenericStreamSocket::executor_type>;
  Decayed h(std::forward<Handler>(handler));
  typename Op::ptr p = {detail::addressof(h), Op::ptr::allocate(h), nullptr};
  p.p = new (p.v) Op(impl.socket_, buffer, h, io_object.get_executor());
  auto& reactor = boost::asio::use_service<detail::reactor>(io_object.get_service().context());
  if ((impl.state_ & detail::socket_ops::non_blocking) == 0 &&
      !detail::socket_ops::set_internal_non_blocking(impl.socket_, impl.state_, true, p.p->ec_)) {
    reactor.post_immediate_completion(p.p, false);
  } else {
    reactor.start_op(detail::reactor::read_op, impl.socket_, impl.reactor_data_, p.p, false, true);
  }
  p.v = p.p = nullptr;
}

}  // namespace sluice
