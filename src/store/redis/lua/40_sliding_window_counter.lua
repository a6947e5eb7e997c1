-- sliding_window_counter: the exact port of src/limiter/sliding_window_counter.cpp.
-- State: a = start of the current window, b = its count, c = the previous window's count.
-- The estimate is the same IEEE double expression, evaluated in the same order:
--   prev * (W - elapsed) / W + curr
-- Built by make_sliding_window_counter() on first use in a call (see 10_common.lua).
local function make_sliding_window_counter()
  -- Smallest elapsed in [from, window) at which the request passes, or window if none.
  local function first_passing(curr, prev, window, from, cost, limit)
    local lo, hi = from, window
    while lo < hi do
      local mid = lo + floor((hi - lo) / 2)
      if prev * (window - mid) / window + curr + cost <= limit then
        hi = mid
      else
        lo = mid + 1
      end
    end
    return lo
  end

  return function(limit, window, count_rejected, a, b, c, now, cost)
    local start = floor_div(now, window) * window
    local elapsed = now - start
    local curr, prev = 0, 0
    if a == start then
      curr, prev = b, c
    elseif a == start - window then
      curr, prev = 0, b
    end
    local current = prev * (window - elapsed) / window + curr
    local total = current + cost
    local ncurr = curr
    local allowed, remaining, retry_after, never = true, 0, 0, false
    if cost > limit then
      allowed = false
      never = true
      retry_after = kRetryNever
      remaining = max(0, floor(limit - current))
    elseif total <= limit then
      ncurr = curr + cost
      remaining = floor(limit - total)
    else
      allowed = false
      remaining = max(0, floor(limit - current))
      if count_rejected then
        ncurr = curr + cost
      end
      local in_this = first_passing(ncurr, prev, window, elapsed + 1, cost, limit)
      if in_this < window then
        retry_after = in_this - elapsed
      else
        local in_next = first_passing(0, ncurr, window, 0, cost, limit)
        retry_after = (window - elapsed) + in_next
      end
    end
    local reset_after = 0
    if ncurr > 0 then
      reset_after = start + 2 * window - now
    elseif prev > 0 then
      reset_after = start + window - now
    end
    return allowed, remaining, reset_after, retry_after, 0, never, reset_after,
           { start, ncurr, prev }
  end
end
