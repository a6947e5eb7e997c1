#pragma once

#include <algorithm>
#include <cctype>
#include <string_view>

/// Small text helpers for header names and values.
namespace sluice::http {

/// ASCII case-insensitive equality, as header names compare.
inline bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

/// `text` without leading and trailing spaces and tabs (RFC 9110 optional whitespace).
inline std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

}  // namespace sluice::http
