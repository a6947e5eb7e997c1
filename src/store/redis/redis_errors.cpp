#include "store/redis/redis_errors.hpp"

#include <hiredis/hiredis.h>

#include <array>
#include <string>
#include <utility>

namespace sluice::redis {
namespace {

constexpr std::string_view kReplyPrefix = "redis replied: ";

bool startsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

ErrorKind replyErrorKind(std::string_view text) {
  static constexpr std::array<std::string_view, 7> kUnavailable = {
      "LOADING", "BUSY", "MASTERDOWN", "READONLY", "CLUSTERDOWN", "TRYAGAIN", "OOM"};
  static constexpr std::array<std::string_view, 3> kAuth = {"NOAUTH", "WRONGPASS", "NOPERM"};
  for (auto prefix : kUnavailable) {
    if (startsWith(text, prefix)) {
      return ErrorKind::kUnavailable;
    }
  }
  for (auto prefix : kAuth) {
    if (startsWith(text, prefix)) {
      return ErrorKind::kConnection;
    }
  }
  return ErrorKind::kScript;
}

}  // namespace

Error redisError(FailureSource source, int code, std::string_view text) {
  std::string detail(text);
  switch (source) {
    case FailureSource::kContext:
      switch (code) {
        case REDIS_ERR_OOM:
          return makeError(ErrorKind::kInternal, "redis client out of memory: " + detail);
        case REDIS_ERR_IO:
          return makeError(ErrorKind::kConnection, "redis I/O error: " + detail);
        case REDIS_ERR_EOF:
          return makeError(ErrorKind::kConnection, "redis closed the connection: " + detail);
        case REDIS_ERR_PROTOCOL:
          return makeError(ErrorKind::kConnection, "redis protocol error: " + detail);
        default:
          return makeError(ErrorKind::kConnection, "redis connection error: " + detail);
      }
    case FailureSource::kReply:
      return makeError(replyErrorKind(text), std::string(kReplyPrefix) + detail);
    case FailureSource::kDeadline:
      return makeError(ErrorKind::kTimeout, "redis request deadline passed: " + detail);
    case FailureSource::kDisconnected:
      return makeError(ErrorKind::kConnection, "redis connection lost: " + detail);
    case FailureSource::kNotReady:
      return makeError(ErrorKind::kConnection, "redis not connected: " + detail);
    case FailureSource::kProtocol:
      return makeError(ErrorKind::kScript, "unexpected redis reply: " + detail);
  }
  return makeError(ErrorKind::kInternal, "redis: " + detail);
}

std::optional<std::string_view> replyErrorText(const Error& error) {
  std::string_view message = error.message;
  if (!startsWith(message, kReplyPrefix)) {
    return std::nullopt;
  }
  return message.substr(kReplyPrefix.size());
}

std::string_view faultKind(const Error& error) {
  if (auto text = replyErrorText(error)) {
    static constexpr std::array<std::pair<std::string_view, std::string_view>, 11> kCodes = {{
        {"OOM", "oom"},
        {"READONLY", "readonly"},
        {"BUSY", "busy"},
        {"LOADING", "loading"},
        {"MASTERDOWN", "masterdown"},
        {"CLUSTERDOWN", "clusterdown"},
        {"TRYAGAIN", "tryagain"},
        {"NOSCRIPT", "noscript"},
        {"NOAUTH", "noauth"},
        {"WRONGPASS", "noauth"},
        {"NOPERM", "noperm"},
    }};
    for (const auto& [code, kind] : kCodes) {
      if (startsWith(*text, code)) {
        return kind;
      }
    }
    return "script";
  }
  if (startsWith(error.message, "unexpected redis reply")) {
    return "protocol";
  }
  switch (error.kind) {
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kConnection:
    case ErrorKind::kUnavailable:
      return "connection";
    default:
      return "internal";
  }
}

bool isNoScript(std::string_view reply_error) { return startsWith(reply_error, "NOSCRIPT"); }

}  // namespace sluice::redis
