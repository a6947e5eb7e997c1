#include "sluice/common/logging.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

namespace sluice {
namespace {

/// Points the default logger at a string stream for one test, then restores it.
class DefaultLoggerCapture {
 public:
  DefaultLoggerCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~DefaultLoggerCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST(LoggingTest, ParsesTheFormatNames) {
  EXPECT_EQ(*parseLogFormat("plain"), LogFormat::kPlain);
  EXPECT_EQ(*parseLogFormat("json"), LogFormat::kJson);
  auto bad = parseLogFormat("xml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("plain or json"), std::string::npos);
}

TEST(LoggingTest, JsonLinesStayValidJsonWhateverTheMessage) {
  DefaultLoggerCapture capture;
  ASSERT_TRUE(setUpLogging("info", LogFormat::kJson));
  spdlog::warn("rules: \"a.yaml\":3:1: bad\tvalue\nsecond line \\ {}", "x");
  spdlog::debug("filtered out");
  std::istringstream lines(capture.text());
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  auto entry = nlohmann::json::parse(line);
  EXPECT_EQ(entry["level"], "warning");
  EXPECT_EQ(entry["msg"], "rules: \"a.yaml\":3:1: bad\tvalue\nsecond line \\ x");
  EXPECT_TRUE(entry["time"].is_string());
  EXPECT_TRUE(entry["thread"].is_number_integer());
  EXPECT_FALSE(std::getline(lines, line)) << "debug must be filtered at level info";
  ASSERT_TRUE(setUpLogging("info", LogFormat::kPlain));
}

TEST(LoggingTest, PlainLinesCarryTimeLevelAndMessage) {
  DefaultLoggerCapture capture;
  ASSERT_TRUE(setUpLogging("debug", LogFormat::kPlain));
  spdlog::debug("hello");
  const std::string text = capture.text();
  EXPECT_NE(text.find(" debug hello\n"), std::string::npos) << text;
  EXPECT_EQ(text[4], '-');
  ASSERT_TRUE(setUpLogging("info", LogFormat::kPlain));
}

TEST(LoggingTest, RejectsAnUnknownLevel) {
  auto status = setUpLogging("loud", LogFormat::kPlain);
  ASSERT_FALSE(status);
  EXPECT_NE(status.error().message.find("loud"), std::string::npos);
}

TEST(LoggingTest, EscapesControlCharacters) {
  std::string out;
  appendJsonEscaped(out, std::string("a\"b\\c\x01\x7f\r", 8));
  EXPECT_EQ(out, "a\\\"b\\\\c\\u0001\\u007f\\r");
}

}  // namespace
}  // namespace sluice
