#include "sluice/common/value_parsers.hpp"

#include <algorithm>
#include <limits>

#include "common/ascii.hpp"

namespace sluice {
namespace {

Error invalid(std::string message) {
  return makeError(ErrorKind::kInvalidArgument, std::move(message));
}

std::string quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

/// One "unix:PATH" item of a listen list.
Result<ListenTarget> parseUnixTarget(std::string_view item, const ListenListRules& rules) {
  const std::string_view path = item.substr(5);
  if (rules.absolute_unix_paths && (path.empty() || path.front() != '/')) {
    return invalid("a unix socket must be unix:/absolute/path, got " + quoted(item));
  }
  if (path.empty()) {
    return invalid("unix: needs a socket path, e.g. unix:/run/sluice/sluice.sock");
  }
  ListenTarget target;
  target.unix_socket = true;
  target.path = std::string(path);
  return target;
}

}  // namespace

Result<std::chrono::milliseconds> parseMilliseconds(std::string_view text,
                                                    std::chrono::milliseconds min,
                                                    std::chrono::milliseconds max) {
  auto n = parseInteger<std::int64_t>(text, min.count(), max.count());
  if (!n) {
    return n.error();
  }
  return std::chrono::milliseconds(*n);
}

std::optional<Micros> parseDurationMicros(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    ++digits;
  }
  if (digits == 0) {
    return std::nullopt;
  }
  std::int64_t amount = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + digits, amount);
  if (ec != std::errc{} || end != text.data() + digits) {
    return std::nullopt;
  }
  static constexpr std::pair<std::string_view, Micros> kUnits[] = {
      {"us", 1},
      {"ms", kMicrosPerMilli},
      {"s", kMicrosPerSecond},
      {"m", 60 * kMicrosPerSecond},
      {"h", 3'600 * kMicrosPerSecond},
      {"d", 86'400 * kMicrosPerSecond},
  };
  const std::string_view suffix = text.substr(digits);
  const auto* unit = std::find_if(std::begin(kUnits), std::end(kUnits),
                                  [suffix](const auto& u) { return u.first == suffix; });
  if (unit == std::end(kUnits) || amount > std::numeric_limits<Micros>::max() / unit->second) {
    return std::nullopt;
  }
  return amount * unit->second;
}

Result<bool> parseBool(std::string_view text) {
  std::string lower;
  for (char ch : text) {
    lower += toLowerAscii(ch);
  }
  if (lower == "true" || lower == "1" || lower == "yes" || lower == "on") {
    return true;
  }
  if (lower == "false" || lower == "0" || lower == "no" || lower == "off") {
    return false;
  }
  return invalid("must be true or false, got " + quoted(text));
}

Result<std::string> parseOneOf(std::string_view text, std::span<const std::string_view> allowed) {
  if (std::find(allowed.begin(), allowed.end(), text) != allowed.end()) {
    return std::string(text);
  }
  std::string list;
  for (std::string_view a : allowed) {
    list += list.empty() ? "" : ", ";
    list += a;
  }
  return invalid("must be one of " + list + ", got " + quoted(text));
}

Result<std::string> parseNonEmpty(std::string_view text) {
  if (text.empty()) {
    return invalid("must not be empty");
  }
  return std::string(text);
}

Result<unsigned> parseFileMode(std::string_view text) {
  const bool octal =
      !text.empty() && text.size() <= 4 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '7'; });
  unsigned mode = 0;
  for (char c : octal ? text : std::string_view{}) {
    mode = mode * 8 + static_cast<unsigned>(c - '0');
  }
  if (!octal || mode > 0777) {
    return invalid("must be octal permissions such as 0660 or 0600, got " + quoted(text));
  }
  return mode;
}

std::vector<std::string_view> splitList(std::string_view text, char separator) {
  std::vector<std::string_view> items;
  while (true) {
    const std::size_t at = text.find(separator);
    items.push_back(text.substr(0, at));
    if (at == std::string_view::npos) {
      return items;
    }
    text.remove_prefix(at + 1);
  }
}

std::string_view trimSpaces(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

Result<HostPort> parseHostPort(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return invalid("must be HOST:PORT, got " + quoted(text));
  }
  std::string_view host = text.substr(0, colon);
  if (host.front() == '[') {
    if (host.back() != ']' || host.size() < 3) {
      return invalid("must be HOST:PORT ([::1]:8080 for IPv6), got " + quoted(text));
    }
    host = host.substr(1, host.size() - 2);
  }
  auto port = parseInteger<unsigned>(text.substr(colon + 1), 0, 65535);
  if (!port) {
    return invalid("port " + port.error().message);
  }
  return HostPort{std::string(host), static_cast<std::uint16_t>(*port)};
}

Result<std::vector<ListenTarget>> parseListenList(std::string_view text, ListenListRules rules) {
  std::vector<ListenTarget> list;
  for (std::string_view item : splitList(text)) {
    ListenTarget target;
    if (item.starts_with("unix:")) {
      auto unix_target = parseUnixTarget(item, rules);
      if (!unix_target) {
        return unix_target.error();
      }
      target = std::move(*unix_target);
    } else {
      auto tcp = parseHostPort(item);
      if (!tcp) {
        return rules.absolute_unix_paths ? invalid(tcp.error().message + " (or unix:/path)")
                                         : tcp.error();
      }
      target.tcp = std::move(*tcp);
    }
    target.text = std::string(item);
    if (std::find(list.begin(), list.end(), target) != list.end()) {
      if (rules.duplicates_are_errors) {
        return invalid(quoted(item) + " is given twice");
      }
      continue;
    }
    list.push_back(std::move(target));
  }
  return list;
}

}  // namespace sluice
