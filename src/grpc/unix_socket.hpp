#pragma once

#include <string>

#include "sluice/common/result.hpp"

/// Unix socket files for the listeners: take over a stale one, never a live one.
namespace sluice::grpc {

/// Makes `path` free for a new listener: nothing there, or a socket file nobody accepts on
/// (a crashed server's), which is removed. Errors (kUnavailable): a live server answers
/// connect() on it, the path is not a socket, or it cannot be removed.
Status prepareUnixSocketPath(const std::string& path);

}  // namespace sluice::grpc
