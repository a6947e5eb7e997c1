-- The request script: evaluates ALL limits of one request atomically, in one round trip.
--
-- Why one script that dispatches per limit: a request may mix algorithms (its descriptors
-- match different rules) and must be decided all-or-nothing in one atomic step, so one
-- EVAL must see every limit. Each algorithm still lives in its own file
-- (20_fixed_window.lua, ...: "one script per algorithm"); the store concatenates
-- time prelude + those files + this one into a single script at start-up (the sources are
-- embedded at build time) and loads it once per connection with SCRIPT LOAD.
--
-- KEYS[i]  the Redis key of limit i
-- ARGV[1]  test time in us: read only by the test-only prelude, ignored in production
-- ARGV[2]  cost (hits; 0 = check without consuming)
-- ARGV[3 + 6*(i-1) ...] per limit i: algorithm (0 fixed_window, 1 sliding_window_log,
--          2 sliding_window_counter, 3 token_bucket, 4 leaky_bucket), L, W (us), burst,
--          min_interval (us), flags (1 = count_rejected, 2 = shadow), warmup (us)
--          (7 values per limit)
-- Returns { allowed, then per limit: allowed, remaining, reset_after_us, retry_after_us,
--           delay_us, never }, integers (booleans as 0/1).
--
-- Semantics (include/sluice/store.hpp): the request is allowed iff every non-shadow limit
-- allows; then every limit that allowed is charged; otherwise nothing is charged, except
-- that count_rejected limits record the attempt either way. A charged state is written with
-- a TTL equal to the limiter's ttl (ceil to ms) and deleted when that ttl is 0.
local kStride = 7
local now = sluice_now()
local cost = math.max(tonumber(ARGV[2]), 0)
local n = #KEYS

local function blocked(st, c)
  local o = new_outcome()
  if c > 0 then
    o.allowed = false
    o.never = true
    o.retry_after = kRetryNever
  end
  return o, st, 0
end

local outcomes, nexts, ttls, params = {}, {}, {}, {}
local allowed = true
for i = 1, n do
  local base = 3 + (i - 1) * kStride
  local flags = tonumber(ARGV[base + 5])
  local p = {
    algorithm = tonumber(ARGV[base]),
    limit = tonumber(ARGV[base + 1]),
    window = tonumber(ARGV[base + 2]),
    burst = tonumber(ARGV[base + 3]),
    min_interval = tonumber(ARGV[base + 4]),
    count_rejected = (flags % 2) == 1,
    shadow = (math.floor(flags / 2) % 2) == 1,
    warmup = tonumber(ARGV[base + 6]),
  }
  params[i] = p
  -- pcall: a key of another type (WRONGTYPE) reads as a fresh bucket, see decode_state.
  local st = decode_state(redis.pcall('GET', KEYS[i]))
  local o, nxt, ttl
  if p.limit <= 0 or p.window <= 0 or ALGORITHMS[p.algorithm] == nil then
    o, nxt, ttl = blocked(st, cost)
  else
    o, nxt, ttl = ALGORITHMS[p.algorithm](p, st, now, cost)
  end
  outcomes[i], nexts[i], ttls[i] = o, nxt, ttl
  if not p.shadow and not o.allowed then
    allowed = false
  end
end

local reply = { allowed and 1 or 0 }
for i = 1, n do
  local o = outcomes[i]
  if (allowed and o.allowed) or params[i].count_rejected then
    if ttls[i] > 0 then
      local ms = math.floor((ttls[i] + 999) / 1000) + sluice_ttl_slack_ms
      redis.call('SET', KEYS[i], encode_state(nexts[i]), 'PX', ms)
    else
      redis.call('DEL', KEYS[i])
    end
  end
  reply[#reply + 1] = o.allowed and 1 or 0
  reply[#reply + 1] = o.remaining
  reply[#reply + 1] = o.reset_after
  reply[#reply + 1] = o.retry_after
  reply[#reply + 1] = o.delay
  reply[#reply + 1] = o.never and 1 or 0
end
return reply
