-- token_bucket (3) and leaky_bucket (4): the exact port of src/limiter/gcra.cpp (GCRA over
-- one theoretical arrival time kept as an exact rational pair (us, rem): us + rem / L
-- microseconds, 0 <= rem < L). State: a = TAT.us, b = TAT.rem, c = warm-up store.
-- Exact in doubles while B * L and every time stay below 2^53 (see gcra.cpp).
-- A time is passed and returned as two values (us, rem), never as a table; the span of n
-- requests, n * W / L, needs L and W = q * L + r as (limit, q, r).
-- Built by make_gcra() on first use in a call (see 10_common.lua).
local function make_gcra()
  local kExact = 2 ^ 52
  local kFitSteps = 4
  rational = rational or make_rational()
  local less_eq, span, add, sub = rational.less_eq, rational.span, rational.add, rational.sub
  local ceil_us, frame, stored_at = rational.ceil_us, rational.frame, rational.stored
  local warmup_extra = rational.warmup_extra

  -- from + span(k) <= till
  local function fits_at(k, fu, fr, tu, tr, limit, q, r)
    local su, sr = span(k, limit, q, r)
    local au, ar = add(fu, fr, su, sr, limit)
    return less_eq(au, ar, tu, tr)
  end

  -- The largest k in [0, most] with from + span(k) <= till (0 if none).
  -- from + span(k) <= till is monotonic in k when the times are exact (integers below 2^52,
  -- 0 <= rem < L: every time this script computes from a state it wrote), so the answer is
  -- the k at which it turns false: estimated in doubles as floor((till - from) * L / W), then
  -- confirmed or moved by exact steps (the estimate is off by at most one). Any other input
  -- (a foreign state), or an estimate that does not converge, takes the binary search, whose
  -- answer is the same whenever the test is monotonic.
  local function fits(fu, fr, tu, tr, most, limit, q, r)
    if not less_eq(fu, fr, tu, tr) then
      return 0
    end
    if fu % 1 == 0 and tu % 1 == 0 and fr % 1 == 0 and tr % 1 == 0 and fr >= 0 and tr >= 0
        and fr < limit and tr < limit and fu >= -kExact and fu <= kExact and tu >= -kExact
        and tu <= kExact then
      local k = max(0, min(most, floor(((tu - fu) * limit + (tr - fr)) / (q * limit + r))))
      for _ = 1, kFitSteps do
        if k < most and fits_at(k + 1, fu, fr, tu, tr, limit, q, r) then
          k = k + 1
        elseif k > 0 and not fits_at(k, fu, fr, tu, tr, limit, q, r) then
          k = k - 1
        else
          return k
        end
      end
    end
    local lo, hi = 0, most
    while lo < hi do
      local mid = lo + floor((hi - lo + 1) / 2)
      if fits_at(mid, fu, fr, tu, tr, limit, q, r) then
        lo = mid
      else
        hi = mid - 1
      end
    end
    return lo
  end

  return function(leaky, limit, window, burst, warmup, count_rejected, a, b, c, now, cost)
    local q, r, period, tat_us, tat_rem
    q, r, burst, period, tat_us, tat_rem = frame(leaky, limit, window, burst, warmup, a, b)
    local base_us, base_rem = now, 0
    if not less_eq(tat_us, tat_rem, now, 0) then
      base_us, base_rem = tat_us, tat_rem
    end
    local burst_us, burst_rem = span(burst, limit, q, r)
    local ceiling_us, ceiling_rem = add(now, 0, burst_us, burst_rem, limit)
    local cost_us, cost_rem = span(cost, limit, q, r)
    local charged_us, charged_rem = add(base_us, base_rem, cost_us, cost_rem, limit)

    local stored = 0
    if period > 0 then
      stored = stored_at(period, c, tat_us, tat_rem, now)
    end

    local next_us, next_rem = tat_us, tat_rem
    local next_stored = max(c, 0)
    local allowed, remaining, retry_after, delay, never = true, 0, 0, 0, false
    if cost > burst then
      allowed = false
      never = true
      retry_after = kRetryNever
      remaining = fits(base_us, base_rem, ceiling_us, ceiling_rem, burst, limit, q, r)
    elseif less_eq(charged_us, charged_rem, ceiling_us, ceiling_rem) then
      -- Charge: TAT' = max(TAT, now) + span(cost), plus the warm-up surcharge.
      next_us, next_rem = charged_us, charged_rem
      next_stored = stored
      if period > 0 then
        local delta = min(stored, cost_us)
        next_us, next_rem = add(next_us, next_rem, warmup_extra(stored, delta, period), 0, limit)
        next_stored = stored - delta
      end
      remaining = fits(next_us, next_rem, ceiling_us, ceiling_rem, burst, limit, q, r)
      if leaky then
        delay = ceil_us(base_us, base_rem) - now
      end
    else
      allowed = false
      remaining = fits(base_us, base_rem, ceiling_us, ceiling_rem, burst, limit, q, r)
      if count_rejected then
        -- The attempt empties the bucket (TAT' = N + D(B), S' = S); denied implies TAT > now,
        -- so no idle time is credited to S.
        next_us, next_rem = ceiling_us, ceiling_rem
      end
      local pu, pr = add(next_us, next_rem, cost_us, cost_rem, limit)
      pu, pr = sub(pu, pr, burst_us, burst_rem, limit)
      retry_after = max(0, ceil_us(pu, pr) - now)
    end

    local stored_out = 0
    if period > 0 then
      stored_out = next_stored
    end
    local reset_after = max(0, ceil_us(next_us, next_rem) - now)
    local ttl = reset_after
    if period > 0 then
      ttl = ttl + (period - min(period, next_stored))
    end
    return allowed, remaining, reset_after, retry_after, delay, never, ttl,
           { next_us, next_rem, stored_out }
  end
end
