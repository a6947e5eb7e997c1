#pragma once

#include <boost/container/small_vector.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "sluice/common/clock.hpp"
#include "sluice/limiter/limiter.hpp"
#include "sluice/limiter/sketch.hpp"
#include "sluice/store/store.hpp"
#include "store/memory/bucket_table.hpp"
#include "store/memory/hold_table.hpp"
#include "store/memory/sketch_registry.hpp"

/// One limit of a request in the memory store: what the store found for it, and the charge
/// semantics of store.hpp (Charge) applied to it: how it is evaluated, whether it is
/// written, what a limit of a denied request answers. Private to the memory store; the
/// locking, the tables and the key bound stay in memory_store.cpp.
namespace sluice::memory_detail {

/// One limit of the request being evaluated.
struct LimitWork {
  std::uint64_t hash = 0;
  std::uint32_t shard = 0;
  std::uint32_t index = BucketTable::kNone;
  std::size_t first = 0;  // the first limit of this request with the same stored entry
  bool expired = false;   // the stored entry outlived its ttl: evaluate a fresh bucket
  BucketState loaded;
  Evaluation eval;
  std::shared_ptr<MemorySketch> sketch;  // set for a `sketch` limit
  SketchCells cells;
  std::int64_t window_index = 0;
  SketchEvaluation sketch_eval;
  HoldSet* holds = nullptr;  // the bucket's reservation holds, when it has any
  std::int64_t held = 0;     // what its live holds add up to
  Micros holds_retry = 0;    // until its first live hold expires
  // A reservation step that charges nothing (a reserve, a release, a commit that found
  // no hold to settle): evaluated, never written.
  bool hold_only = false;
  // The client is in this limit's penalty box until ban_until: answered without its bucket.
  bool banned = false;
  Micros ban_until = 0;
};

/// Inline capacity for the usual few limits per request: no allocation on the hot path.
using WorkList = boost::container::small_vector<LimitWork, 4>;

/// True for a `sketch` limit with a usable geometry (evaluated on its rule's sketch).
bool isSketchLimit(const StoreLimit& limit);

/// True for a concurrency limit: the one that takes a lease.
bool isLeaseLimit(const StoreLimit& limit);

/// One bucket limit of `request` on its loaded `state`, as the request's charge mode says.
Evaluation evaluateLimit(const StoreRequest& request, const StoreLimit& limit,
                         const BucketState& state, Micros now, const LimitWork& w);

/// Store semantics: an allowed request charges every limit that allowed; count_rejected
/// limits record the attempt whatever the outcome; refunds, reports and envoy's counting
/// (Charge::kEvery) write every limit. A concurrency limit takes a lease only with an
/// admitted request (a report or envoy's counting takes none; refunds release). A banned
/// limit or a reservation step that charges nothing is never written.
bool charged(const StoreRequest& request, const StoreLimit& limit, const LimitWork& w,
             bool request_allowed);

/// A denied all-or-nothing request: a limit that allowed is not charged, and answers with
/// its bucket as it is, what a check (cost 0) says at this instant. So does a concurrency
/// limit of a denied request in any charge mode. Sketches must still be locked.
void answerUncharged(const StoreRequest& request, Micros now, const WorkList& work,
                     StoreResponse& response);

}  // namespace sluice::memory_detail
