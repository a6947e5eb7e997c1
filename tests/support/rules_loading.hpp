#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "sluice/rules/rules.hpp"

namespace sluice::test {

/// Loads one YAML document as file "test.yaml" and fails the test on any error.
inline RuleSetPtr loadOne(const std::string& yaml) {
  LoadResult result = loadRulesFromStrings({{"test.yaml", yaml}});
  for (const RuleError& error : result.errors) {
    ADD_FAILURE() << error.toString();
  }
  return result.rules;
}

/// Loads one YAML document as file "test.yaml" and returns its errors.
inline std::vector<RuleError> errorsOf(const std::string& yaml) {
  return loadRulesFromStrings({{"test.yaml", yaml}}).errors;
}

inline Descriptor desc(std::vector<std::pair<std::string, std::string>> entries) {
  Descriptor out;
  for (auto& [key, value] : entries) {
    out.push_back(Entry{std::move(key), std::move(value)});
  }
  return out;
}

}  // namespace sluice::test
