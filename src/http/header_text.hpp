#pragma once

#include <string_view>

#include "sluice/common/ascii.hpp"

/// Small text helpers for header names and values. Header names compare with the one
/// case-insensitive comparison, sluice::equalsIgnoreCase (common/ascii.hpp).
namespace sluice::http {

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
