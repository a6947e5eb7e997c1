-- sliding_window_counter: the exact port of src/limiter/sliding_window_counter.cpp.
-- State: a = start of the current window, b = its count, c = the previous window's count.
-- The estimate is the same IEEE double expression, evaluated in the same order:
--   prev * (W - elapsed) / W + curr
local function swc_estimate(curr, prev, window, elapsed)
  return prev * (window - elapsed) / window + curr
end

local function swc_passes(curr, prev, window, elapsed, cost, limit)
  return swc_estimate(curr, prev, window, elapsed) + cost <= limit
end

-- Smallest elapsed in [from, window) at which the request passes, or window if none.
local function swc_first_passing(curr, prev, window, from, cost, limit)
  local lo, hi = from, window
  while lo < hi do
    local mid = lo + math.floor((hi - lo) / 2)
    if swc_passes(curr, prev, window, mid, cost, limit) then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return lo
end

ALGORITHMS[2] = function(p, st, now, cost)
  local limit, window = p.limit, p.window
  local start = window_start(now, window)
  local elapsed = now - start
  local curr, prev = 0, 0
  if st.a == start then
    curr, prev = st.b, st.c
  elseif st.a == start - window then
    curr, prev = 0, st.b
  end
  local current = swc_estimate(curr, prev, window, elapsed)
  local total = current + cost
  local o = new_outcome()
  local ncurr = curr
  if cost > limit then
    o.allowed = false
    o.never = true
    o.retry_after = kRetryNever
    o.remaining = math.max(0, math.floor(limit - current))
  elseif total <= limit then
    ncurr = curr + cost
    o.remaining = math.floor(limit - total)
  else
    o.allowed = false
    o.remaining = math.max(0, math.floor(limit - current))
    if p.count_rejected then
      ncurr = curr + cost
    end
    local in_this = swc_first_passing(ncurr, prev, window, elapsed + 1, cost, limit)
    if in_this < window then
      o.retry_after = in_this - elapsed
    else
      local in_next = swc_first_passing(0, ncurr, window, 0, cost, limit)
      o.retry_after = (window - elapsed) + in_next
    end
  end
  if ncurr > 0 then
    o.reset_after = start + 2 * window - now
  elseif prev > 0 then
    o.reset_after = start + window - now
  end
  return o, { a = start, b = ncurr, c = prev, at = {}, cost = {} }, o.reset_after
end
