#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "sluice/limiter/limiter.hpp"

/// The `sketch` algorithm's options of a rate limit: `sketch: {expected_requests: N}` or
/// `sketch: {width: W, depth: D}`, `bloom: true` and `expected_clients: N`
/// (config/rules/README.md). Private to the rules loader.
namespace sluice::rules_detail {

/// One `key: value` of a rate limit, or absent (null key node).
struct SketchOption {
  YAML::Node key;
  YAML::Node value;
  bool present() const { return key.IsDefined() && !key.IsNull(); }
};

struct SketchOptions {
  SketchOption sketch;
  SketchOption bloom;
  SketchOption expected_clients;
};

/// Reports one error at a node (the loader turns it into file:line:column).
using SketchErrorSink = std::function<void(const YAML::Node& at, const std::string& message)>;

/// Validates the options of a limit whose algorithm is `sketch` with limit L = `limit`, and
/// returns the geometry (identity not set), or nullopt after reporting every error through
/// `error`. `limit_node` is the rate limit mapping (for a missing `sketch:`).
std::optional<SketchParams> parseSketchOptions(const SketchOptions& options,
                                               const YAML::Node& limit_node, std::int64_t limit,
                                               const SketchErrorSink& error);

/// The identity of a rule's sketch: domain, node path and slot (like a bucket key without the
/// descriptor values: every client and value of the rule shares it), and the geometry, so a
/// reload that changes the geometry starts a fresh sketch instead of misreading the old one.
std::shared_ptr<const SketchIdentity> makeSketchIdentity(const std::string& domain,
                                                         const std::string& node_path,
                                                         const std::string& slot,
                                                         const std::string& rule_name,
                                                         const SketchParams& params);

}  // namespace sluice::rules_detail
