-- sliding_window_log: the exact port of src/limiter/sliding_window_log.cpp (formulas there).
-- State: at/cost = the log, oldest first; a = last admitted request, b = 1 once a is set.
local function swl_sum(costs)
  local s = 0
  for i = 1, #costs do
    s = s + costs[i]
  end
  return s
end

local function swl_append(st, at, cost, limit)
  if cost <= 0 then
    return
  end
  local n = #st.at
  if n > 0 and st.at[n] == at then
    st.cost[n] = st.cost[n] + cost
  else
    st.at[n + 1] = at
    st.cost[n + 1] = cost
  end
  n = #st.at
  local total = swl_sum(st.cost)
  local drop = 0
  while drop + 1 < n and total - st.cost[drop + 1] > limit do
    total = total - st.cost[drop + 1]
    drop = drop + 1
  end
  if drop > 0 then
    local at2, cost2 = {}, {}
    for i = drop + 1, n do
      at2[#at2 + 1] = st.at[i]
      cost2[#cost2 + 1] = st.cost[i]
    end
    st.at, st.cost = at2, cost2
  end
end

local function swl_age_out(st, need, window, now)
  local freed = 0
  for i = 1, #st.at do
    freed = freed + st.cost[i]
    if freed >= need then
      return st.at[i] + window - now
    end
  end
  if #st.at == 0 then
    return 0
  end
  return st.at[#st.at] + window - now
end

ALGORITHMS[1] = function(p, st, now, cost)
  local limit, window = p.limit, p.window
  local nxt = { a = st.a, b = st.b, c = 0, at = {}, cost = {} }
  for i = 1, #st.at do
    local at = st.at[i]
    if now < at + window and at <= now then
      nxt.at[#nxt.at + 1] = at
      nxt.cost[#nxt.cost + 1] = st.cost[i]
    end
  end
  local used = swl_sum(nxt.cost)
  local gap = 0
  if st.b == 1 and cost > 0 and p.min_interval > 0 then
    gap = st.a + p.min_interval - now
  end
  local o = new_outcome()
  if cost > limit then
    o.allowed = false
    o.never = true
    o.retry_after = kRetryNever
    o.remaining = math.max(0, limit - used)
  elseif used + cost <= limit and gap <= 0 then
    if cost > 0 then
      swl_append(nxt, now, cost, limit)
      nxt.a = now
      nxt.b = 1
    end
    o.remaining = limit - used - cost
  else
    o.allowed = false
    o.remaining = math.max(0, limit - used)
    if p.count_rejected then
      swl_append(nxt, now, cost, limit)
    end
    local need = swl_sum(nxt.cost) + cost - limit
    local wait = 0
    if need > 0 then
      wait = swl_age_out(nxt, need, window, now)
    end
    o.retry_after = math.max(gap, wait)
  end
  local fresh_at = now
  if #nxt.at > 0 then
    fresh_at = math.max(fresh_at, nxt.at[#nxt.at] + window)
  end
  if nxt.b == 1 and p.min_interval > 0 then
    fresh_at = math.max(fresh_at, nxt.a + p.min_interval)
  end
  o.reset_after = fresh_at - now
  return o, nxt, o.reset_after
end
