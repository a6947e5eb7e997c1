#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/decision/decision.hpp"
#include "sluice/rules/rules.hpp"
#include "sluice/store/memory_store.hpp"
#include "sluice/store/store.hpp"

namespace sluice::simulate {

/// A clock for replays: time moves only with the log and never backwards (a line older
/// than the last one is decided at the last one's time: the memory store's algorithms
/// assume time does not go back).
class ReplayClock final : public Clock {
 public:
  Micros nowMicros() const override { return clock_.nowMicros(); }
  /// Moves to `time_us`, or stays when that is in the past; returns the time now.
  Micros moveTo(Micros time_us) {
    if (!started_ || time_us > clock_.nowMicros()) {
      clock_.set(time_us);
      started_ = true;
    }
    return clock_.nowMicros();
  }

 private:
  ManualClock clock_{0};
  bool started_ = false;
};

/// One rule set (or, for a recorded baseline, several: chosen per line by the rules hash
/// the line carries) replayed through the memory store, with the decision service that
/// serves live requests: the same matching, the same algorithms, the same all-or-nothing
/// charging. Eventual limits are decided as strict ones (the memory store ignores
/// `consistency`); sketch limits use one fixed seed, so their estimates carry the sketch's
/// own error.
class Replayer {
 public:
  /// `sets`: at least one; the first decides lines whose hash matches none. `direct`
  /// false: every request goes through the decision service (the direct path's reference,
  /// for tests).
  explicit Replayer(std::vector<RuleSetPtr> sets, bool direct = true);
  ~Replayer();
  Replayer(const Replayer&) = delete;
  Replayer& operator=(const Replayer&) = delete;

  /// Decides `request` at `time_us` with the rules of hash `rules_hash` (when one of the
  /// sets has it) and hands the decision to `use` before this returns (the memory store
  /// answers inline). `request` is lent: `use` sees it as Decision::request (and must not
  /// take it), and it is back in `request` when this returns; the rest of the decision is
  /// the replayer's (or the thread's spare) storage again, so a replay neither copies nor
  /// allocates decisions. False, without calling `use`, when the request was refused (a
  /// line live would have answered with an error); `request` is then spent.
  ///
  /// The usual request (no per-descriptor hits, limits or refunds, no reservation or
  /// lease, not a report, a known domain, no candidate, calendar-zone or concurrency limit)
  /// is decided directly: matched and keyed as the decision service does, its store request
  /// handed to the same memory store (its exclusive entry: the replay is its only thread),
  /// the answer written into a decision the replayer keeps. Every other request goes through the
  /// decision service itself. The direct decision leaves out what no report reads: the merged
  /// metadata and the thread's observers (a replay has none).
  ///
  /// `prepared_as`: the request prepare() was given for this one, when that was another
  /// object of the same content (a copy); null: `request` itself.
  template <typename Use>
  bool decide(Micros time_us, const std::string& rules_hash, DecisionRequest& request, Use&& use,
              const DecisionRequest* prepared_as = nullptr) {
    start(time_us, rules_hash);
    if (direct_enabled_) {
      const DirectResult direct =
          decideDirect(request, prepared_as != nullptr ? prepared_as : &request);
      if (direct != DirectResult::kNotDirect) {
        Decision& decision = slots_[active_].decision;
        if (direct == DirectResult::kDecided) {
          use(static_cast<const Decision&>(decision));
        }
        giveBack(decision.request, request);
        return direct == DirectResult::kDecided;
      }
    }
    bool used = false;
    service_->decide(std::move(request), [&use, &used, &request](Result<Decision>&& result) {
      if (result) {
        use(static_cast<const Decision&>(*result));
        used = true;
        request = std::move(result->request);
        recycleDecision(std::move(*result));
      }
    });
    return used;
  }
  /// Matches `request`, to be decided soon (by the decide() above, with the rules of
  /// `rules_hash`, unchanged till then), and asks the memory store to start reading its
  /// buckets into the processor's cache: the lookups of the next few requests wait for
  /// memory while this one is decided. A hint: the decisions are the same without it.
  /// Keeps the last kAhead requests prepared (the oldest is dropped for a new one).
  void prepare(const std::string& rules_hash, const DecisionRequest& request);
  static constexpr std::size_t kAhead = 3;

  /// Through the decision service, the decision returned (for a caller that keeps it).
  Result<Decision> decide(Micros time_us, const std::string& rules_hash, DecisionRequest&& request);

  /// The rule set that decided the last request.
  const RuleSetPtr& current() const { return current_; }
  /// Live buckets dropped for the store's bound (their decisions may differ from live).
  std::uint64_t capacityEvictions();

 private:
  /// One request's direct decision, kept from one request to the next (capacity reused).
  struct Slot {
    Decision decision;
    RequestMatch match;
    StoreRequest store_request;
    StoreResponse response;  ///< the memory store's answer (its storage reused)
    std::vector<std::pair<std::size_t, std::size_t>> positions;  ///< (descriptor, limit)
    /// The rule each store limit's parameters were copied from (null: none yet): a limit
    /// of the same rule keeps them.
    std::vector<const RateLimit*> store_rules;
    std::vector<std::uint64_t> hashes;  ///< the store keys' hashes (prepared requests)
  };
  /// The direct path's storage shared by the slots.
  struct Direct {
    /// Elements a shorter request left over, kept with their strings' storage for the next
    /// longer one (a vector's resize would free them).
    std::vector<DescriptorStatus> spare_descriptors;
    std::vector<LimitStatus> spare_statuses;
    std::vector<std::pair<StoreLimit, const RateLimit*>> spare_limits;
    /// The last domain looked up, in the last rule set.
    const RuleSet* domain_set = nullptr;
    std::string domain_name;
    const DomainConfig* domain = nullptr;
  };
  /// A request prepared ahead: its slot, the rule set it was matched with, and how many
  /// decisions ago (the store's prefetch steps follow that count).
  struct Prepared {
    const DecisionRequest* request = nullptr;
    const RuleSet* set = nullptr;
    std::size_t slot = 0;
    int age = 0;
  };

  /// The rule set and the clock for the next decision.
  void start(Micros time_us, const std::string& rules_hash);
  /// A plain request (one the direct path takes) lent to its decision: the descriptors
  /// moved over, the strings and the rest copied (moving the whole request in and back out
  /// copies every short string twice and every member); giveBack() returns the descriptors.
  static void lend(DecisionRequest& request, DecisionRequest& to);
  static void giveBack(DecisionRequest& lent, DecisionRequest& request) {
    request.descriptors.swap(lent.descriptors);
  }
  enum class DirectResult { kNotDirect, kDecided, kRefused };
  /// The direct path: kDecided with `request` moved into direct_.decision and decided (the
  /// memory store never fails: kRefused is not returned); kNotDirect, `request` untouched,
  /// for a request the decision service must decide.
  DirectResult decideDirect(DecisionRequest& request, const DecisionRequest* prepared_as);
  /// The direct path's pure part, into `slot`: matched with `set`, the descriptors'
  /// statuses and the store request built (as the decision service builds them for such a
  /// request); the store is not asked. kNotDirect when the service must decide.
  DirectResult matchDirect(const DecisionRequest& request, const RuleSet& set, Slot& slot);
  void buildDirect(const DecisionRequest& request, Slot& slot);
  /// The rule set that decides a line of `rules_hash`.
  const RuleSetPtr& setFor(const std::string& rules_hash) const;
  /// A slot no prepared request holds.
  std::size_t freeSlot() const;
  /// One decision later: the prepared requests' next prefetch steps.
  void advancePrefetch();

  std::vector<RuleSetPtr> sets_;
  RuleSetPtr current_;
  ReplayClock clock_;
  Metrics metrics_;
  StorePtr store_;
  MemoryExclusive* exclusive_ = nullptr;  ///< store_'s: the replay is its only thread
  std::unique_ptr<DecisionService> service_;
  bool direct_enabled_ = true;
  Direct direct_;
  std::array<Slot, kAhead + 1> slots_;
  std::size_t active_ = 0;          ///< the slot of the request being decided
  std::vector<Prepared> prepared_;  ///< oldest first, at most kAhead
};

}  // namespace sluice::simulate
