#include "simulate/replayer.hpp"

#include <optional>
#include <utility>

#include "sluice/decision/decision_service.hpp"
#include "sluice/store/memory_store.hpp"

namespace sluice::simulate {
namespace {
// Replays are deterministic: the sketch's keyed hash gets a fixed seed.
constexpr const char* kSketchSeed = "000102030405060708090a0b0c0d0e0f";
}  // namespace

Replayer::Replayer(std::vector<RuleSetPtr> sets) : sets_(std::move(sets)) {
  current_ = sets_.empty() ? nullptr : sets_.front();
  MemoryStoreOptions options;
  // Memory is bounded by the live buckets (expired ones are swept as time moves on); a
  // bound is kept only against a runaway log, far above any one process's default.
  options.max_keys = std::size_t{1} << 26;
  options.sketch_seed = kSketchSeed;
  store_ = makeMemoryStore(options, clock_, metrics_);
  DecisionServiceParts parts;
  parts.rules = [this] { return current_; };
  parts.store = store_;
  parts.clock = &clock_;
  service_ = makeDecisionService(std::move(parts));
}

Replayer::~Replayer() = default;

void Replayer::start(Micros time_us, const std::string& rules_hash) {
  if (sets_.size() > 1) {
    current_ = sets_.front();
    for (const RuleSetPtr& set : sets_) {
      if (set->hash == rules_hash) {
        current_ = set;
        break;
      }
    }
  }
  clock_.moveTo(time_us);
}

Result<Decision> Replayer::decide(Micros time_us, const std::string& rules_hash,
                                  DecisionRequest&& request) {
  std::optional<Result<Decision>> answer;
  start(time_us, rules_hash);
  service_->decide(std::move(request),
                   [&answer](Result<Decision> decision) { answer.emplace(std::move(decision)); });
  if (!answer) {
    return makeError(ErrorKind::kInternal, "the memory store did not answer inline");
  }
  return std::move(*answer);
}

std::uint64_t Replayer::capacityEvictions() {
  return metrics_.counter("memory_store_evictions_total", {{"reason", "capacity"}}).value();
}

}  // namespace sluice::simulate
