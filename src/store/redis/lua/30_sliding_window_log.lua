-- sliding_window_log: the exact port of src/limiter/sliding_window_log.cpp (formulas there).
-- State: the log, oldest first, as (at, cost) pairs from index 4 of the state array
-- { a, b, 0, at_1, cost_1, ... }; a = last admitted request, b = 1 once a is set.
-- Built by make_sliding_window_log() on first use in a call (see 10_common.lua); it returns
-- the evaluation and, second, log_append (for 70_adjust.lua's charges).
local function make_sliding_window_log()
  -- Total cost of the log of state array s.
  local function log_sum(s)
    local total = 0
    for i = 5, #s, 2 do
      total = total + s[i]
    end
    return total
  end

  -- Appends (at, cost) to the log of s, merging with a newest entry of the same time, then
  -- drops the oldest entries while the rest alone exceed the limit. Returns the state array
  -- (a new one when entries were dropped).
  local function log_append(s, at, cost, limit)
    if cost <= 0 then
      return s
    end
    local n = #s
    if n > 3 and s[n - 1] == at then
      s[n] = s[n] + cost
    else
      s[n + 1] = at
      s[n + 2] = cost
      n = n + 2
    end
    local entries = (n - 3) / 2
    local total = log_sum(s)
    local drop = 0
    while drop + 1 < entries and total - s[5 + 2 * drop] > limit do
      total = total - s[5 + 2 * drop]
      drop = drop + 1
    end
    if drop == 0 then
      return s
    end
    local kept = { s[1], s[2], s[3] }
    for i = 4 + 2 * drop, n do
      kept[#kept + 1] = s[i]
    end
    return kept
  end

  -- Time until the oldest entries that free `need` have aged out.
  local function log_age_out(s, need, window, now)
    local freed = 0
    local n = #s
    for i = 4, n, 2 do
      freed = freed + s[i + 1]
      if freed >= need then
        return s[i] + window - now
      end
    end
    if n == 3 then
      return 0
    end
    return s[n - 1] + window - now
  end

  return function(limit, window, min_interval, count_rejected, a, b, t, now, cost)
    -- The live part of the stored log: entries with now - W < at <= now.
    local nxt = { a, b, 0 }
    local used = 0
    if t ~= nil then
      local k = 3
      for i = 4, #t, 2 do
        local at = t[i]
        if now < at + window and at <= now then
          nxt[k + 1] = at
          nxt[k + 2] = t[i + 1]
          k = k + 2
          used = used + t[i + 1]
        end
      end
    end
    local gap = 0
    if b == 1 and cost > 0 and min_interval > 0 then
      gap = a + min_interval - now
    end
    local allowed, remaining, retry_after, never = true, 0, 0, false
    if cost > limit then
      allowed = false
      never = true
      retry_after = kRetryNever
      remaining = max(0, limit - used)
    elseif used + cost <= limit and gap <= 0 then
      if cost > 0 then
        nxt = log_append(nxt, now, cost, limit)
        nxt[1] = now
        nxt[2] = 1
      end
      remaining = limit - used - cost
    else
      allowed = false
      remaining = max(0, limit - used)
      if count_rejected then
        nxt = log_append(nxt, now, cost, limit)
      end
      local need = log_sum(nxt) + cost - limit
      local wait = 0
      if need > 0 then
        wait = log_age_out(nxt, need, window, now)
      end
      retry_after = max(gap, wait)
    end
    local fresh_at = now
    local n = #nxt
    if n > 3 then
      fresh_at = max(fresh_at, nxt[n - 1] + window)
    end
    if nxt[2] == 1 and min_interval > 0 then
      fresh_at = max(fresh_at, nxt[1] + min_interval)
    end
    local reset_after = fresh_at - now
    return allowed, remaining, reset_after, retry_after, 0, never, reset_after, nxt
  end, log_append
end
