#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rules/yaml_reader.hpp"
#include "sluice/rules/rules.hpp"

/// The parser of one rate limit (`rate_limit:` or an item of `rate_limits:`): its unit and
/// count, name and `replaces`, algorithm and the parameters that algorithm takes, and the
/// bounds that keep its arithmetic exact in both stores.
namespace sluice::rules_detail {

/// Parses the limits of one file through `reader`, which collects the errors. Remembers the
/// limits' names and `replaces` references so that checkReplaces can run once the whole
/// domain is read.
class LimitParser {
 public:
  explicit LimitParser(YamlReader& reader) : reader_(reader) {}

  /// One limit from its mapping. `generated_name` names it when it has no `name`; `index`
  /// (its position on the node) makes its key slot; `shadow` is the node's shadow_mode;
  /// `candidate`: the node's `candidate:` (its own key slot, RateLimit::candidate).
  /// nullopt when any of its fields is wrong (all of them are reported).
  std::optional<RateLimit> parse(const YAML::Node& map, const std::string& generated_name,
                                 std::size_t index, bool shadow, bool candidate = false);

  /// The domain of the limits parsed next (names `sketch` rules' shared state).
  void setDomain(std::string domain) { domain_ = std::move(domain); }

  /// Every replaced name exists among the limits of `domain` parsed so far.
  void checkReplaces(std::string_view domain);

 private:
  /// A `replaces` reference, checked once the whole domain is known.
  struct ReplacesRef {
    std::string name;
    SourceLocation location;
  };

  /// True when the limit says `algorithm: concurrency` (read before its other fields).
  static bool isConcurrency(const Fields& fields);
  /// `max_in_flight` and `lease`, in place of the window; the lease goes to lease_us_.
  void readConcurrency(const Fields& fields, const YAML::Node& map, RateLimit& limit);
  void readWindow(const Fields& fields, const YAML::Node& map, RateLimit& limit);
  void readMultiplier(const Fields& fields, RateLimit& limit);
  void readName(const Fields& fields, RateLimit& limit);
  void readReplaces(const Field& field, RateLimit& limit);
  /// false when the algorithm is unknown (or unreadable): its parameters are then not checked.
  bool readAlgorithm(const Fields& fields, RateLimit& limit);
  /// Reads the optional parameters; returns `burst` when given and valid.
  std::optional<std::int64_t> readParams(const Fields& fields, bool algorithm_known,
                                         RateLimit& limit);
  void checkBurstSpan(const Fields& fields, const RateLimit& limit,
                      std::optional<std::int64_t> burst);
  void checkExactArithmetic(const Fields& fields, const RateLimit& limit,
                            std::optional<std::int64_t> burst);
  std::optional<SketchParams> readSketch(const Fields& fields, const YAML::Node& map,
                                         std::int64_t limit);

  YamlReader& reader_;
  std::string domain_;
  Micros lease_us_ = 0;  ///< the concurrency limit being parsed: its `lease`
  std::set<std::string> names_;
  std::vector<ReplacesRef> replaces_refs_;
};

}  // namespace sluice::rules_detail
