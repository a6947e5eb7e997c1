-- fixed_window: the exact port of src/limiter/fixed_window.cpp (see the formula there).
-- State: a = window start, b = count in that window.
-- No helpers, so no make_*(): the request's hot path costs one closure per call.
-- `start` and `finish`, when given, are the window's bounds (a calendar window, whose
-- bounds the sidecar computes: calendar_window below); else the epoch-aligned window.
local function fixed_window(limit, window, count_rejected, a, b, now, cost, start, finish)
  if start == nil then
    start = floor_div(now, window) * window
    finish = start + window
  end
  local count = 0
  if a == start then
    count = b
  end
  local left = finish - now
  local next_count = count
  local allowed, remaining, retry_after, never = true, 0, 0, false
  if cost > limit then
    allowed = false
    never = true
    retry_after = kRetryNever
    remaining = max(0, limit - count)
  elseif count + cost <= limit then
    next_count = count + cost
    remaining = limit - next_count
  else
    allowed = false
    remaining = max(0, limit - count)
    retry_after = left
    if count_rejected then
      next_count = count + cost
    end
  end
  local reset_after = 0
  if next_count > 0 then
    reset_after = left
  end
  return allowed, remaining, reset_after, retry_after, 0, never, reset_after,
         { start, next_count, 0 }
end

