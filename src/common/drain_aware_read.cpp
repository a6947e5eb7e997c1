#include "sluice/common/drain_aware_read.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <boost/asio/detail/epoll_reactor.hpp>
#include <cstdint>

namespace sluice {
namespace {

namespace detail = boost::asio::detail;

// The reactor's epoll descriptor and a descriptor state's registered events are private to
// Asio's epoll reactor. An explicit instantiation may name private members (C++ checks no
// access there): the instantiation below hands each member's pointer to a friend function,
// the one way to reach them without changing Asio.
template <typename Tag, typename Tag::type Member>
struct Steal {
  friend typename Tag::type stolen(Tag) { return Member; }
};

struct EpollDescriptor {
  using type = int detail::epoll_reactor::*;
  friend type stolen(EpollDescriptor);
};
template struct Steal<EpollDescriptor, &detail::epoll_reactor::epoll_fd_>;

struct RegisteredEvents {
  using type = std::uint32_t detail::epoll_reactor::descriptor_state::*;
  friend type stolen(RegisteredEvents);
};
template struct Steal<RegisteredEvents,
                      &detail::epoll_reactor::descriptor_state::registered_events_>;

template <typename Socket>
bool enable(Socket& socket) {
  boost::system::error_code ec;
  const auto local = socket.local_endpoint(ec);
  if (ec || (local.protocol().family() != AF_INET && local.protocol().family() != AF_INET6)) {
    return false;  // a unix socket: read by Asio's own read
  }
  auto& io_object = drain_aware_detail::ImplAccess<Socket>::of(socket);
  detail::epoll_reactor::per_descriptor_data state = io_object.get_implementation().reactor_data_;
  if (state == nullptr) {
    return false;
  }
  auto& reactor =
      boost::asio::use_service<detail::epoll_reactor>(io_object.get_service().context());
  std::uint32_t& registered = state->*stolen(RegisteredEvents{});
  if (registered == 0) {
    return false;  // not registered with epoll
  }
  // As the reactor's own changes (adding EPOLLOUT), which keep what is registered: on this
  // socket's I/O thread, before any read of it, nothing else changes it meanwhile.
  epoll_event ev{};
  ev.events = registered | EPOLLRDHUP;
  ev.data.ptr = state;
  if (::epoll_ctl(reactor.*stolen(EpollDescriptor{}), EPOLL_CTL_MOD, socket.native_handle(), &ev) !=
      0) {
    return false;
  }
  registered |= EPOLLRDHUP;
  return true;
}

}  // namespace

bool enableDrainAwareReads(GenericStreamSocket& socket) { return enable(socket); }

bool enableDrainAwareReads(IoContextStreamSocket& socket) { return enable(socket); }

}  // namespace sluice
