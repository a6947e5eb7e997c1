-- token_bucket (3) and leaky_bucket (4): the exact port of src/limiter/gcra.cpp (GCRA over
-- one theoretical arrival time kept as an exact rational pair {us, rem}: us + rem / L
-- microseconds, 0 <= rem < L). State: a = TAT.us, b = TAT.rem, c = warm-up store.
-- Exact in doubles while B * L and every time stay below 2^53 (see gcra.cpp).
local function gcra_less_eq(x, y)
  return x.us < y.us or (x.us == y.us and x.rem <= y.rem)
end

local function gcra_span(g, n)
  local nr = n * g.r
  local whole = floor_div(nr, g.limit)
  return { us = n * g.q + whole, rem = nr - whole * g.limit }
end

local function gcra_add(g, x, y)
  local t = { us = x.us + y.us, rem = x.rem + y.rem }
  if t.rem >= g.limit then
    t.us = t.us + 1
    t.rem = t.rem - g.limit
  end
  return t
end

local function gcra_sub(g, x, y)
  local t = { us = x.us - y.us, rem = x.rem - y.rem }
  if t.rem < 0 then
    t.us = t.us - 1
    t.rem = t.rem + g.limit
  end
  return t
end

local function gcra_normalize(g, us, rem)
  local k = floor_div(rem, g.limit)
  return { us = us + k, rem = rem - k * g.limit }
end

-- The largest k in [0, most] with from + span(k) <= till (0 if none).
local function gcra_fits(g, from, till, most)
  if not gcra_less_eq(from, till) then
    return 0
  end
  local lo, hi = 0, most
  while lo < hi do
    local mid = lo + math.floor((hi - lo + 1) / 2)
    if gcra_less_eq(gcra_add(g, from, gcra_span(g, mid)), till) then
      lo = mid
    else
      hi = mid - 1
    end
  end
  return lo
end

local function gcra_ceil(t)
  if t.rem > 0 then
    return t.us + 1
  end
  return t.us
end

-- Guava's warm-up surcharge for taking `delta` us of stored time at level `stored`.
local function gcra_warmup_extra(stored, delta, period)
  local half = math.floor(period / 2)
  local hi = math.max(0, stored - half)
  local lo = math.max(0, stored - delta - half)
  return math.ceil(2 * (hi - lo) * (hi + lo) / period)
end

local function gcra(p, st, now, cost, leaky)
  local limit = p.limit
  local g = { limit = limit, q = math.floor(p.window / limit) }
  g.r = p.window - g.q * limit
  local burst = p.burst
  if burst <= 0 then
    burst = limit
  end
  local period = 0
  if not leaky then
    period = math.max(p.warmup, 0)
  end
  local tat = gcra_normalize(g, st.a, st.b)
  local n = { us = now, rem = 0 }
  local base = n
  if not gcra_less_eq(tat, n) then
    base = tat
  end
  local ceiling = gcra_add(g, n, gcra_span(g, burst))
  local charged = gcra_add(g, base, gcra_span(g, cost))

  local stored = 0
  if period > 0 then
    local idle = math.max(0, now - gcra_ceil(tat))
    stored = math.min(period, math.max(st.c, 0) + math.min(idle, period))
  end

  local o = new_outcome()
  local nxt = tat
  local next_stored = math.max(st.c, 0)
  local function charge()
    nxt = charged
    next_stored = stored
    if period > 0 then
      local delta = math.min(stored, gcra_span(g, cost).us)
      nxt = gcra_add(g, nxt, { us = gcra_warmup_extra(stored, delta, period), rem = 0 })
      next_stored = stored - delta
    end
  end

  if cost > burst then
    o.allowed = false
    o.never = true
    o.retry_after = kRetryNever
    o.remaining = gcra_fits(g, base, ceiling, burst)
  elseif gcra_less_eq(charged, ceiling) then
    charge()
    o.remaining = gcra_fits(g, nxt, ceiling, burst)
    if leaky then
      o.delay = gcra_ceil(base) - now
    end
  else
    o.allowed = false
    o.remaining = gcra_fits(g, base, ceiling, burst)
    if p.count_rejected then
      -- The attempt empties the bucket (TAT' = N + D(B), S' = S); denied implies TAT > now,
      -- so no idle time is credited to S.
      nxt = ceiling
    end
    local passes_at = gcra_sub(g, gcra_add(g, nxt, gcra_span(g, cost)), gcra_span(g, burst))
    o.retry_after = math.max(0, gcra_ceil(passes_at) - now)
  end

  local stored_out = 0
  if period > 0 then
    stored_out = next_stored
  end
  o.reset_after = math.max(0, gcra_ceil(nxt) - now)
  local ttl = o.reset_after
  if period > 0 then
    ttl = ttl + (period - math.min(period, next_stored))
  end
  return o, { a = nxt.us, b = nxt.rem, c = stored_out, at = {}, cost = {} }, ttl
end

ALGORITHMS[3] = function(p, st, now, cost)
  return gcra(p, st, now, cost, false)
end

ALGORITHMS[4] = function(p, st, now, cost)
  return gcra(p, st, now, cost, true)
end
