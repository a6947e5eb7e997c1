#pragma once

#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/result.hpp"

/// One parser per kind of configuration value, shared by flags, environment variables, the
/// server YAML and the rules. Errors (kInvalidArgument) say what is expected and quote what
/// was given, without saying where: the caller prefixes the flag, variable or file:line:column.
namespace sluice {

/// An integer in [min, max], all of `text` (no sign for unsigned types, no spaces):
/// "must be an integer from MIN to MAX, got \"TEXT\"".
template <typename T>
Result<T> parseInteger(std::string_view text, T min, T max) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    return makeError(ErrorKind::kInvalidArgument, "must be an integer from " + std::to_string(min) +
                                                      " to " + std::to_string(max) + ", got \"" +
                                                      std::string(text) + "\"");
  }
  return value;
}

/// Whole milliseconds in [min, max], written as a bare integer (the `-ms` flags).
Result<std::chrono::milliseconds> parseMilliseconds(std::string_view text,
                                                    std::chrono::milliseconds min,
                                                    std::chrono::milliseconds max);

/// A whole number and a unit: us, ms, s, m, h or d ("250ms", "2s", "1d"), in microseconds;
/// nullopt when malformed or beyond what Micros holds.
std::optional<Micros> parseDurationMicros(std::string_view text);

/// true/false, 1/0, yes/no, on/off in any case: "must be true or false, got \"TEXT\"".
Result<bool> parseBool(std::string_view text);

/// One of `allowed`, exactly: "must be one of a, b, c, got \"TEXT\"".
Result<std::string> parseOneOf(std::string_view text, std::span<const std::string_view> allowed);

/// Any text but the empty one: "must not be empty".
Result<std::string> parseNonEmpty(std::string_view text);

/// Octal permissions of a file, "660", "0660", "0600" (at most 0777).
Result<unsigned> parseFileMode(std::string_view text);

/// The items between `separator`s, as written (not trimmed; "" gives one empty item,
/// "a," gives "a" and ""): the one way lists of flags and variables are split.
std::vector<std::string_view> splitList(std::string_view text, char separator = ',');

/// `text` without leading and trailing spaces and tabs.
std::string_view trimSpaces(std::string_view text);

/// A TCP address "HOST:PORT", "[::1]:PORT" for IPv6 (host without the brackets).
struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};

/// Splits "HOST:PORT": "must be HOST:PORT, got \"TEXT\"", "port must be an integer from 0
/// to 65535, got ...".
Result<HostPort> parseHostPort(std::string_view text);

/// Where a server listens: a TCP address or a unix socket ("unix:PATH").
struct ListenTarget {
  bool unix_socket = false;
  HostPort tcp;      ///< when !unix_socket
  std::string path;  ///< when unix_socket
  std::string text;  ///< as written, e.g. "[::1]:8081" or "unix:/run/s.sock"
  /// The same address (however written).
  friend bool operator==(const ListenTarget& a, const ListenTarget& b) {
    return a.unix_socket == b.unix_socket && a.tcp.host == b.tcp.host && a.tcp.port == b.tcp.port &&
           a.path == b.path;
  }
};

/// How a list of listen addresses is checked.
struct ListenListRules {
  /// "unix:/absolute/path" only (gRPC's unix: URIs); else a relative path works too.
  bool absolute_unix_paths = false;
  /// An address given twice is an error ("\"X\" is given twice"); else it is kept once.
  bool duplicates_are_errors = true;
};

/// A comma-separated list of "HOST:PORT" and "unix:PATH" addresses. Errors name the item.
Result<std::vector<ListenTarget>> parseListenList(std::string_view text, ListenListRules rules);

}  // namespace sluice
