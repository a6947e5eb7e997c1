#pragma once

#include <string>

namespace sluice {

/// Where something is in a file; line and column are 1-based (line 0: the file as a whole).
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
};

/// A problem in a configuration file (rules, server YAML); toString() is
/// "file:line:column: message" ("file: message" for an error without a position, such as an
/// unreadable file; line is then 0).
struct LocatedError {
  SourceLocation location;
  std::string message;
  std::string toString() const;
};

}  // namespace sluice
