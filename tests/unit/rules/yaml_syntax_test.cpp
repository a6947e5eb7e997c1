// YAML that the spec forbids but yaml-cpp 0.7 accepts (include/sluice/common/yaml_syntax.hpp): each
// is rejected with file:line:column, and a differential check against PyYAML (python3-yaml) keeps
// the checker honest both ways on the same inputs.
#include "sluice/common/yaml_syntax.hpp"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sluice/rules/rules.hpp"

namespace sluice {
namespace {

struct Forbidden {
  std::string yaml;
  int line;
  int column;
  std::string message_start;
  bool yaml_cpp_accepts = true;  ///< false: yaml-cpp 0.7 rejects it too (a weaker message)
};

/// Found by tests/fuzz/fuzz_rules_yaml.cpp's corpus mutated and compared with PyYAML: yaml-cpp
/// 0.7 loads every one of these without an error (silently losing or merging content).
const std::vector<Forbidden>& forbidden() {
  static const std::vector<Forbidden> cases = {
      // The example: the rate_limit silently disappeared.
      {"domain: d\ndescriptors:\n  - key: k\n    value: '''\n    rate_limit:\n      unit: second\n"
       "      requests_per_unit: 5\n",
       4, 12, "YAML syntax error: unterminated quoted scalar"},
      {"domain: \"auth\n", 1, 9, "YAML syntax error: unterminated quoted scalar"},
      {"domain: d\nrate_limit: {unit: second, requests_per_unit: 5, name: 'x}\n", 2, 56,
       "YAML syntax error: unterminated quoted scalar", false},
      // A control character.
      {"domain\x07: d\n", 1, 7, "YAML syntax error: character U+0007"},
      {"domain: d\x7f\n", 1, 10, "YAML syntax error: character U+007F"},
      // Bytes that are not UTF-8.
      {"domain: \xff\xfe\n", 1, 9, "YAML syntax error: bytes that are not UTF-8"},
      // A tab in the indentation.
      {"domain: d\nrate_limit:\n\tunit: second\n", 3, 1, "YAML syntax error: a tab", false},
      // Plain text where a key should be: yaml-cpp folds it into the value above ("d d").
      {"domain: d\nd\n", 2, 1, "YAML syntax error: could not find expected ':'"},
      {"domain: d\ndescriptors:\n  - key: k\n    value: v\n    rate_limit\n", 5, 5,
       "YAML syntax error: could not find expected ':'"},
      // A key beside a plain scalar: yaml-cpp drops the mapping.
      {"doin:d # c\nrate_limit:\n  unit: day\n", 1, 1,
       "YAML syntax error: could not find expected ':'"},
      // Less indented than its siblings, lined up with nothing.
      {"domain: d\ndescriptors:\n    - key: a\n  - key: b\n", 4, 3,
       "YAML syntax error: bad indentation", false},
      {"  domain: auth\ndescriptors: []\n", 2, 1, "YAML syntax error: bad indentation"},
      // A key where a sequence stands.
      {"- - domain: auth\ndescriptors:\n", 2, 1, "YAML syntax error: expected '- '"},
      // Indicators that cannot start a plain scalar.
      {"domain: @d\n", 1, 9, "YAML syntax error: unexpected '@'", false},
      {"domain: `d\n", 1, 9, "YAML syntax error: unexpected '`'", false},
      {"domain: %d\n", 1, 9, "YAML syntax error: unexpected '%'", false},
      // A directive without its document start.
      {"%YAML 1.2\n", 1, 1, "YAML syntax error: a directive must be followed by '---'"},
  };
  return cases;
}

/// Valid YAML the checker must leave alone (the stress of quoting, continuation lines,
/// block scalars, flow collections and comments), plus every example rules file.
const std::vector<std::string>& valid() {
  static const std::vector<std::string> cases = {
      "domain: d\ndescriptors:\n  - key: k\n    value: 'it''s'\n    rate_limit: {unit: second, "
      "requests_per_unit: 5}\n",
      "domain: d # a comment with 'a quote\n",
      "domain: it's plain\n",
      "domain: a \"b\" c\n",
      "domain: d\nname: a plain scalar\n  continued on the next line\n",
      "key: >\n  folded\n  text\nother: |-\n    literal\n  # not a comment\n",
      "list:\n- a\n- b\nnext: c\n",
      "domain: d\ndescriptors:\n  - key: k\n    rate_limits:\n      - {unit: hour, "
      "requests_per_unit: 1}\n      - unit: day\n        requests_per_unit: 2\n",
      "flow: [a, 'b c', \"d\",\n  e]\n",
      "quoted: \"multi\n  line\"\nafter: x\n",
      "%YAML 1.2\n---\ndomain: d\n",
      "---\ndomain: d\n...\n",
      "anchors: &a x\nref: *a\n",
      "tagged: !!str 5\n",
      "empty:\n",
      "",
      "# only a comment\n",
      "unicode: \xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80\n",
      "url: http://example.com:8080/a\n",
      "time: 12:30\n",
  };
  return cases;
}

TEST(YamlSyntaxTest, ForbiddenInputIsRejectedWithItsLocation) {
  for (const Forbidden& c : forbidden()) {
    SCOPED_TRACE(c.yaml);
    auto error = checkYamlSyntax("f.yaml", c.yaml);
    ASSERT_TRUE(error.has_value());
    EXPECT_EQ(error->location.file, "f.yaml");
    EXPECT_EQ(error->location.line, c.line) << error->message;
    EXPECT_EQ(error->location.column, c.column) << error->message;
    EXPECT_EQ(error->message.rfind(c.message_start, 0), 0u) << error->message;
  }
}

TEST(YamlSyntaxTest, YamlCpp07AcceptsEveryForbiddenInput) {
  // Why the checker exists: remove a case from forbidden() once yaml-cpp rejects it.
  for (const Forbidden& c : forbidden()) {
    SCOPED_TRACE(c.yaml);
    if (c.yaml_cpp_accepts) {
      EXPECT_NO_THROW(YAML::Load(c.yaml));
    } else {
      EXPECT_ANY_THROW(YAML::Load(c.yaml));
    }
  }
}

TEST(YamlSyntaxTest, ValidInputPasses) {
  for (const std::string& yaml : valid()) {
    auto error = checkYamlSyntax("f.yaml", yaml);
    EXPECT_FALSE(error.has_value()) << yaml << "\n" << (error ? error->toString() : "");
  }
  for (const auto& entry : std::filesystem::recursive_directory_iterator(
           std::filesystem::path(SLUICE_SOURCE_DIR) / "config")) {
    if (entry.path().extension() != ".yaml") {
      continue;
    }
    std::ifstream in(entry.path());
    const std::string content((std::istreambuf_iterator<char>(in)), {});
    auto error = checkYamlSyntax(entry.path().string(), content);
    EXPECT_FALSE(error.has_value()) << (error ? error->toString() : "");
  }
}

TEST(YamlSyntaxTest, TheLoaderReportsTheErrorAndLosesNothingSilently) {
  LoadResult loaded = loadRulesFromStrings({{"auth.yaml", forbidden()[0].yaml}});
  ASSERT_EQ(loaded.errors.size(), 1u);
  EXPECT_EQ(loaded.errors[0].toString().rfind("auth.yaml:4:12: YAML syntax error", 0), 0u)
      << loaded.errors[0].toString();
  EXPECT_EQ(loaded.rules, nullptr);
}

/// Differential: PyYAML (a strict parser from Debian) must agree with the checker on every
/// input here: it rejects what the checker rejects, and accepts what the checker accepts.
/// (PyYAML speaks YAML 1.1; the cases avoid where 1.1 and 1.2 differ, e.g. tabs as
/// separators, empty keys.)
TEST(YamlSyntaxTest, PyYamlAgreesOnEveryCase) {
  nlohmann::json inputs = nlohmann::json::array();
  for (const Forbidden& c : forbidden()) {
    if (c.message_start.find("not UTF-8") == std::string::npos) {
      inputs.push_back(c.yaml);  // JSON cannot carry bytes that are not UTF-8
    }
  }
  const std::size_t forbidden_count = inputs.size();
  for (const std::string& yaml : valid()) {
    inputs.push_back(yaml);
  }
  const std::string dir =
      std::filesystem::temp_directory_path() / ("sluice_yaml_diff_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  { std::ofstream(dir + "/cases.json") << inputs.dump(); }
  const std::string script =
      "import json, yaml, sys\n"
      "out = []\n"
      "for s in json.load(open(sys.argv[1])):\n"
      "    try:\n"
      "        list(yaml.safe_load_all(s)); out.append(1)\n"
      "    except yaml.YAMLError:\n"
      "        out.append(0)\n"
      "print(json.dumps(out))\n";
  { std::ofstream(dir + "/diff.py") << script; }
  const std::string command = "python3 " + dir + "/diff.py " + dir + "/cases.json";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) {
    output.append(buffer, n);
  }
  const int status = ::pclose(pipe);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(status, 0) << "python3 with python3-yaml (scripts/deps.sh test) is needed";
  const auto accepted = nlohmann::json::parse(output);
  ASSERT_EQ(accepted.size(), inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string yaml = inputs[i];
    const bool checker_accepts = !checkYamlSyntax("f.yaml", yaml).has_value();
    EXPECT_EQ(accepted[i] == 1, checker_accepts) << yaml;
    EXPECT_EQ(checker_accepts, i >= forbidden_count) << yaml;
  }
}

}  // namespace
}  // namespace sluice
