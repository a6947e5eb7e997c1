#include "grpc/unix_socket.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sluice::grpc {
namespace {

Error unavailable(const std::string& path, const std::string& what) {
  return makeError(ErrorKind::kUnavailable, "unix:" + path + ": " + what);
}

/// True when a server accepts connections on `path`.
bool someoneListens(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return false;
  }
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  // A listening socket accepts (or queues) at once; a stale file gives ECONNREFUSED.
  bool live = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0 ||
              errno == EAGAIN;
  ::close(fd);
  return live;
}

}  // namespace

Status prepareUnixSocketPath(const std::string& path) {
  if (path.empty() || path.front() != '/') {
    return unavailable(path, "the path must be absolute");
  }
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return unavailable(path, "the path is longer than " +
                                 std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
  }
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) {
      return {};
    }
    return unavailable(path, std::strerror(errno));
  }
  if (!S_ISSOCK(info.st_mode)) {
    return unavailable(path, "exists and is not a socket; not replacing it");
  }
  if (someoneListens(path)) {
    return unavailable(path, "another server is listening on it");
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return unavailable(path,
                       std::string("cannot remove the stale socket: ") + std::strerror(errno));
  }
  return {};
}

}  // namespace sluice::grpc
