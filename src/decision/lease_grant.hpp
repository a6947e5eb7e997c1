#pragma once

#include <string>

#include "sluice/decision/decision.hpp"
#include "sluice/store/store.hpp"

/// How a decision takes and names a lease (docs/algorithms.md, "concurrency"): the pieces
/// of DecisionService that concern concurrency limits.
namespace sluice::decision_detail {

/// A random lease number in 1 .. kMaxLeaseNumber (this thread's generator).
LeaseNumber drawLeaseNumber();

/// True when `limit` takes a lease if its request is admitted: a concurrency limit that is
/// charged (not a refund, not a report) a cost above 0.
bool takesLease(const StoreRequest& request, const StoreLimit& limit);

/// Takes every `lease_id` entry out of the refunded descriptors of `request` and sets
/// request.lease from it. Returns the error (with the entry's path) when one is not a
/// lease id, else "".
std::string takeLeaseEntries(DecisionRequest& request);

}  // namespace sluice::decision_detail
