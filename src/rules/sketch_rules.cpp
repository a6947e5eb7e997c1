#include "rules/sketch_rules.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <map>
#include <memory>
#include <string_view>

#include "rules/suggest.hpp"
#include "rules/yaml_reader.hpp"
#include "sluice/limiter/sketch.hpp"
#include "sluice/rules/rules.hpp"

namespace sluice::rules_detail {
namespace {

constexpr std::array<std::string_view, 3> kSketchKeys{"expected_requests", "width", "depth"};
constexpr std::int64_t kDefaultDepth = 4;
/// The state of one rule (both windows) may take at most this much memory.
constexpr std::size_t kMaxSketchBytes = std::size_t{1} << 30;

std::string quotedName(std::string_view text) { return "'" + std::string(text) + "'"; }

std::string shown(const YAML::Node& node) {
  if (node.IsScalar()) {
    return quotedName(node.Scalar());
  }
  if (node.IsMap()) {
    return "a mapping";
  }
  if (node.IsSequence()) {
    return "a list";
  }
  return "nothing";
}

/// The node to point at for a value: the key when the value is empty.
const YAML::Node& where(const SketchOption& option) {
  return option.value.IsNull() || !option.value.IsDefined() ? option.key : option.value;
}

std::optional<std::int64_t> readInteger(const YAML::Node& key, const YAML::Node& value,
                                        std::string_view name, std::int64_t min, std::int64_t max,
                                        const SketchErrorSink& error) {
  const YAML::Node& at = value.IsNull() || !value.IsDefined() ? key : value;
  if (value.IsScalar() && value.Tag() != "!") {
    std::string_view text = value.Scalar();
    if (!text.empty() && text.front() == '+') {
      text.remove_prefix(1);
    }
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (!text.empty() && ec == std::errc{} && end == text.data() + text.size()) {
      if (v < min || v > max) {
        error(at, quotedName(name) + " must be between " + std::to_string(min) + " and " +
                      std::to_string(max) + ", got " + std::to_string(v));
        return std::nullopt;
      }
      return v;
    }
    if (ec == std::errc::result_out_of_range) {
      error(at, quotedName(name) + " is too large: " + value.Scalar() + " (at most " +
                    std::to_string(max) + ")");
      return std::nullopt;
    }
  }
  error(at, quotedName(name) + " must be an integer >= " + std::to_string(min) + ", got " +
                shown(value));
  return std::nullopt;
}

std::optional<bool> readBool(const SketchOption& option, const SketchErrorSink& error) {
  if (auto value = yamlBool(option.value)) {
    return value;
  }
  error(where(option), "'bloom' must be true or false, got " + shown(option.value));
  return std::nullopt;
}

/// The keys of `sketch: {...}` (a mapping): expected_requests or width, and depth.
template <typename Fail>
void readSketchMapping(const SketchOption& sketch, std::optional<std::int64_t>& expected_requests,
                       std::optional<std::int64_t>& width, std::int64_t& depth, bool& ok,
                       const Fail& fail) {
  std::map<std::string, YAML::Node> seen;
  for (const auto& item : sketch.value) {
    const YAML::Node& key = item.first;
    if (!key.IsScalar()) {
      fail(key, "a key must be a plain string in 'sketch'");
      continue;
    }
    const std::string& name = key.Scalar();
    if (std::find(kSketchKeys.begin(), kSketchKeys.end(), name) == kSketchKeys.end()) {
      std::string message = "unknown key " + quotedName(name) +
                            " in 'sketch' (expected expected_requests, width, depth)";
      if (const auto suggestion = closestMatch(name, kSketchKeys)) {
        message += "; did you mean " + quotedName(*suggestion) + "?";
      }
      fail(key, message);
      continue;
    }
    if (!seen.emplace(name, key).second) {
      fail(key, "duplicate key " + quotedName(name) + " in 'sketch'");
      continue;
    }
    const YAML::Node& value = item.second;
    if (name == "expected_requests") {
      expected_requests = readInteger(key, value, name, 1, std::int64_t{1} << 50, fail);
      ok = ok && expected_requests.has_value();
    } else if (name == "width") {
      width = readInteger(key, value, name, 1, kMaxSketchWidth, fail);
      ok = ok && width.has_value();
    } else {
      const auto d = readInteger(key, value, name, 1, kMaxSketchDepth, fail);
      ok = ok && d.has_value();
      depth = d.value_or(kDefaultDepth);
    }
  }
  if (seen.count("expected_requests") != 0 && seen.count("width") != 0) {
    fail(seen["width"], "give either 'expected_requests' or 'width' in 'sketch', not both");
  } else if (ok && seen.count("expected_requests") == 0 && seen.count("width") == 0) {
    fail(where(sketch),
         "'sketch' needs 'expected_requests' (admitted requests per window across all "
         "clients) or 'width' (counters per row)");
  }
}

/// `bloom: true` with `expected_clients`, into the params' filter size.
template <typename Fail>
void readBloomOptions(const SketchOptions& options, SketchParams& params, const Fail& fail) {
  if (options.bloom.present()) {
    const auto bloom = readBool(options.bloom, fail);
    if (bloom.value_or(false)) {
      if (!options.expected_clients.present()) {
        fail(options.bloom.key,
             "'bloom: true' needs 'expected_clients' (distinct clients per window; sizes the "
             "filter)");
      } else if (const auto clients =
                     readInteger(options.expected_clients.key, options.expected_clients.value,
                                 "expected_clients", 1, std::int64_t{1} << 31, fail)) {
        params.bloom_bits = sketchBloomBits(*clients);
        params.bloom_hashes = kSketchBloomHashes;
      }
    } else if (bloom && options.expected_clients.present()) {
      fail(options.expected_clients.key, "'expected_clients' applies only with 'bloom: true'");
    }
  } else if (options.expected_clients.present()) {
    fail(options.expected_clients.key, "'expected_clients' applies only with 'bloom: true'");
  }
}

}  // namespace

std::optional<SketchParams> parseSketchOptions(const SketchOptions& options,
                                               const YAML::Node& limit_node, std::int64_t limit,
                                               const SketchErrorSink& error) {
  bool ok = true;
  const auto fail = [&](const YAML::Node& at, const std::string& message) {
    ok = false;
    error(at, message);
  };
  SketchParams params;
  params.counter_bits = sketchCounterBits(std::max<std::int64_t>(limit, 0));
  if (params.counter_bits == 0) {
    fail(limit_node, "'requests_per_unit' " + std::to_string(limit) +
                         " is too large for algorithm 'sketch' (its counters hold at most "
                         "4294967294)");
  }
  std::optional<std::int64_t> expected_requests;
  std::optional<std::int64_t> width;
  std::int64_t depth = kDefaultDepth;
  if (!options.sketch.present()) {
    fail(limit_node,
         "algorithm 'sketch' needs 'sketch: {expected_requests: N}' (admitted requests per "
         "window across all clients) or 'sketch: {width: W, depth: D}'");
  } else if (!options.sketch.value.IsMap()) {
    fail(where(options.sketch),
         "'sketch' must be a mapping with 'expected_requests' or 'width' (and optional "
         "'depth'), not " +
             shown(options.sketch.value));
  } else {
    readSketchMapping(options.sketch, expected_requests, width, depth, ok, fail);
  }
  readBloomOptions(options, params, fail);
  if (!ok) {
    return std::nullopt;
  }
  params.depth = static_cast<std::uint32_t>(depth);
  params.width = width ? static_cast<std::uint32_t>(*width)
                       : sketchWidthFor(*expected_requests, std::max<std::int64_t>(limit, 1));
  if (sketchStateBytes(params) > kMaxSketchBytes) {
    error(where(options.sketch),
          "the sketch would take " + std::to_string(sketchStateBytes(params) >> 20) +
              " MiB (2 x depth x width x " + std::to_string(params.counter_bits / 8) +
              " bytes); at most 1024 MiB per rule");
    return std::nullopt;
  }
  return params;
}

std::shared_ptr<const SketchIdentity> makeSketchIdentity(const std::string& domain,
                                                         const std::string& node_path,
                                                         const std::string& slot,
                                                         const std::string& rule_name,
                                                         const SketchParams& params) {
  auto identity = std::make_shared<SketchIdentity>();
  identity->key = escapeKeyPart(domain) + ":" + escapeKeyPart(node_path) + ":" + slot + ":w" +
                  std::to_string(params.width) + "d" + std::to_string(params.depth) + "b" +
                  std::to_string(params.counter_bits) + "m" + std::to_string(params.bloom_bits) +
                  "k" + std::to_string(params.bloom_hashes);
  identity->domain = domain;
  identity->rule = rule_name;
  return identity;
}

}  // namespace sluice::rules_detail
