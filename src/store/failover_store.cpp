#include "sluice/store/failover_store.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "sluice/common/object_pool.hpp"
#include "sluice/store/redis_store.hpp"

namespace sluice {
namespace {

constexpr std::array<std::pair<FailureMode, std::string_view>, 3> kModeNames{{
    {FailureMode::kOpen, "open"},
    {FailureMode::kClosed, "closed"},
    {FailureMode::kLocal, "local"},
}};

std::string_view errorKindLabel(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return "invalid_argument";
    case ErrorKind::kNotFound:
      return "not_found";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kConnection:
      return "connection";
    case ErrorKind::kScript:
      return "script";
    case ErrorKind::kUnavailable:
      return "unavailable";
    case ErrorKind::kInternal:
      return "internal";
  }
  return "internal";
}

constexpr std::array<ErrorKind, 7> kAllKinds = {
    ErrorKind::kInvalidArgument, ErrorKind::kNotFound, ErrorKind::kTimeout,
    ErrorKind::kConnection,      ErrorKind::kScript,   ErrorKind::kUnavailable,
    ErrorKind::kInternal};

/// The failover stores of one process that share a fallback (one per I/O thread) form a
/// group, so that an outage is logged and counted once, not once per thread: the group is
/// failing while any member is.
class FailoverGroup {
 public:
  static std::shared_ptr<FailoverGroup> of(const Store* fallback) {
    static std::mutex mutex;
    static std::map<const Store*, std::weak_ptr<FailoverGroup>> groups;
    std::lock_guard lock(mutex);
    std::erase_if(groups, [](const auto& kv) { return kv.second.expired(); });
    auto& slot = groups[fallback];
    auto group = slot.lock();
    if (!group) {
      group = std::make_shared<FailoverGroup>();
      slot = group;
    }
    return group;
  }

  /// True when this made the group start failing.
  bool memberFails() { return failing_.fetch_add(1, std::memory_order_acq_rel) == 0; }
  /// True when this made the group healthy again.
  bool memberRecovers() { return failing_.fetch_sub(1, std::memory_order_acq_rel) == 1; }

 private:
  std::atomic<int> failing_{0};
};

class FailoverStore final : public Store {
 public:
  FailoverStore(StorePtr primary, StorePtr fallback, FailureMode mode, Metrics& metrics)
      : primary_(std::move(primary)),
        fallback_(std::move(fallback)),
        mode_(mode),
        group_(FailoverGroup::of(fallback_.get())),
        activations_(describe(metrics).counter("store_failure_mode_activations_total",
                                               {{"mode", std::string(failureModeName(mode))}})),
        degraded_(metrics.counter("store_degraded_decisions_total",
                                  {{"mode", std::string(failureModeName(mode))}})) {
    for (std::size_t i = 0; i < kAllKinds.size(); ++i) {
      errors_[i] = &metrics.counter("store_errors_total",
                                    {{"kind", std::string(errorKindLabel(kAllKinds[i]))}});
    }
  }

  ~FailoverStore() override {
    if (failing_) {
      group_->memberRecovers();
    }
  }

  void evaluate(const StoreRequest& request, Callback done) override {
    if (mode_ == FailureMode::kLocal && fallback_ && primary_->health() == StoreHealth::kFailing) {
      // Not connected: do not even try; the primary reconnects on its own and is asked
      // again as soon as it reports healthy. (While it is still connecting at start-up the
      // request goes to it and waits for the connection.)
      enterFailure("the " + std::string(primary_->kind()) + " store is not connected");
      answerLocally(request, std::move(done));
      return;
    }
    // The request may be gone when the primary answers (a caller's temporary): the failure
    // modes that answer without the primary keep their own copy, in pooled storage that
    // keeps its capacity (no allocation once warm). `closed` needs none.
    Call* call = calls_.take();
    call->done = std::move(done);
    call->has_request = mode_ == FailureMode::kLocal || mode_ == FailureMode::kOpen;
    if (call->has_request) {
      call->request = request;
      // Answered locally only once the primary has failed, later: at that time, not this.
      call->request.now_us = 0;
    }
    primary_->evaluate(request,
                       [this, call](Result<StoreResponse> result) { onPrimary(*call, result); });
  }

  /// A lease lives where it was taken: with `local`, the memory store answers while the
  /// primary is not connected (a lease taken there is released there), and when the primary
  /// fails the call; otherwise the primary's answer or error stands (a lease operation has
  /// no "open" answer).
  void changeLease(const LeaseRequest& request, LeaseCallback done) override {
    const bool local = mode_ == FailureMode::kLocal && fallback_;
    if (local && primary_->health() == StoreHealth::kFailing) {
      fallback_->changeLease(request, std::move(done));
      return;
    }
    if (!local) {
      primary_->changeLease(request, std::move(done));
      return;
    }
    auto copy = std::make_shared<LeaseRequest>(request);
    primary_->changeLease(
        *copy, [this, copy, done = std::move(done)](Result<LeaseResponse> result) mutable {
          if (result) {
            done(std::move(result));
            return;
          }
          fallback_->changeLease(*copy, std::move(done));
        });
  }

  void reset(const std::vector<std::string>& key_prefixes, ResetCallback done) override {
    if (fallback_) {
      fallback_->reset(key_prefixes, [](Result<std::size_t>) {});
    }
    primary_->reset(key_prefixes, std::move(done));
  }

  /// Readiness: `closed` only while the primary is healthy; `open` and `local` answer
  /// whatever the primary's health, once its start-up (kConnecting) is over.
  bool healthy() const override {
    const StoreHealth health = primary_->health();
    return mode_ == FailureMode::kClosed ? health == StoreHealth::kHealthy
                                         : health != StoreHealth::kConnecting;
  }

  StoreHealth health() const override { return primary_->health(); }

  std::string_view kind() const override { return primary_->kind(); }
  bool holdsReservations() const override { return primary_->holdsReservations(); }

  void setOverride(const OverrideSlot& slot, StoredOverridePtr value, std::size_t max_overrides,
                   OverrideSetCallback done) override {
    primary_->setOverride(slot, std::move(value), max_overrides, std::move(done));
  }
  void removeOverride(const OverrideSlot& slot, OverrideRemoveCallback done) override {
    primary_->removeOverride(slot, std::move(done));
  }
  void listOverrides(OverrideListCallback done) override {
    primary_->listOverrides(std::move(done));
  }
  void overridesChanged() override { primary_->overridesChanged(); }

 private:
  /// One call to the primary, from evaluate() until its answer.
  struct Call {
    StoreRequest request;  ///< a copy, for the failure mode (has_request)
    bool has_request = false;
    Callback done;
  };

  void onPrimary(Call& call, Result<StoreResponse>& result) {
    Callback done = std::move(call.done);
    call.done = nullptr;
    if (result) {
      calls_.give(&call);
      // A cluster answers for some slots while a master is down: the outage ends when the
      // primary is healthy, not at the first success.
      if (primary_->health() == StoreHealth::kHealthy) {
        leaveFailure();
      }
      done(std::move(result));
      return;
    }
    const Error& error = result.error();
    errors_[static_cast<std::size_t>(kindIndex(error.kind))]->inc();
    enterFailure(error.message);
    if (mode_ == FailureMode::kClosed) {
      calls_.give(&call);
      done(std::move(result));
      return;
    }
    // The copy is given back only once the fallback is done with it (it may answer later).
    if (mode_ == FailureMode::kLocal && fallback_) {
      answerLocally(call.request,
                    [this, &call, done = std::move(done)](Result<StoreResponse> local) {
                      calls_.give(&call);
                      done(std::move(local));
                    });
      return;
    }
    StoreResponse response = allowAll(call.request);
    calls_.give(&call);
    done(std::move(response));
  }

  static Metrics& describe(Metrics& metrics) {
    metrics.describe("store_errors_total", Metrics::Type::kCounter,
                     "Failed store calls, by error kind.");
    metrics.describe("store_failure_mode_activations_total", Metrics::Type::kCounter,
                     "Times the store started failing and the failure mode took over.");
    metrics.describe("store_degraded_decisions_total", Metrics::Type::kCounter,
                     "Decisions answered by the failure mode instead of the store.");
    return metrics;
  }

  static std::size_t kindIndex(ErrorKind kind) {
    for (std::size_t i = 0; i < kAllKinds.size(); ++i) {
      if (kAllKinds[i] == kind) {
        return i;
      }
    }
    return kAllKinds.size() - 1;
  }

  StoreResponse allowAll(const StoreRequest& request) {
    degraded_.inc();
    StoreResponse response;
    response.allowed = true;
    response.degraded = true;
    response.outcomes.reserve(request.limits.size());
    for (const StoreLimit& limit : request.limits) {
      Outcome o;
      o.allowed = true;
      o.remaining = std::max<std::int64_t>(limit.params.limit, 0);  // nothing known
      response.outcomes.push_back(o);
    }
    return response;
  }

  void answerLocally(const StoreRequest& request, Callback done) {
    degraded_.inc();
    fallback_->evaluate(request, [done = std::move(done)](Result<StoreResponse> result) {
      if (result) {
        result->degraded = true;
      }
      done(std::move(result));
    });
  }

  void enterFailure(const std::string& reason) {
    if (failing_) {
      return;
    }
    failing_ = true;
    if (group_->memberFails()) {
      activations_.inc();
      spdlog::warn("store {} failing ({}): failure mode '{}' {}", primary_->kind(), reason,
                   failureModeName(mode_),
                   mode_ == FailureMode::kOpen     ? "allows every request (degraded)"
                   : mode_ == FailureMode::kClosed ? "answers 503"
                                                   : "decides from the local memory store");
    }
  }

  void leaveFailure() {
    if (!failing_) {
      return;
    }
    failing_ = false;
    if (group_->memberRecovers()) {
      spdlog::warn("store {} healthy again: failure mode '{}' off", primary_->kind(),
                   failureModeName(mode_));
    }
  }

  StorePtr primary_;
  StorePtr fallback_;
  FailureMode mode_;
  std::shared_ptr<FailoverGroup> group_;
  Counter& activations_;
  Counter& degraded_;
  std::array<Counter*, kAllKinds.size()> errors_{};
  bool failing_ = false;  // this instance (one I/O thread)
  ObjectPool<Call> calls_;
};

}  // namespace

std::string_view failureModeName(FailureMode mode) {
  for (const auto& [value, name] : kModeNames) {
    if (value == mode) {
      return name;
    }
  }
  return "closed";
}

Result<FailureMode> parseFailureMode(std::string_view text) {
  for (const auto& [value, name] : kModeNames) {
    if (name == text) {
      return value;
    }
  }
  return makeError(ErrorKind::kInvalidArgument,
                   "unknown failure mode '" + std::string(text) + "' (open, closed or local)");
}

StorePtr makeFailoverStore(StorePtr primary, StorePtr fallback, FailureMode mode,
                           Metrics& metrics) {
  return std::make_shared<FailoverStore>(std::move(primary), std::move(fallback), mode, metrics);
}

}  // namespace sluice
