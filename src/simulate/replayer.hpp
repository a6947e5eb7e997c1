#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/decision/decision.hpp"
#include "sluice/rules/rules.hpp"
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
  /// `sets`: at least one; the first decides lines whose hash matches none.
  explicit Replayer(std::vector<RuleSetPtr> sets);
  ~Replayer();
  Replayer(const Replayer&) = delete;
  Replayer& operator=(const Replayer&) = delete;

  /// Decides `request` at `time_us` with the rules of hash `rules_hash` (when one of the
  /// sets has it) and hands the decision to `use` before this returns (the memory store
  /// answers inline). `request` is moved in and comes back in the decision
  /// (Decision::request), from which `use` may take it back; the rest of the decision is
  /// the thread's spare storage again once `use` returns (recycleDecision), so a replay
  /// neither moves nor allocates decisions. False, without calling `use`, when the request
  /// was refused (a line live would have answered with an error).
  template <typename Use>
  bool decide(Micros time_us, const std::string& rules_hash, DecisionRequest&& request, Use&& use) {
    bool used = false;
    start(time_us, rules_hash);
    service_->decide(std::move(request), [&use, &used](Result<Decision>&& result) {
      if (result) {
        use(*result);
        used = true;
        recycleDecision(std::move(*result));
      }
    });
    return used;
  }
  /// The same, the decision returned (moved out: for a caller that keeps it).
  Result<Decision> decide(Micros time_us, const std::string& rules_hash, DecisionRequest&& request);

  /// The rule set that decided the last request.
  const RuleSetPtr& current() const { return current_; }
  /// Live buckets dropped for the store's bound (their decisions may differ from live).
  std::uint64_t capacityEvictions();

 private:
  /// The rule set and the clock for the next decision.
  void start(Micros time_us, const std::string& rules_hash);

  std::vector<RuleSetPtr> sets_;
  RuleSetPtr current_;
  ReplayClock clock_;
  Metrics metrics_;
  StorePtr store_;
  std::unique_ptr<DecisionService> service_;
};

}  // namespace sluice::simulate
