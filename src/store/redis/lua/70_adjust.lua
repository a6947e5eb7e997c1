-- Refunds and charges that land whatever the limit says: the exact ports of refund* and
-- charge* in src/limiter/ (what each algorithm does is in src/limiter/algorithms.hpp).
-- adjust(...) returns the state array after the change; 99_evaluate.lua answers with a check
-- (cost 0) on it, as sluice::refund and sluice::chargeAnyway do.
-- Built by make_adjust() on first use in a call (see 10_common.lua).
local swl_append  -- the sliding_window_log's log_append, built with it on first use
local function make_adjust()
  -- GCRA's exact rational time (us, rem): 10_common.lua's make_rational().
  rational = rational or make_rational()
  local less_eq, span, add, sub = rational.less_eq, rational.span, rational.add, rational.sub
  -- D(min(n, 2B)) as D(min(n, B)) + D(the rest, at most B): every product below 2^53.
  local function two_buckets(n, burst, limit, q, r)
    local first = min(n, burst)
    local au, ar = span(first, limit, q, r)
    local bu, br = span(min(n - first, burst), limit, q, r)
    return add(au, ar, bu, br, limit)
  end
  local frame, stored_at, warmup_extra = rational.frame, rational.stored, rational.warmup_extra

  local function gcra(leaky, limit, window, burst, warmup, a, b, c, now, amount, refund)
    local q, r, period, tat_us, tat_rem
    q, r, burst, period, tat_us, tat_rem = frame(leaky, limit, window, burst, warmup, a, b)
    if refund then
      local back_us, back_rem = tat_us, tat_rem
      if not less_eq(tat_us, tat_rem, now, 0) then
        local du, dr = two_buckets(amount, burst, limit, q, r)
        back_us, back_rem = sub(tat_us, tat_rem, du, dr, limit)
        if not less_eq(now, 0, back_us, back_rem) then
          back_us, back_rem = now, 0
        end
      end
      local stored = 0
      if period > 0 then
        stored = max(c, 0)
      end
      return { back_us, back_rem, stored }
    end
    local base_us, base_rem = now, 0
    if not less_eq(tat_us, tat_rem, now, 0) then
      base_us, base_rem = tat_us, tat_rem
    end
    local su, sr = two_buckets(amount, burst, limit, q, r)
    local next_us, next_rem = add(base_us, base_rem, su, sr, limit)
    local next_stored = 0
    if period > 0 then
      local stored = stored_at(period, c, tat_us, tat_rem, now)
      local delta = min(stored, su)
      next_us, next_rem = add(next_us, next_rem, warmup_extra(stored, delta, period), 0, limit)
      next_stored = stored - delta
    end
    local bu, br = span(burst, limit, q, r)
    local cu, cr = add(now, 0, bu, br, limit)
    cu, cr = add(cu, cr, bu, br, limit)
    if not less_eq(next_us, next_rem, cu, cr) then
      next_us, next_rem = cu, cr
    end
    return { next_us, next_rem, next_stored }
  end

  -- `start`: a calendar window's start (algorithm 6), else the epoch-aligned one's.
  local function fixed(window, a, b, now, delta, start)
    start = start or floor_div(now, window) * window
    local count = 0
    if a == start then
      count = b
    end
    return { start, max(0, count + delta), 0 }
  end

  local function counter(window, a, b, c, now, amount, refund)
    local start = floor_div(now, window) * window
    local curr, prev = 0, 0
    if a == start then
      curr, prev = b, c
    elseif a == start - window then
      curr, prev = 0, b
    end
    if refund then
      local from_current = min(amount, curr)
      curr = curr - from_current
      prev = max(0, prev - (amount - from_current))
    else
      curr = curr + amount
    end
    return { start, curr, prev }
  end

  -- The log's live entries (as the sliding_window_log evaluation keeps them), then the
  -- newest entries lose `amount` first (a refund) or (now, amount) is logged (a charge).
  local function log(limit, window, a, b, t, now, amount, refund)
    local nxt = { a, b, 0 }
    if t ~= nil then
      local k = 3
      for i = 4, #t, 2 do
        local at = t[i]
        if now < at + window and at <= now then
          nxt[k + 1] = at
          nxt[k + 2] = t[i + 1]
          k = k + 2
        end
      end
    end
    if refund then
      local n = #nxt
      while amount > 0 and n > 3 do
        local taken = min(amount, nxt[n])
        nxt[n] = nxt[n] - taken
        amount = amount - taken
        if nxt[n] == 0 then
          nxt[n] = nil
          nxt[n - 1] = nil
          n = n - 2
        end
      end
      return nxt
    end
    swl_append = swl_append or select(2, make_sliding_window_log())
    return swl_append(nxt, now, amount, limit)
  end

  -- Limit i's state after the change; algorithm 0..4, 6 or 7 (a sketch never comes here).
  -- A concurrency limit (7) releases the lease a refund names, and takes none on a charge.
  local concurrency_refund
  return function(ARGV, raw, now, i, base, amount, refund)
    local algorithm = number(ARGV[base])
    local limit = number(ARGV[base + 1])
    local window = number(ARGV[base + 2])
    local a, b, c, t = read_state(raw[i])
    if algorithm == 7 then
      if concurrency_refund == nil then
        local _
        _, concurrency_refund = make_concurrency()
      end
      if refund then
        return concurrency_refund(limit, window, t, now, amount, number(ARGV[base + 3]))
      end
      return concurrency_refund(limit, window, t, now, 0, 0)
    end
    if algorithm == 0 or algorithm == 6 then
      local start
      if algorithm == 6 then
        -- The window holding `now` among the three the sidecar sent (99_evaluate.lua).
        start = number(ARGV[base + 3])
        if now < start then
          start = start - number(ARGV[base + 4])
        elseif now >= start + window then
          start = start + window
        end
      end
      if refund then
        return fixed(window, a, b, now, -amount, start)
      end
      return fixed(window, a, b, now, amount, start)
    elseif algorithm == 1 then
      return log(limit, window, a, b, t, now, amount, refund)
    elseif algorithm == 2 then
      return counter(window, a, b, c, now, amount, refund)
    end
    return gcra(algorithm == 4, limit, window, number(ARGV[base + 3]), number(ARGV[base + 6]),
                a, b, c, now, amount, refund)
  end
end
