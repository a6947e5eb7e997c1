#pragma once

#include <string>
#include <string_view>

#include "sluice/common/result.hpp"

/// Process-wide logging set-up (spdlog's default logger) and the JSON helpers shared by the
/// access log and the JSON log format.
namespace sluice {

enum class LogFormat {
  kPlain,  ///< `2026-01-02T03:04:05.678+00:00 info message`
  kJson,   ///< one JSON object per line: {"time","level","thread","msg"}
};

/// "plain" or "json"; kInvalidArgument otherwise.
Result<LogFormat> parseLogFormat(std::string_view text);

/// The spdlog pattern of a format. The JSON pattern uses the custom flag `%*`: the message
/// escaped as the inside of a JSON string (setUpLogging() installs the flag).
std::string logPattern(LogFormat format);

/// Sets the default logger's level ("trace" .. "off") and line format. Start-up only (not
/// thread-safe against concurrent logging). kInvalidArgument for an unknown level.
Status setUpLogging(std::string_view level, LogFormat format);

/// Appends `text` to `out` escaped as the inside of a JSON string (quotes, backslashes and
/// control characters; other bytes, UTF-8 included, are copied).
void appendJsonEscaped(std::string& out, std::string_view text);

}  // namespace sluice
