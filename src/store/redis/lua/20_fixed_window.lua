-- fixed_window: the exact port of src/limiter/fixed_window.cpp (see the formula there).
-- State: a = window start, b = count in that window.
ALGORITHMS[0] = function(p, st, now, cost)
  local limit = p.limit
  local start = window_start(now, p.window)
  local count = 0
  if st.a == start then
    count = st.b
  end
  local left = start + p.window - now
  local nxt = { a = start, b = count, c = 0, at = {}, cost = {} }
  local o = new_outcome()
  if cost > limit then
    o.allowed = false
    o.never = true
    o.retry_after = kRetryNever
    o.remaining = math.max(0, limit - count)
  elseif count + cost <= limit then
    nxt.b = count + cost
    o.remaining = limit - nxt.b
  else
    o.allowed = false
    o.remaining = math.max(0, limit - count)
    o.retry_after = left
    if p.count_rejected then
      nxt.b = count + cost
    end
  end
  if nxt.b > 0 then
    o.reset_after = left
  end
  return o, nxt, o.reset_after
end
