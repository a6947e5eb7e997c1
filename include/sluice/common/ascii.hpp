#pragma once

#include <cstddef>
#include <string_view>

namespace sluice {

/// ASCII lower case of one byte (other bytes unchanged; no locale).
inline char toLowerAscii(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

/// The one case-insensitive comparison (ASCII letters only, as HTTP header names, time units
/// and algorithm names need; no locale).
inline bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (toLowerAscii(a[i]) != toLowerAscii(b[i])) {
      return false;
    }
  }
  return true;
}

}  // namespace sluice
