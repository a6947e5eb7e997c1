#pragma once

#include <string>

/// The Lua script of `consistency: eventual` (docs/eventual.md), private to the eventual
/// store and its tests.
namespace sluice::eventual {

/// Number of ARGV values per entry (after ARGV[1] = now and ARGV[2] = the entry name).
inline constexpr int kScriptStride = 12;
/// Number of reply values per entry.
inline constexpr int kScriptReplyStride = 15;

/// Operations of one entry.
/// kSketchCell: one cell of a sketch decided in Redis (eventual_script.cpp); the engine sends
/// kDecide for a sketch limit as its d cells with this op.
enum class ScriptOp : int { kSync = 0, kDecide = 1, kSketchCell = 2 };

/// The script: a prelude taking the time from ARGV[1] (the sidecar's clock: eventual limits
/// are windowed on it), the shared helpers and algorithm files of the request script
/// (src/store/redis/lua, so that a round-trip decision is the exact same algorithm), then the
/// eventual main part.
std::string composeEventualScript();

}  // namespace sluice::eventual
