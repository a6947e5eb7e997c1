#pragma once

#include <cstdint>
#include <functional>
#include <memory_resource>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/decision/decision.hpp"

namespace sluice::simulate {

/// Counts over time in at most kMaxPoints buckets: the bucket width starts at one second and
/// doubles (merging neighbours) whenever the span would need more, so a series of any
/// length costs the same memory.
class TimeSeries {
 public:
  static constexpr std::size_t kMaxPoints = 240;
  void add(Micros at, std::uint64_t count);
  Micros start() const { return start_; }
  Micros width() const { return width_; }
  const std::vector<std::uint64_t>& counts() const { return counts_; }
  /// Re-buckets to `width` (a multiple of this width) from `start` (<= start()).
  void alignTo(Micros start, Micros width);

 private:
  Micros start_ = 0;
  Micros width_ = kMicrosPerSecond;
  std::vector<std::uint64_t> counts_;
};

/// An identity with its hash (std::hash's, computed once a request): looked up in the
/// tables below without hashing it again for each.
struct HashedIdentity {
  std::string_view text;
  std::size_t hash;
};

/// The tables' hash and equality: std::hash of the identity's text, and lookups by a
/// HashedIdentity as by the string itself.
struct IdentityHash {
  using is_transparent = void;
  std::size_t operator()(const std::string& text) const { return std::hash<std::string>{}(text); }
  std::size_t operator()(const HashedIdentity& who) const { return who.hash; }
};
struct IdentityEqual {
  using is_transparent = void;
  bool operator()(const std::string& a, const std::string& b) const { return a == b; }
  bool operator()(const HashedIdentity& a, const std::string& b) const { return a.text == b; }
  bool operator()(const std::string& a, const HashedIdentity& b) const { return a == b.text; }
};
/// Its entries come from the differ's arena (never erased: a replay's identities are kept
/// to its end), so that a new identity costs no call to the heap and the end of a replay
/// frees them all at once.
template <typename T>
using IdentityMap = std::pmr::unordered_map<std::string, T, IdentityHash, IdentityEqual>;

/// One client of one rule: the identity its buckets are charged to.
struct ClientStats {
  std::uint64_t matched = 0;
  std::uint64_t denied_old = 0;
  std::uint64_t denied_new = 0;
  std::uint64_t newly_denied = 0;      ///< requests denied under the new rules only
  std::uint64_t no_longer_denied = 0;  ///< requests denied under the baseline only
  std::int64_t peak = 0;     ///< most hits in one window of the rule (its new window if any)
  Micros peak_at = 0;        ///< that window's start
  Micros window_start = -1;  ///< the window being counted
  std::int64_t window_hits = 0;
};

/// One rule name, across both rule sets.
struct RuleStats {
  RuleStats() = default;
  /// Its clients' entries from `memory`.
  explicit RuleStats(std::pmr::memory_resource* memory) : clients(memory) {}

  std::string name;
  std::string domain;
  std::string limit_old;  ///< "10 per minute, fixed_window" ("" when the baseline lacks it)
  std::string limit_new;
  std::int64_t limit_value = 0;  ///< the new rule's requests_per_unit (else the baseline's)
  Micros window_us = 0;          ///< the window peaks are counted in
  std::string window_name;       ///< "minute", "10 second"...
  bool shadow_old = false;
  bool shadow_new = false;
  bool eventual = false;
  bool sketch = false;
  std::uint64_t matched = 0;  ///< requests it matched under either set
  std::uint64_t matched_old = 0;
  std::uint64_t matched_new = 0;
  std::uint64_t denied_old = 0;
  std::uint64_t denied_new = 0;
  std::uint64_t mismatches = 0;  ///< logged decisions it bound that the baseline replay did not
  IdentityMap<ClientStats> clients;
  TimeSeries series_old;
  TimeSeries series_new;

  /// Clients with at least one request this rule newly denies / no longer denies.
  std::uint64_t clientsNewlyDenied() const;
  std::uint64_t clientsNoLongerDenied() const;
};

/// The request-level totals.
struct Totals {
  std::uint64_t requests = 0;
  std::uint64_t denied_old = 0;
  std::uint64_t denied_new = 0;
  std::uint64_t newly_denied = 0;
  std::uint64_t no_longer_denied = 0;
  std::uint64_t clients = 0;
  std::uint64_t clients_newly_denied = 0;
  std::uint64_t clients_no_longer_denied = 0;
  std::uint64_t compared = 0;  ///< logged decisions compared with the baseline replay
  std::uint64_t agreed = 0;
  Micros first_us = 0;
  Micros last_us = 0;
};

/// Compares two replays of the same requests, request by request and rule by rule.
/// Memory: one entry per rule and per (rule, identity) and per identity.
class Differ {
 public:
  /// `has_baseline` false: the baseline is "no rules" (nothing denied).
  explicit Differ(bool has_baseline) : has_baseline_(has_baseline) {}
  Differ(const Differ&) = delete;
  Differ& operator=(const Differ&) = delete;

  /// One request: its time, the baseline's decision (null without a baseline) and the new
  /// rules' decision. `logged` is the line's own decision ("" when it says none) and
  /// `logged_rule` its binding rule: compared with the baseline's.
  void add(Micros at, const Decision* old_decision, const Decision& new_decision,
           std::string_view logged, std::string_view logged_rule);

  const Totals& totals() const { return totals_; }
  /// Rules in name order.
  std::vector<const RuleStats*> rules() const;
  /// A few of the logged decisions the baseline did not reproduce: "time: logged X, replay Y".
  const std::vector<std::string>& mismatchSamples() const { return mismatch_samples_; }
  bool hasBaseline() const { return has_baseline_; }

  /// "Who": the identity a limit of descriptor `descriptor` is charged to: the client id
  /// where there is one, else the descriptor entries that make its bucket distinct (those
  /// counted per value: `user=mallory`, not the `path=/login` every such bucket shares);
  /// all its entries when none does (a bucket shared by everyone).
  static void identity(const Decision& decision, std::size_t descriptor, std::string& out);

 private:
  struct ClientTotals {
    std::uint64_t newly = 0;
    std::uint64_t no_longer = 0;
  };
  RuleStats& ruleFor(const LimitStatus& limit, const DecisionRequest& request, bool is_new);
  /// The entry of `who` in `table`, added when new.
  template <typename T>
  static T& entryOf(IdentityMap<T>& table, const HashedIdentity& who) {
    auto it = table.find(who);
    if (it == table.end()) {
      it = table.emplace(std::string(who.text), T{}).first;
    }
    return it->second;
  }
  void count(const Decision& decision, bool is_new, Micros at);
  /// add()'s parts: the rules and clients the request touched, its client's totals, and
  /// the baseline's replay against what was logged live.
  void countTouches(Micros at);
  void countClient(bool old_denied, bool new_denied);
  void compareWithLog(Micros at, const Decision& old_decision, const Decision& new_decision,
                      std::string_view logged, std::string_view logged_rule);

  bool has_baseline_;
  /// The identity tables' entries (declared first: destroyed after the tables).
  std::pmr::monotonic_buffer_resource arena_;
  Totals totals_;
  std::unordered_map<std::string, RuleStats> rules_;
  std::unordered_map<const RateLimit*, RuleStats*> by_limit_;
  IdentityMap<ClientTotals> clients_{&arena_};
  std::vector<std::string> mismatch_samples_;
  // Per request: the rules it touched (so a rule matched by both sets counts once).
  struct Touch {
    RuleStats* rule;
    ClientStats* client;
    bool old_matched, new_matched, old_denied, new_denied;
    std::int64_t hits;
  };
  std::vector<Touch> touches_;
  std::string who_;         ///< scratch: the identity of a descriptor
  std::string client_who_;  ///< the request's "who" under the new rules (descriptor 0's)
  HashedIdentity client_{};
};

}  // namespace sluice::simulate
