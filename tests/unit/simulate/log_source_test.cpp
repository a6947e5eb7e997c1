#include "simulate/log_source.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "simulate/log_map.hpp"

namespace sluice::simulate {
namespace {

std::string tempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("sluice-logsource-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

std::vector<std::string> readAll(const std::string& path) {
  auto source = LogSource::open(path);
  EXPECT_TRUE(source.ok());
  std::vector<std::string> lines;
  std::string_view line;
  while ((*source)->next(line)) {
    lines.emplace_back(line);
  }
  EXPECT_TRUE((*source)->error().empty()) << (*source)->error();
  return lines;
}

TEST(LogSourceTest, ReadsPlainLinesWithOrWithoutTheLastNewline) {
  const std::string path = tempPath("plain.log");
  std::ofstream(path) << "one\r\ntwo\n\nthree";
  EXPECT_EQ(readAll(path), (std::vector<std::string>{"one", "two", "", "three"}));
  std::filesystem::remove(path);
}

TEST(LogSourceTest, ReadsGzipDirectly) {
  const std::string path = tempPath("log.gz");
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  std::string text;
  for (int i = 0; i < 100'000; ++i) {
    text += "line " + std::to_string(i) + "\n";
  }
  gzwrite(file, text.data(), static_cast<unsigned>(text.size()));
  gzclose(file);
  const auto lines = readAll(path);
  ASSERT_EQ(lines.size(), 100'000u);
  EXPECT_EQ(lines.back(), "line 99999");
  std::filesystem::remove(path);
}

TEST(LogSourceTest, CutsALineOverTheBoundAndGoesOn) {
  const std::string path = tempPath("long.log");
  {
    std::ofstream out(path);
    out << std::string(LogSource::kMaxLineBytes + 10, 'x') << "\nnext\n";
  }
  auto source = LogSource::open(path);
  ASSERT_TRUE(source.ok());
  std::string_view line;
  ASSERT_TRUE((*source)->next(line));
  EXPECT_TRUE((*source)->truncated());
  EXPECT_EQ(line.size(), LogSource::kMaxLineBytes);
  ASSERT_TRUE((*source)->next(line));
  EXPECT_EQ(line, "next");
  EXPECT_EQ((*source)->lineNumber(), 2u);
  std::filesystem::remove(path);
}

TEST(LogSourceTest, ReadsLinesLongerThanOneReadWhole) {
  // The file is read a piece at a time: lines across pieces and lines longer than a piece
  // (but within the bound) come out whole.
  const std::string path = tempPath("pieces.log");
  std::vector<std::string> expected;
  {
    std::ofstream out(path);
    for (int i = 0; i < 3'000; ++i) {
      expected.push_back(std::string(static_cast<std::size_t>(i * 37 % 500), 'a' + i % 26));
      if (i % 1'000 == 999) {
        expected.back() = std::string(300'000 + static_cast<std::size_t>(i), 'L');
      }
      out << expected.back() << "\n";
    }
  }
  EXPECT_EQ(readAll(path), expected);
  std::filesystem::remove(path);
}

TEST(LogSourceTest, AMissingFileIsAnError) {
  auto source = LogSource::open("/nonexistent/access.log");
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.error().message.find("/nonexistent/access.log: cannot open"), std::string::npos);
}

TEST(LogMapTest, ReadsAnNginxJsonLine) {
  const std::string path = tempPath("nginx-map.yaml");
  std::ofstream(path) << R"(time: msec
time_format: epoch_seconds
domain: {value: edge}
client: http_x_user_id
descriptors:
  - remote_address: remote_addr
  - user: http_x_user_id
    path: uri
)";
  auto map = LogMap::load(path);
  ASSERT_TRUE(map.ok()) << map.error().message;
  LoggedRequest out;
  std::string error;
  ASSERT_TRUE((*map)->parse(
      R"({"msec":"1795665014.123","remote_addr":"10.0.0.7","uri":"/login","http_x_user_id":""})",
      out, error))
      << error;
  EXPECT_EQ(out.time_us, 1'795'665'014'123'000);
  EXPECT_EQ(out.request.domain, "edge");
  EXPECT_EQ(out.request.client_id, "");
  // The second descriptor lacks its user: it is not sent, as Envoy's actions do.
  ASSERT_EQ(out.request.descriptors.size(), 1u);
  EXPECT_EQ(out.request.descriptors[0][0].value, "10.0.0.7");
  EXPECT_FALSE((*map)->parse("not json", out, error));
  std::filesystem::remove(path);
}

TEST(LogMapTest, AWrongMapSaysWhere) {
  const std::string path = tempPath("bad-map.yaml");
  std::ofstream(path) << "time: t\ndomain: {value: d}\nclinet: x\n";
  auto map = LogMap::load(path);
  ASSERT_FALSE(map.ok());
  EXPECT_NE(map.error().message.find(path + ":3:1: unknown key \"clinet\""), std::string::npos)
      << map.error().message;
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace sluice::simulate
