#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/located_error.hpp"
#include "sluice/limiter/limiter.hpp"
#include "sluice/rules/bucket_key.hpp"

/// The rules model (envoyproxy/ratelimit's YAML schema plus Sluice's extensions), the
/// loader/validator and the matcher. Pure: no Asio, no hiredis, no clock reads.
namespace sluice {

enum class TimeUnit : std::uint8_t { kSecond, kMinute, kHour, kDay, kWeek, kMonth, kYear };

/// Length of one unit in microseconds (month = 30 days, year = 365 days).
Micros unitMicros(TimeUnit unit);
/// "second", "minute", ... (lower case, as envoyproxy/ratelimit spells them).
std::string_view unitName(TimeUnit unit);
/// Case-insensitive parse; nullopt when unknown.
std::optional<TimeUnit> parseUnit(std::string_view text);

/// One rate limit (a `rate_limit:` block, one item of `rate_limits:`, or a domain-level one).
struct RateLimit {
  std::string name;  ///< explicit `name`, else generated from the node path
  bool explicit_name = false;
  TimeUnit unit = TimeUnit::kSecond;
  std::int64_t unit_multiplier = 1;
  std::int64_t requests_per_unit = 0;
  bool unlimited = false;
  bool shadow_mode = false;  ///< from the owning node
  bool quota_mode = false;   ///< from the owning node (envoyproxy/ratelimit's `quota_mode`)
  /// A `candidate:` (docs/what-if.md): evaluated in its own buckets beside the live limits
  /// of its node, never denying and never shown as a limit of the answer; what it would have
  /// decided is counted (sluice_candidate_decisions_total, /limits/top?candidate=1).
  bool candidate = false;
  LimitParams params;  ///< ready for the limiter (limit, window, algorithm, ...)
  /// `overridable: false`: runtime overrides (PUT /limits/overrides) are refused for it.
  bool overridable = true;
  std::vector<std::string> replaces;
  /// `calendar: {time_zone_from: KEY}`: the request descriptor's entry KEY names the zone of
  /// this limit's calendar windows (a key on the way to the limit's node, so its value is
  /// part of the bucket); "" when the zone is the rule's own (params.calendar.zone).
  std::string calendar_zone_from;
  /// With calendar_zone_from: the zone used when the request's value names no zone of the
  /// database (`time_zone:` beside it); null: such a request is refused.
  const TimeZone* calendar_zone_fallback = nullptr;
  /// Identity of this limit within its node, part of the bucket key (BucketKey::limitId):
  /// index in `rate_limits:`, 0 for a single `rate_limit:`.
  std::string limit_id;
  /// MatchedLimit::bucket_key for a request whose entries met this limit's node through
  /// values written in the rules (DescriptorNode::exact_prefix): filled by the loader, so
  /// the matcher copies it instead of building it; empty in a tree built by hand.
  std::string exact_bucket_key;
  SourceLocation location;
};

/// Lookup table over one level of the descriptors tree, built by the loader (indices into
/// that level's vector). Lets the matcher find the exact node in O(log n); when it is empty
/// (a hand-built tree) the matcher scans the level instead, with the same result.
struct DescriptorLevelIndex {
  struct ForKey {
    std::map<std::string, std::size_t, std::less<>> exact;  ///< every explicit value (literal)
    std::vector<std::size_t> wildcards;                     ///< in file order
    std::optional<std::size_t> key_only;
  };
  std::map<std::string, ForKey, std::less<>> by_key;
};

/// One node of the `descriptors` tree.
struct DescriptorNode {
  std::string key;
  std::optional<std::string> value;  ///< nullopt: key-only node (each value counted apart)
  bool wildcard = false;             ///< value contains '*'
  bool share_threshold = false;      ///< all values matching the wildcard share one counter
  bool shadow_mode = false;
  /// envoyproxy/ratelimit's `quota_mode`: this node's limits deny a request only when every
  /// quota-mode descriptor of the request is over its limit.
  bool quota_mode = false;
  bool detailed_metric = false;
  bool value_to_metric = false;
  std::string metadata_json;      ///< `metadata` as compact JSON text ("" if none)
  std::vector<RateLimit> limits;  ///< empty: no limit at this node
  std::vector<DescriptorNode> children;
  DescriptorLevelIndex children_index;
  /// The bucket prefix (escaped domain and entries down to this node) when every node on
  /// the way has a value and the request's values were those values (or shared patterns):
  /// filled by the loader; empty for key-only nodes, those below them, and hand-built trees.
  std::string exact_prefix;
  SourceLocation location;
};

/// One domain: one rules file.
struct DomainConfig {
  std::string domain;
  std::vector<DescriptorNode> descriptors;
  std::vector<RateLimit> domain_limits;  ///< applied when a request sends no descriptors
  DescriptorLevelIndex descriptors_index;
  SourceLocation location;
};

/// An immutable snapshot of all rules; swapped atomically on reload (docs/architecture.md,
/// "Conventions").
struct RuleSet {
  std::map<std::string, DomainConfig, std::less<>> domains;
  std::vector<std::string> files;  ///< the files it came from
  std::string hash;                ///< content hash, hex
  std::int64_t loaded_at_ms = 0;   ///< set by whoever loads it (the loader does not read clocks)
  /// The version it came with from an xDS management server (DiscoveryResponse version_info);
  /// empty for rules files.
  std::string version;

  const DomainConfig* findDomain(std::string_view domain) const;
  /// Number of limits (all nodes, all domains).
  std::size_t limitCount() const;
};
using RuleSetPtr = std::shared_ptr<const RuleSet>;

/// A validation error; toString() is "file:line:column: message" ("file: message" for an
/// error without a position, such as an unreadable file; line is then 0).
using RuleError = LocatedError;

struct LoadResult {
  RuleSetPtr rules;               ///< null when errors is not empty
  std::vector<RuleError> errors;  ///< every error found, in file order
};

/// How a set of files becomes one RuleSet.
struct LoadOptions {
  /// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG (`--merge-domain-config`): files that name
  /// the same domain are merged into one, their top-level descriptors added in file order
  /// (a composite key defined twice is still an error, and so is a domain-level limit given
  /// by two files). Off: a domain defined by two files is an error.
  bool merge_domain_config = false;
};

/// Loads a rules file or a directory of *.yaml / *.yml (hidden files and editor temporaries
/// ignored), validates all of it as one, and reports every error.
LoadResult loadRules(const std::string& path);
/// As above, stamping the new RuleSet's loaded_at_ms (the loader itself reads no clock).
LoadResult loadRules(const std::string& path, std::int64_t loaded_at_ms);
LoadResult loadRules(const std::string& path, std::int64_t loaded_at_ms,
                     const LoadOptions& options);
/// True for the names a rules directory loads: `*.yaml` / `*.yml` (any case), not hidden.
/// Editor temporaries (`a.yaml~`, `.a.yaml.swp`, `#a.yaml#`, `a.yaml.tmp`) are all excluded.
bool isRulesFileName(std::string_view name);
/// Loads already-read documents: (file name, YAML text) pairs. For tests and fuzzing.
LoadResult loadRulesFromStrings(const std::vector<std::pair<std::string, std::string>>& files);
LoadResult loadRulesFromStrings(const std::vector<std::pair<std::string, std::string>>& files,
                                const LoadOptions& options);
/// As above, stamping the new RuleSet's loaded_at_ms.
LoadResult loadRulesFromStrings(const std::vector<std::pair<std::string, std::string>>& files,
                                std::int64_t loaded_at_ms, const LoadOptions& options);

/// One key/value pair of a request descriptor.
struct Entry {
  std::string key;
  std::string value;
};
using Descriptor = std::vector<Entry>;

/// A limit that applies to a request.
struct MatchedLimit {
  const RateLimit* limit = nullptr;      ///< points into the RuleSet: keep the snapshot alive
  const DescriptorNode* node = nullptr;  ///< null for the domain-level limit
  /// The counter's identity without store prefix and client (BucketKey's `bucket`): escaped
  /// domain, descriptor entries (wildcard values replaced by the pattern under
  /// share_threshold), limit id and algorithm. Two different descriptors never yield the
  /// same bucket key.
  std::string bucket_key;
};

/// The limits of one request descriptor; empty when no rule matched it.
struct DescriptorMatch {
  std::vector<MatchedLimit> limits;
  /// A node with at least one limit matched (even if all its limits are unlimited or were
  /// dropped by `replaces`); always true for the domain-level limit.
  bool matched = false;
  const DescriptorNode* node = nullptr;  ///< the matched node; null for the domain-level limit
};

/// One entry per request descriptor (or a single one for the domain-level limit when the
/// request has no descriptors). `replaces` is already applied; unlimited limits are kept
/// (limit->unlimited) so they can be reported, and must not be evaluated.
struct RequestMatch {
  std::vector<DescriptorMatch> descriptors;
  /// The bucket being built while walking the tree: kept only for its capacity, so that a
  /// reused RequestMatch (matchRequestInto) allocates nothing once warm.
  std::string scratch;
};

RequestMatch matchRequest(const DomainConfig& domain, const std::vector<Descriptor>& descriptors);
/// The same match written into `out`, reusing its vectors and bucket-key strings (a caller
/// that keeps one RequestMatch per thread matches without allocating once warm). `out`'s
/// previous content is replaced entirely.
void matchRequestInto(const DomainConfig& domain, const std::vector<Descriptor>& descriptors,
                      RequestMatch& out);

/// Parses a duration with a unit: `500us`, `250ms`, `2s`, `5m`, `1h`, `1d` (a non-negative
/// integer, then the unit). nullopt when malformed or out of range.
std::optional<Micros> parseDuration(std::string_view text);

/// The longest span a rule may ask for (10 years): a window (unit x unit_multiplier), a full
/// bucket (burst x window / requests_per_unit), `min_interval` and `warmup`. The algorithms
/// add a few spans to the current time; within this bound every such sum fits in int64 and
/// stays below 2^53 microseconds, where the Redis scripts' Lua doubles are exact.
inline constexpr Micros kMaxRuleSpanMicros = 10LL * 365 * 86'400 * kMicrosPerSecond;

/// Renders a RuleSet as JSON for `GET /rules`: {"hash", "loaded_at_ms", "files",
/// "limit_count", "domains": {name: {"file", "line", "rate_limits": [...], "descriptors":
/// [{"key", "value"?, "wildcard", ..., "rate_limits": [...], "descriptors": [...]}]}}}.
std::string rulesToJson(const RuleSet& rules);

/// The `--validate` command: loads `path` (file or directory), prints every error to `out`
/// as `file:line:column: message` (one per line) or a one-line summary when valid.
/// Returns the process exit code: 0 when valid, 1 otherwise.
int validateRulesCommand(const std::string& path, std::ostream& out);
int validateRulesCommand(const std::string& path, std::ostream& out, const LoadOptions& options);

}  // namespace sluice
