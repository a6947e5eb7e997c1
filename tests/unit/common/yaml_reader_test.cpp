#include "sluice/common/yaml_reader.hpp"

#include <gtest/gtest.h>

#include "sluice/common/yaml_document.hpp"

namespace sluice {
namespace {

constexpr std::string_view kKeys[] = {"name", "count", "on", "every"};

struct Read {
  std::vector<LocatedError> errors;
  YAML::Node root;
};

Read parse(const std::string& text) {
  Read read;
  YamlDocument document = parseYamlDocument("f.yaml", text, "one document");
  EXPECT_FALSE(document.error) << document.error->toString();
  read.root = document.root;
  return read;
}

TEST(YamlDocumentTest, StrictSyntaxAndOneDocumentWithLocations) {
  EXPECT_EQ(parseYamlDocument("f.yaml", "a: 'open\n", "one").error->toString().substr(0, 27),
            "f.yaml:1:4: YAML syntax err");
  EXPECT_EQ(parseYamlDocument("f.yaml", "a:\n\tb: 1\n", "one").error->location.line, 2);
  const auto second = parseYamlDocument("f.yaml", "a: 1\n---\nb: 2\n", "only one document");
  ASSERT_TRUE(second.error);
  EXPECT_EQ(second.error->toString(), "f.yaml:2:1: only one document");
  EXPECT_TRUE(parseYamlDocument("f.yaml", "", "one").root.IsNull());
  EXPECT_FALSE(parseYamlDocument("f.yaml", "a: [1, 2]\n", "one").error);
}

TEST(YamlReaderTest, TypedReadsReportTheirLocation) {
  Read r = parse("name: [x]\ncount: -3\non: maybe\nevery: 5x\n");
  YamlReader reader("f.yaml", r.errors);
  Fields fields = reader.readFields(r.root, KeySet{kKeys, "at the top level", {}});
  EXPECT_FALSE(reader.readString(fields.at("name"), "name"));
  EXPECT_FALSE(reader.readInteger(fields.at("count"), "count", 0, 10));
  EXPECT_FALSE(reader.readBool(fields.at("on"), "on"));
  EXPECT_FALSE(reader.readDuration(fields.at("every"), "every", 1'000'000, "1s"));
  ASSERT_EQ(r.errors.size(), 4u);
  EXPECT_EQ(r.errors[0].toString(), "f.yaml:1:7: 'name' must be a string, not a list");
  EXPECT_EQ(r.errors[1].toString(), "f.yaml:2:8: 'count' must be a non-negative integer, got '-3'");
  EXPECT_EQ(r.errors[2].toString(), "f.yaml:3:5: 'on' must be true or false, got 'maybe'");
  EXPECT_EQ(r.errors[3].location.line, 4);
}

TEST(YamlReaderTest, PathNamingForSectionsOfTheServerYaml) {
  Read r = parse("count: x\n");
  YamlReader reader("f.yaml", r.errors, YamlReader::Naming::kPath);
  Fields fields = reader.readFields(r.root, KeySet{kKeys, "in s", {}});
  EXPECT_FALSE(reader.readInteger(fields.at("count"), "s.count", 1, 10));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].message, "s.count: must be an integer >= 1, got 'x'");
}

TEST(YamlReaderTest, UnknownAndDuplicateKeys) {
  Read r = parse("name: a\nnmae: b\nname: c\n");
  YamlReader reader("f.yaml", r.errors);
  Fields fields = reader.readFields(r.root, KeySet{kKeys, "at the top level", {}});
  EXPECT_EQ(fields.size(), 1u);
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.errors[0].toString(),
            "f.yaml:2:1: unknown key 'nmae' at the top level (expected one of: name, count, on, "
            "every)");
  EXPECT_EQ(r.errors[1].toString(), "f.yaml:3:1: duplicate key 'name' (first given at line 1)");
}

TEST(YamlReaderTest, AValidFileReadsCleanly) {
  Read r = parse("name: a\ncount: 7\non: yes\nevery: 250ms\n");
  YamlReader reader("f.yaml", r.errors);
  Fields fields = reader.readFields(r.root, KeySet{kKeys, "at the top level", {}});
  EXPECT_EQ(reader.readString(fields.at("name"), "name"), "a");
  EXPECT_EQ(reader.readInteger(fields.at("count"), "count", 0, 10), 7);
  EXPECT_EQ(reader.readBool(fields.at("on"), "on"), true);
  EXPECT_EQ(reader.readDuration(fields.at("every"), "every", 1'000'000, "1s"), 250'000);
  EXPECT_TRUE(r.errors.empty());
}

}  // namespace
}  // namespace sluice
