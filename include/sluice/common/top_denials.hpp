#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/space_saving.hpp"

namespace sluice {

struct TopDenialsOptions {
  /// Length of a window; windows are aligned on the Unix epoch.
  Micros window_us = 60 * kMicrosPerSecond;
  /// Counters per rule, per window, per I/O thread (the k of Space-Saving).
  std::size_t capacity = 100;
};

/// What GET /limits/top asks for: "" matches every domain / rule; at most `n` clients each.
struct TopDenialsQuery {
  std::string domain;
  std::string rule;
  std::size_t n = 10;
  /// The clients candidate limits would deny (docs/what-if.md) instead of the live denials.
  bool candidate = false;
};

/// The most denied clients of one rule, over the previous window and the current one.
struct RuleTopDenials {
  std::string domain;
  std::string rule;
  bool candidate = false;         ///< a candidate limit's would-be denials
  std::uint64_t denied = 0;       ///< N: denials of this rule counted in these windows
  std::uint64_t error_bound = 0;  ///< no count is off by more: sum of N_i / k over summaries
  std::vector<SpaceSaving::Entry> clients;  ///< largest count first; key = client id
};

struct TopDenialsReport {
  Micros from_us = 0;                 ///< start of the previous window
  Micros to_us = 0;                   ///< now
  std::vector<RuleTopDenials> rules;  ///< by domain, then rule
};

/// The denials of one I/O thread, per (domain, rule): a Space-Saving summary of client ids
/// for the current window and one for the previous window. record() runs on that thread
/// for each denying limit; report() reads from another thread, so both take a mutex that
/// is uncontended in practice (one per thread, held for a hash lookup and a heap update).
///
/// Memory per rule: 2 windows x `capacity` counters (client ids of at most
/// SpaceSaving::kDefaultMaxKeyBytes bytes). Rules with nothing in the last two windows are
/// dropped when a window starts, so rules removed by a reload do not stay.
class TopDenials {
 public:
  explicit TopDenials(TopDenialsOptions options);
  TopDenials(const TopDenials&) = delete;
  TopDenials& operator=(const TopDenials&) = delete;

  /// Counts one denial of `client` by `rule` of `domain` at `now`; `candidate`: a denial a
  /// candidate limit would have made (counted apart from the live ones).
  void record(std::string_view domain, std::string_view rule, std::string_view client, Micros now,
              bool candidate = false);

  /// One summary per rule and window that overlaps [start of the previous window, now].
  struct Part {
    std::string domain;
    std::string rule;
    SpaceSaving::Snapshot summary;
    bool candidate = false;
  };
  std::vector<Part> parts(const TopDenialsQuery& query, Micros now) const;

  const TopDenialsOptions& options() const { return options_; }

 private:
  struct Window {
    explicit Window(std::size_t capacity) : summary(capacity) {}
    std::int64_t index = -1;  // now / window_us of the window it counts
    SpaceSaving summary;
  };
  struct RuleState {
    RuleState(std::string d, std::string r, bool c, std::size_t capacity)
        : domain(std::move(d)),
          rule(std::move(r)),
          candidate(c),
          current(std::make_unique<Window>(capacity)),
          previous(std::make_unique<Window>(capacity)) {}
    std::string domain;
    std::string rule;
    bool candidate;
    std::unique_ptr<Window> current;
    std::unique_ptr<Window> previous;
  };
  void dropStale(std::int64_t window_index);

  TopDenialsOptions options_;
  mutable std::mutex mutex_;
  // key: domain \0 rule, and \0 c for a candidate
  std::unordered_map<std::string, std::unique_ptr<RuleState>> rules_;
  std::string key_;  // reused lookup buffer
  std::int64_t last_sweep_ = -1;
};

/// Every I/O thread's TopDenials, and the answer of GET /limits/top merged from all of them.
/// Threads are added before serving; report() may then run on any thread.
class TopDenialsBoard {
 public:
  TopDenialsBoard(TopDenialsOptions options, const Clock& clock);

  /// A new tracker for one I/O thread; it lives as long as the board.
  TopDenials& addThread();

  TopDenialsReport report(const TopDenialsQuery& query) const;

  const TopDenialsOptions& options() const { return options_; }

 private:
  TopDenialsOptions options_;
  const Clock& clock_;
  std::vector<std::unique_ptr<TopDenials>> threads_;
};

/// Merges per-thread parts into one report (pure: `now` is given).
TopDenialsReport mergeTopDenials(const std::vector<TopDenials::Part>& parts,
                                 const TopDenialsQuery& query, const TopDenialsOptions& options,
                                 Micros now);

}  // namespace sluice
