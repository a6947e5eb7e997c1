#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <string_view>

#include "sluice/common/located_error.hpp"

/// The one way Sluice reads a YAML file (rules files, the server YAML of --config): strictly,
/// with every problem located. yaml-cpp is the parser; before it, checkYamlSyntax
/// (sluice/common/yaml_syntax.hpp) rejects what YAML forbids but yaml-cpp 0.7 accepts.
namespace sluice {

/// A parsed document, or the first problem found.
struct YamlDocument {
  YAML::Node root;  ///< null for an empty text
  std::optional<LocatedError> error;
};

/// Parses the one document of `content` (from `file`, for locations). Errors: the syntax
/// checks, yaml-cpp's "YAML syntax error: ..." at its position, and a second document
/// (`second_document` says what a file holds, e.g. "only one YAML document per file").
/// yaml-cpp's exceptions stop here.
YamlDocument parseYamlDocument(const std::string& file, const std::string& content,
                               std::string_view second_document);

/// Converts a yaml-cpp mark into a location in `file` (1:1 when the mark is unknown).
SourceLocation yamlLocation(const std::string& file, const YAML::Mark& mark);

}  // namespace sluice
