#include "app/operations_options.hpp"

#include <charconv>
#include <limits>

#include "app/options.hpp"

namespace sluice::app {
namespace {

Error invalid(std::string message) {
  return makeError(ErrorKind::kInvalidArgument, std::move(message));
}

constexpr std::size_t kMaxStreamLength = std::size_t{1} << 40;
constexpr std::int64_t kMaxTopWindowMs = 24LL * 3600 * 1000;
constexpr std::size_t kMaxTopCapacity = 10'000;

template <typename T>
Status parseBounded(std::string_view value, T low, T high, T& out) {
  T n = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n < low || n > high) {
    return invalid("must be an integer from " + std::to_string(low) + " to " +
                   std::to_string(high) + ", got \"" + std::string(value) + "\"");
  }
  out = n;
  return {};
}

}  // namespace

Status applyOperationsOption(OperationsOptions& options, std::string_view name,
                             std::string_view value) {
  if (name == "log-format") {
    auto format = parseLogFormat(value);
    if (!format) {
      return format.error();
    }
    options.log_format = *format;
    return {};
  }
  if (name == "access-log") {
    options.access_log = value == "off" ? std::string() : std::string(value);
    return {};
  }
  if (name == "access-log-format") {
    auto format = parseLogFormat(value);
    if (!format) {
      return format.error();
    }
    options.access_log_format = *format;
    return {};
  }
  if (name == "events") {
    if (value != "redis-stream" && value != "off") {
      return invalid("must be redis-stream or off, got \"" + std::string(value) + "\"");
    }
    options.events = value == "redis-stream";
    return {};
  }
  if (name == "events-redis") {
    if (value.empty()) {
      return invalid("must not be empty");
    }
    options.events_redis = std::string(value);
    return {};
  }
  if (name == "events-stream") {
    if (value.empty()) {
      return invalid("must not be empty");
    }
    options.events_stream = std::string(value);
    return {};
  }
  if (name == "events-maxlen") {
    std::size_t n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || end != value.data() + value.size() || n < 1 || n > kMaxStreamLength) {
      return invalid("must be an integer from 1 to " + std::to_string(kMaxStreamLength) +
                     ", got \"" + std::string(value) + "\"");
    }
    options.events_maxlen = n;
    return {};
  }
  if (name == "admin-listen") {
    if (value == "off") {
      options.admin = false;
      return {};
    }
    std::string text(value);
    if (text.find(':') == std::string::npos) {
      text = "127.0.0.1:" + text;  // a bare port stays on loopback
    }
    if (auto status = parseListen(text, options.admin_host, options.admin_port); !status) {
      return status;
    }
    options.admin = true;
    return {};
  }
  if (name == "top-window-ms") {
    return parseBounded<std::int64_t>(value, 1000, kMaxTopWindowMs, options.top_window_ms);
  }
  if (name == "top-capacity") {
    return parseBounded<std::size_t>(value, 1, kMaxTopCapacity, options.top_capacity);
  }
  return invalid("unknown operations option \"" + std::string(name) + "\"");
}

}  // namespace sluice::app
