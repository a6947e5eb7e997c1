#pragma once

// The one owner of a store request's verdict (store.hpp, "quota mode"): a request is allowed
// when every non-shadow limit outside quota groups allows and, if it has quota groups, one
// of them has no denying non-shadow limit. The memory store, the eventual engine (local
// decisions, round-trip answers) and the tests use this; the Redis scripts implement the
// same rule in Lua (99_evaluate.lua, the eventual script), held to it by the conformance
// suite.

#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <cstddef>
#include <span>
#include <vector>

#include "sluice/store/store.hpp"

namespace sluice {

class RequestVerdict {
 public:
  RequestVerdict() = default;
  /// `open_groups`: quota groups with limits decided elsewhere (the strict half of a mixed
  /// request) that may still pass; they keep the request allowed unless they fail here.
  explicit RequestVerdict(std::span<const int> open_groups)
      : groups_(open_groups.begin(), open_groups.end()) {}

  /// Folds in one limit's outcome.
  void add(const StoreLimit& limit, bool allowed) {
    if (limit.quota_group >= 0) {
      groups_.push_back(limit.quota_group);
      if (!limit.shadow && !allowed) {
        failed_.push_back(limit.quota_group);
      }
    } else if (!limit.shadow && !allowed) {
      ordinary_denied_ = true;
    }
  }

  bool allowed() const {
    if (ordinary_denied_) {
      return false;
    }
    return groups_.empty() ||
           std::any_of(groups_.begin(), groups_.end(), [this](int g) { return !groupFailed(g); });
  }

  /// True when a non-shadow limit of quota group `g` denied.
  bool groupFailed(int g) const {
    return std::find(failed_.begin(), failed_.end(), g) != failed_.end();
  }

 private:
  bool ordinary_denied_ = false;
  boost::container::small_vector<int, 4> groups_;
  boost::container::small_vector<int, 4> failed_;
};

/// False for a limit whose outcome never denies its request: a refund, or any limit of a
/// report (Charge::kReport).
inline bool mayDeny(const StoreRequest& request, const StoreLimit& limit) {
  return !limit.refund && request.charge != Charge::kReport;
}

/// The verdict of `request` given one outcome per limit (same order).
inline bool requestAllowed(const StoreRequest& request, const std::vector<Outcome>& outcomes) {
  RequestVerdict verdict;
  for (std::size_t i = 0; i < request.limits.size() && i < outcomes.size(); ++i) {
    verdict.add(request.limits[i], outcomes[i].allowed || !mayDeny(request, request.limits[i]));
  }
  return verdict.allowed();
}

}  // namespace sluice
