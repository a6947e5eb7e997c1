-- Shared helpers. Lua numbers are IEEE doubles: every integer below stays under 2^53
-- (times are ~1.7e15 us), where doubles are exact, so integer arithmetic matches C++ int64.
local ALGORITHMS = {}

-- floor(a / b) for b > 0, exact (the quotient of doubles may round across an integer).
local function floor_div(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

local function window_start(now, window)
  return floor_div(now, window) * window
end

local function new_outcome()
  return { allowed = true, remaining = 0, reset_after = 0, retry_after = 0, delay = 0,
           never = false }
end

-- A stored state: { a, b, c, at_1, cost_1, at_2, cost_2, ... } packed with cmsgpack.
-- An absent key is a fresh bucket; so is a value that is not ours (another type, garbage
-- written by someone else): it is overwritten on the next charge instead of failing every
-- request on that key.
local function decode_state(raw)
  local st = { a = 0, b = 0, c = 0, at = {}, cost = {} }
  if type(raw) ~= 'string' then
    return st
  end
  local ok, t = pcall(cmsgpack.unpack, raw)
  if not ok or type(t) ~= 'table' or #t < 3 or (#t - 3) % 2 ~= 0 then
    return st
  end
  for i = 1, #t do
    if type(t[i]) ~= 'number' then
      return st
    end
  end
  st.a, st.b, st.c = t[1], t[2], t[3]
  local n = 0
  for i = 4, #t, 2 do
    n = n + 1
    st.at[n] = t[i]
    st.cost[n] = t[i + 1]
  end
  return st
end

local function encode_state(st)
  local t = { st.a, st.b, st.c }
  for i = 1, #st.at do
    t[#t + 1] = st.at[i]
    t[#t + 1] = st.cost[i]
  end
  return cmsgpack.pack(t)
end

local kRetryNever = -1
