-- Shared helpers. Lua numbers are IEEE doubles: every integer below stays under 2^53
-- (times are ~1.7e15 us), where doubles are exact, so integer arithmetic matches C++ int64.
--
-- Cost model (this script runs on Redis's only thread, once per decision): EVALSHA runs the
-- whole chunk on every call, so every top-level `local function` is a new closure and every
-- table a new allocation for Lua's garbage collector, on every call. Hence:
--   * an algorithm returns its outcome as multiple values, not as tables;
--   * a stored state is read straight from the array cmsgpack unpacks, and the next state is
--     the array that gets packed (one table each);
--   * algorithms with helper functions are built by a make_*() function on their first use
--     in a call, so a call pays only for the algorithms it uses.
-- Every algorithm returns, in this order:
--   allowed, remaining, reset_after, retry_after, delay, never, ttl, next_state
-- (times in us; next_state = the array to store, { a, b, c, at_1, cost_1, ... }).
local floor, max, min = math.floor, math.max, math.min
local kRetryNever = -1

-- floor(a / b) for b > 0, exact (the quotient of doubles may round across an integer).
local function floor_div(a, b)
  local q = floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

-- GCRA's exact rational time (us, rem): us + rem / L microseconds, 0 <= rem < L, passed and
-- returned as two values, never as a table; the span of n requests, n * W / L, needs L and
-- W = q * L + r as (limit, q, r). With them, how both GCRA scripts read a limit and its
-- stored state (frame, stored) and the warm-up surcharge. The one copy of these helpers for
-- 50_gcra.lua and 70_adjust.lua, built by make_rational() on the first use in a call.
local rational
local function make_rational()
  local t = {}
  function t.ceil_us(us, rem)
    if rem > 0 then
      return us + 1
    end
    return us
  end
  -- A GCRA limit and its stored pair (a, b) as the algorithms read them: W = q * L + r, the
  -- burst (0: the limit), the warm-up period (token_bucket only) and the TAT normalised to
  -- 0 <= rem < L. Returns q, r, burst, period, tat_us, tat_rem.
  function t.frame(leaky, limit, window, burst, warmup, a, b)
    local q = floor(window / limit)
    local r = window - q * limit
    if burst <= 0 then
      burst = limit
    end
    local period = 0
    if not leaky then
      period = max(warmup, 0)
    end
    local k = floor_div(b, limit)
    return q, r, burst, period, a + k, b - k * limit
  end
  -- The warm-up store at `now`: what it held (c) plus the idle time since the TAT, at most
  -- the period.
  function t.stored(period, c, tat_us, tat_rem, now)
    local idle = max(0, now - t.ceil_us(tat_us, tat_rem))
    return min(period, max(c, 0) + min(idle, period))
  end
  -- Guava's warm-up surcharge for taking `delta` us of stored time at level `stored`.
  function t.warmup_extra(stored, delta, period)
    local half = floor(period / 2)
    local hi = max(0, stored - half)
    local lo = max(0, stored - delta - half)
    return math.ceil(2 * (hi - lo) * (hi + lo) / period)
  end
  function t.less_eq(xu, xr, yu, yr)
    return xu < yu or (xu == yu and xr <= yr)
  end
  function t.span(n, limit, q, r)
    local nr = n * r
    local whole = floor_div(nr, limit)
    return n * q + whole, nr - whole * limit
  end
  function t.add(xu, xr, yu, yr, limit)
    local us, rem = xu + yu, xr + yr
    if rem >= limit then
      return us + 1, rem - limit
    end
    return us, rem
  end
  function t.sub(xu, xr, yu, yr, limit)
    local us, rem = xu - yu, xr - yr
    if rem < 0 then
      return us - 1, rem + limit
    end
    return us, rem
  end
  return t
end

-- tonumber() for the script's arguments: the values sent most often ('0' for most codes and
-- flags, '1' for the cost) are matched as strings (interned: a pointer comparison). In a
-- batch (99_evaluate.lua), whose requests repeat their limits, windows and argument counts,
-- any other value is converted once per call: tonumber's strtod costs ~1,000 instructions,
-- a table lookup of an interned string a few. A lone request has no cache (building one
-- costs more than it saves).
local number_of  -- value of each argument string converted in this call (batches only)
local function number(s)
  if s == '0' then
    return 0
  elseif s == '1' then
    return 1
  elseif number_of == nil then
    return tonumber(s)
  end
  local v = number_of[s]
  if v == nil then
    v = tonumber(s)
    if v ~= nil then
      number_of[s] = v
    end
  end
  return v
end

-- The same for a TTL passed to redis.call(), which formats a number with printf: a batch's
-- keys of one rule share their TTL, formatted once per call.
local string_of  -- (batches only)
local function ms_string(ms)
  if string_of == nil then
    return ms
  end
  local s = string_of[ms]
  if s == nil then
    s = string.format('%d', ms)
    string_of[ms] = s
  end
  return s
end

-- A stored state: { a, b, c, at_1, cost_1, at_2, cost_2, ... } packed with cmsgpack (the
-- format every Sluice version reads and writes: sidecars of different versions may share
-- one Redis). Returns a, b, c and the unpacked array (its log is t[4..]), or 0, 0, 0, nil
-- for a fresh bucket. An absent key is a fresh bucket; so is a value that is not ours
-- (another type reads as false through MGET; garbage written by someone else): it is
-- overwritten on the next charge instead of failing every request on that key.
local function read_state(raw)
  if type(raw) ~= 'string' then
    return 0, 0, 0, nil
  end
  local ok, t = pcall(cmsgpack.unpack, raw)
  if not ok or type(t) ~= 'table' then
    return 0, 0, 0, nil
  end
  local size = #t
  if size < 3 or (size - 3) % 2 ~= 0 then
    return 0, 0, 0, nil
  end
  for i = 1, size do
    if type(t[i]) ~= 'number' then
      return 0, 0, 0, nil
    end
  end
  return t[1], t[2], t[3], t
end
