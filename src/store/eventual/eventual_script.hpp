#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/result.hpp"
#include "sluice/limiter/eventual.hpp"
#include "store/redis/redis_connection.hpp"

/// The Lua script of `consistency: eventual` (docs/eventual.md) and the codec of its replies,
/// private to the eventual store and its tests.
namespace sluice::eventual {

/// Number of ARGV values per entry (after ARGV[1] = now and ARGV[2] = the entry name).
inline constexpr int kScriptStride = 12;
/// Number of reply values per entry.
inline constexpr int kScriptReplyStride = 15;
/// The sync layout (ARGV[3] = "S", eventual_script.cpp): op 0 only, per entry its algorithm
/// then W, value, prev_value (fixed_window, sliding_window_counter) or L, W, burst, value,
/// acked, tat_us, tat_rem (token_bucket).
inline constexpr std::string_view kSyncLayout = "S";
/// Number of reply values per entry in the sync layout: the main reply's from kOthers on.
inline constexpr int kSyncReplyStride = 9;

/// Operations of one entry.
/// kSketchCell: one cell of a sketch decided in Redis (eventual_script.cpp); the engine sends
/// kDecide for a sketch limit as its d cells with this op.
enum class ScriptOp : int { kSync = 0, kDecide = 1, kSketchCell = 2 };

/// The script: a prelude taking the time from ARGV[1] (the sidecar's clock: eventual limits
/// are windowed on it), the shared helpers and algorithm files of the request script
/// (src/store/redis/lua, so that a round-trip decision is the exact same algorithm), then the
/// eventual main part.
std::string composeEventualScript();

/// Offsets in one entry's reply (composeEventualScript()).
enum ReplyField : std::size_t {
  kAllowed = 0,
  kRemaining,
  kResetAfter,
  kRetryAfter,
  kNever,
  kCharged,
  kOthers,
  kOwn,
  kPrevOthers,
  kPrevOwn,
  kRegion,
  kPrevRegion,
  kWriters,
  kTatUs,
  kTatRem,
};
static_assert(kSyncReplyStride == kScriptReplyStride - kOthers);

/// Parses one reply of the script for `n` entries: a string of n x `stride` whole numbers
/// separated by spaces (kScriptReplyStride; kSyncReplyStride for the sync layout). Errors
/// (FailureSource::kProtocol) name what was wrong.
Status parseReply(const redis::Reply& reply, std::size_t n, std::vector<std::int64_t>& out,
                  int stride = kScriptReplyStride);

/// The reading of one entry's reply values `v` (kScriptReplyStride of them) for `window`.
KeyReading readingOf(const std::int64_t* v, std::int64_t window);
/// The same of one entry's values in a sync layout reply (kSyncReplyStride of them: `r[i]` is
/// the main reply's `v[kOthers + i]`).
KeyReading syncReadingOf(const std::int64_t* r, std::int64_t window);

}  // namespace sluice::eventual
