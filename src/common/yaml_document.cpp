#include "sluice/common/yaml_document.hpp"

#include <yaml-cpp/eventhandler.h>

#include <sstream>

#include "sluice/common/yaml_syntax.hpp"

namespace sluice {
namespace {

/// Sees where each document of a stream starts, and nothing else.
class DocumentProbe final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& /*mark*/, YAML::anchor_t /*anchor*/) override {}
  void OnAlias(const YAML::Mark& /*mark*/, YAML::anchor_t /*anchor*/) override {}
  void OnScalar(const YAML::Mark& /*mark*/, const std::string& /*tag*/, YAML::anchor_t /*anchor*/,
                const std::string& /*value*/) override {}
  void OnSequenceStart(const YAML::Mark& /*mark*/, const std::string& /*tag*/,
                       YAML::anchor_t /*anchor*/, YAML::EmitterStyle::value /*style*/) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& /*mark*/, const std::string& /*tag*/, YAML::anchor_t /*anchor*/,
                  YAML::EmitterStyle::value /*style*/) override {}
  void OnMapEnd() override {}

  YAML::Mark start;
};

/// The first document of a text. Not YAML::LoadAll: yaml-cpp 0.7 loops forever, allocating,
/// on a stray ',' outside a flow collection (jbeder/yaml-cpp#1040, fixed upstream in 0.8.0).
/// A probe pass looks at most at two documents and notices when the parser stops making
/// progress. Throws YAML::Exception on syntax errors.
YamlDocument firstDocument(const std::string& file, const std::string& content,
                           std::string_view second_document) {
  std::istringstream stream(content);
  YAML::Parser parser(stream);
  DocumentProbe probe;
  if (!parser.HandleNextDocument(probe)) {
    return YamlDocument{};
  }
  const YAML::Mark first = probe.start;
  if (parser.HandleNextDocument(probe)) {
    if (probe.start.pos == first.pos) {
      const char found = first.pos >= 0 && static_cast<std::size_t>(first.pos) < content.size()
                             ? content[static_cast<std::size_t>(first.pos)]
                             : '?';
      return YamlDocument{
          {},
          LocatedError{yamlLocation(file, first),
                       std::string("YAML syntax error: unexpected '") + found + "'"}};
    }
    return YamlDocument{
        {}, LocatedError{yamlLocation(file, probe.start), std::string(second_document)}};
  }
  return YamlDocument{YAML::Load(content), std::nullopt};
}

}  // namespace

SourceLocation yamlLocation(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0) {
    return SourceLocation{file, 1, 1};
  }
  return SourceLocation{file, mark.line + 1, mark.column + 1};
}

YamlDocument parseYamlDocument(const std::string& file, const std::string& content,
                               std::string_view second_document) {
  if (auto error = checkYamlSyntax(file, content)) {
    return YamlDocument{{}, std::move(*error)};
  }
  try {
    return firstDocument(file, content, second_document);
  } catch (const YAML::ParserException& e) {
    return YamlDocument{{},
                        LocatedError{yamlLocation(file, e.mark), "YAML syntax error: " + e.msg}};
  } catch (const YAML::Exception& e) {
    return YamlDocument{{}, LocatedError{{file, 1, 1}, "YAML error: " + e.msg}};
  }
}

}  // namespace sluice
