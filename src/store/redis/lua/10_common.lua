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

-- A stored state: { a, b, c, at_1, cost_1, at_2, cost_2, ... } packed with cmsgpack;
-- absent key = fresh bucket.
local function decode_state(raw)
  local st = { a = 0, b = 0, c = 0, at = {}, cost = {} }
  if raw then
    local t = cmsgpack.unpack(raw)
    st.a, st.b, st.c = t[1] or 0, t[2] or 0, t[3] or 0
    local n = 0
    for i = 4, #t, 2 do
      n = n + 1
      st.at[n] = t[i]
      st.cost[n] = t[i + 1]
    end
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
