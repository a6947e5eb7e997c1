#pragma once

#include <optional>
#include <string_view>

#include "sluice/common/result.hpp"

namespace sluice::redis {

/// Where a Redis failure was seen; together with hiredis' code or the server's error text
/// it decides the ErrorKind.
enum class FailureSource {
  kContext,       ///< hiredis context error: `code` is REDIS_ERR_*, `text` is errstr
  kReply,         ///< an error reply from the server: `text` is the reply ("NOSCRIPT ...")
  kDeadline,      ///< the per-request deadline passed
  kDisconnected,  ///< the connection went away with the command in flight
  kNotReady,      ///< no usable connection at the moment (connecting, backing off)
  kProtocol,      ///< the reply had an unexpected shape
};

/// The one place where hiredis and Redis failures become typed errors:
///   context I/O, EOF, protocol, other -> kConnection; OOM -> kInternal;
///   replies NOSCRIPT / ERR Error running script / ... -> kScript;
///   LOADING, BUSY, MASTERDOWN, READONLY, CLUSTERDOWN, TRYAGAIN, OOM -> kUnavailable;
///   NOAUTH, WRONGPASS, NOPERM -> kConnection (the connection is unusable as configured);
///   deadline -> kTimeout; disconnected / not ready -> kConnection; bad shape -> kScript.
Error redisError(FailureSource source, int code, std::string_view text);

/// The server's error text ("MOVED 3999 127.0.0.1:6381") of an error redisError() made from
/// an error reply (FailureSource::kReply); nullopt for any other error. Views `error`.
std::optional<std::string_view> replyErrorText(const Error& error);

/// The fault an error stands for, as counted in redis_faults_total{kind}: the error reply's
/// code in lower case for the server's refusals ("oom", "readonly", "busy", "loading",
/// "masterdown", "clusterdown", "tryagain", "noscript", "noauth" for NOAUTH and WRONGPASS,
/// "noperm"), "script" for another error reply, "timeout" for a missed deadline,
/// "connection" for a lost, refused or not yet made connection, "protocol" for a reply of
/// an unexpected shape, "internal" otherwise.
std::string_view faultKind(const Error& error);

/// True for a NOSCRIPT error reply (the script cache lost our script).
bool isNoScript(std::string_view reply_error);

}  // namespace sluice::redis
