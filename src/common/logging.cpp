#include "sluice/common/logging.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include <array>
#include <memory>

namespace sluice {
namespace {

constexpr std::string_view kPlainPattern = "%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v";
// %f: microseconds; the level name is one of spdlog's fixed words, no escaping needed.
constexpr std::string_view kJsonPattern =
    R"({"time":"%Y-%m-%dT%H:%M:%S.%f%z","level":"%l","thread":%t,"msg":"%*"})";

/// `%*`: the message escaped for a JSON string, so any text (quotes, newlines from a
/// rules error) still yields one valid JSON object per line.
class JsonMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string escaped;
    escaped.reserve(msg.payload.size() + 8);
    appendJsonEscaped(escaped, std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(escaped.data(), escaped.data() + escaped.size());
  }

  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

}  // namespace

Result<LogFormat> parseLogFormat(std::string_view text) {
  if (text == "plain") {
    return LogFormat::kPlain;
  }
  if (text == "json") {
    return LogFormat::kJson;
  }
  return makeError(ErrorKind::kInvalidArgument,
                   "must be plain or json, got \"" + std::string(text) + "\"");
}

std::string logPattern(LogFormat format) {
  return std::string(format == LogFormat::kJson ? kJsonPattern : kPlainPattern);
}

Status setUpLogging(std::string_view level, LogFormat format) {
  static constexpr std::array<std::string_view, 7> kLevels = {"trace", "debug",    "info", "warn",
                                                              "error", "critical", "off"};
  bool known = false;
  for (std::string_view l : kLevels) {
    known = known || l == level;
  }
  if (!known) {
    return makeError(ErrorKind::kInvalidArgument,
                     "unknown log level \"" + std::string(level) +
                         "\" (trace, debug, info, warn, error, critical, off)");
  }
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<JsonMessageFlag>('*').set_pattern(logPattern(format));
  spdlog::set_formatter(std::move(formatter));
  spdlog::set_level(spdlog::level::from_str(std::string(level)));
  return {};
}

void appendJsonEscaped(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (byte < 0x20 || byte == 0x7f) {
          out += "\\u00";
          out += kHex[byte >> 4];
          out += kHex[byte & 0xf];
        } else {
          out += ch;
        }
    }
  }
}

}  // namespace sluice
