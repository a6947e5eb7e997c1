#pragma once

#include <cstdint>

#include "sluice/limiter/limiter.hpp"

namespace sluice::redis {

/// The algorithm code 99_evaluate.lua knows a calendar fixed window by: a fixed_window whose
/// bounds the sidecar computes (Lua has no tz database).
inline constexpr std::int64_t kCalendarWindowCode = 6;
/// The algorithm code of a concurrency limit (65_concurrency.lua).
inline constexpr std::int64_t kConcurrencyCode = 7;

/// The values of one limit's algorithm and window in 99_evaluate.lua's layout: its
/// algorithm code, L, W, burst, min_interval and warmup slots. For a calendar fixed window
/// (docs/redis.md, "Calendar windows") the code is kCalendarWindowCode and the slots carry
/// the windows around `now` instead: W the length of the window holding `now`, burst its
/// start, min_interval the previous window's length, warmup the next one's. The script
/// picks the one of the three that holds its own clock's reading, so a sidecar whose clock
/// is a little off Redis's still counts in the window Redis is in.
struct ScriptLimitArgs {
  std::int64_t algorithm = 0;
  std::int64_t limit = 0;
  std::int64_t window = 0;
  std::int64_t burst = 0;
  std::int64_t min_interval = 0;
  std::int64_t warmup = 0;
};

ScriptLimitArgs scriptLimitArgs(const LimitParams& params, Micros now);

}  // namespace sluice::redis
