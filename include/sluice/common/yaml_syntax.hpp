#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "sluice/common/located_error.hpp"

namespace sluice {

/// Finds what the YAML 1.2 spec forbids but yaml-cpp 0.7 accepts silently (each found by
/// fuzzing and by a differential check against PyYAML, tests/unit/rules/yaml_syntax_test.cpp),
/// so that a broken YAML file (rules, server YAML) is rejected instead of losing part of its
/// content:
///   - a quoted scalar ('...' or "...") never closed (yaml-cpp ends it at the end of input);
///   - a character YAML does not allow in a stream (C0 controls other than tab, LF and CR,
///     DEL, C1 controls other than NEL, U+FFFE/U+FFFF) or bytes that are not UTF-8;
///   - a tab in the indentation of a line;
///   - a line of plain text where a `key:` is expected (a block mapping's key column), or a
///     `key:` where a plain scalar already stands at that indentation (yaml-cpp folds them
///     into one scalar or drops a key);
///   - a directive (`%YAML`, `%TAG`) not followed by `---`.
/// Returns the first problem with its file:line:column (1-based), nullopt when none. Only
/// the lexical and indentation level is checked; yaml-cpp parses the rest.
std::optional<LocatedError> checkYamlSyntax(const std::string& file, std::string_view content);

}  // namespace sluice
