#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "simulate/identity_table.hpp"
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
  /// The bucket of the last add(), [last_from_, last_to_) (empty when none).
  std::size_t last_index_ = 0;
  Micros last_from_ = 0;
  Micros last_to_ = 0;
};

/// One client of one rule: the identity its buckets are charged to. What every request
/// counts comes first: with the identity's text, the first 64 bytes of its table entry
/// (IdentityTable::prefetchEntry); the rest is counted on denials.
struct ClientStats {
  std::uint64_t matched = 0;
  Micros window_start = -1;  ///< the window being counted
  std::int64_t window_hits = 0;
  std::int64_t peak = 0;  ///< most hits in one window of the rule (its new window if any)
  std::uint64_t denied_old = 0;
  std::uint64_t denied_new = 0;
  std::uint64_t newly_denied = 0;      ///< requests denied under the new rules only
  std::uint64_t no_longer_denied = 0;  ///< requests denied under the baseline only
  Micros peak_at = 0;                  ///< that window's start
};

/// One rule name, across both rule sets.
struct RuleStats {
  std::string name;
  std::string domain;
  std::string limit_old;  ///< "10 per minute, fixed_window" ("" when the baseline lacks it)
  std::string limit_new;
  std::int64_t limit_value = 0;  ///< the new rule's requests_per_unit (else the baseline's)
  Micros window_us = 0;          ///< the window peaks are counted in
  bool window_resized = false;   ///< window_us changed after it was first set
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
  IdentityTable<ClientStats> clients;
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

  /// One request: its time, the baseline's decision (null without a baseline) and the new
  /// rules' decision. `logged` is the line's own decision ("" when it says none) and
  /// `logged_rule` its binding rule: compared with the baseline's.
  void add(Micros at, const Decision* old_decision, const Decision& new_decision,
           std::string_view logged, std::string_view logged_rule);

  /// Counts what add() left to count (see Pending): the accessors below do it themselves, so
  /// that they see every request added.
  void finish();

  const Totals& totals() const {
    settle();
    return totals_;
  }
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
  /// A request's counts that need its identities' entries (in tables of hundreds of
  /// thousands, out of the processor's caches): add() notes them here and asks for the
  /// memory of their cells, the next add() asks for the entries those cells point at, and
  /// the one after counts them, by then mostly without waiting for memory. Requests are
  /// counted in the order they were added, each exactly as if at once.
  struct Touch {
    RuleStats* rule;
    std::size_t who;  ///< index in Pending::names
    std::size_t hash;
    bool old_matched, new_matched, old_denied, new_denied;
    std::int64_t hits;
  };
  struct Pending {
    Micros at = 0;
    std::vector<Touch> touches;      ///< the rules it touched (one per rule and identity)
    std::vector<std::string> names;  ///< the identities of its touches (storage reused)
    std::size_t names_used = 0;
    std::size_t client_hash = 0;  ///< of names[0], the request's own identity
    bool old_denied = false;
    bool new_denied = false;
  };
  static constexpr std::size_t kPipeline = 3;

  RuleStats& ruleFor(const LimitStatus& limit, const DecisionRequest& request, bool is_new);
  void count(const Decision& decision, bool is_new, Pending& pending);
  /// The pipeline's steps for one pending request (see Pending).
  void fetchEntries(const Pending& pending) const;
  void countPending(Pending& pending);
  /// finish() for the const accessors (a Differ is never itself const: it is counting).
  void settle() const { const_cast<Differ*>(this)->finish(); }
  /// countPending()'s parts: the rules and clients the request touched, its client's totals.
  void countTouches(const Pending& pending);
  void countClient(const Pending& pending);
  void compareWithLog(Micros at, const Decision& old_decision, const Decision& new_decision,
                      std::string_view logged, std::string_view logged_rule);

  bool has_baseline_;
  Totals totals_;
  std::unordered_map<std::string, RuleStats> rules_;
  std::unordered_map<const RateLimit*, RuleStats*> by_limit_;
  /// by_limit_'s recent finds, by a hash of the limit's address (see ruleFor()).
  static constexpr unsigned kRuleCacheBits = 6;
  std::array<std::pair<const RateLimit*, RuleStats*>, std::size_t{1} << kRuleCacheBits>
      rule_cache_{};
  IdentityTable<ClientTotals> clients_;
  std::vector<std::string> mismatch_samples_;
  std::array<Pending, kPipeline> pending_;
  std::uint64_t added_ = 0;    ///< requests add()ed
  std::uint64_t counted_ = 0;  ///< of those, counted (the others are in pending_)
  std::string who_;            ///< scratch: the identity of a descriptor
};

}  // namespace sluice::simulate
