-- sketch: the port of src/limiter/sketch.cpp's evaluateSketch and SketchTable (formulas
-- there). One rule's state is two strings, one per window parity (window index
-- idx = floor(now / W); the current window's string is the one of parity idx % 2, the
-- previous window's the other), each read and written with BITFIELD:
--   bits 0..63     i64  window stamp: the window index the string holds
--   bits 64..127   i64  requests charged in that window (sketch_load)
--   bits 128..191  i64  counters raised to >= L in that window (sketch_saturated_ratio)
--   bits 192..     d rows x w counters of `bits` (8, 16, 32) bits, unsigned, row-major
--   then           m Bloom filter bits (bloom: true only)
-- A string stamped with another window reads as zeros; the first write of a window starts
-- it afresh (DEL). Every write sets the string to expire past the next window, when it is
-- no longer read.
-- The C++ store sends the client's cells (one column per row, its Bloom bit positions),
-- computed with its keyed hash: the script does no hashing, so both stores decide
-- identically by construction.
-- Built by make_sketch() on first use in a call (see 10_common.lua).
local function make_sketch()
  local kHeaderBits = 192
  local kSaturated = 2 ^ 53
  local swc = make_sliding_window_counter()

  -- The client's min counter (saturated -> 2^53) and whether all its Bloom bits are set,
  -- in the string `key` if it holds window `idx`; 0, false otherwise.
  local function read_window(key, idx, bits, d, w, cols, m, bloom, k)
    local args = { 'GET', 'i64', 0, 'GET', 'i64', 64, 'GET', 'i64', 128 }
    local t = 'u' .. bits
    for r = 1, d do
      args[#args + 1] = 'GET'
      args[#args + 1] = t
      args[#args + 1] = kHeaderBits + ((r - 1) * w + cols[r]) * bits
    end
    local bloom_base = kHeaderBits + d * w * bits
    for j = 1, k do
      args[#args + 1] = 'GET'
      args[#args + 1] = 'u1'
      args[#args + 1] = bloom_base + bloom[j]
    end
    local v = redis.call('BITFIELD', key, unpack(args))
    if v[1] ~= idx then
      return 0, false, 0, 0
    end
    local top = 2 ^ bits - 1
    local least = kSaturated
    for r = 1, d do
      local c = v[3 + r]
      if c >= top then
        c = kSaturated
      end
      if c < least then
        least = c
      end
    end
    local seen = true
    for j = 1, k do
      if v[3 + d + j] ~= 1 then
        seen = false
      end
    end
    return least, seen, v[2], v[3]
  end

  -- Records one charged attempt in the current window's string (SketchTable::record).
  local function record(key, idx, window, limit, bits, d, w, cols, m, bloom, k, raise, cost)
    local stamp = redis.call('BITFIELD', key, 'GET', 'i64', 0)[1]
    if stamp ~= idx then
      redis.call('DEL', key)
      redis.call('BITFIELD', key, 'SET', 'i64', 0, idx)
    end
    local t = 'u' .. bits
    local get = {}
    for r = 1, d do
      get[#get + 1] = 'GET'
      get[#get + 1] = t
      get[#get + 1] = kHeaderBits + ((r - 1) * w + cols[r]) * bits
    end
    local old = redis.call('BITFIELD', key, unpack(get))
    local top = 2 ^ bits - 1
    local set = {}
    local saturated = 0
    for r = 1, d do
      local o = old[r]
      local n = min(max(o, raise), top)
      if n ~= o then
        set[#set + 1] = 'SET'
        set[#set + 1] = t
        set[#set + 1] = kHeaderBits + ((r - 1) * w + cols[r]) * bits
        set[#set + 1] = n
        if o < limit and n >= limit then
          saturated = saturated + 1
        end
      end
    end
    local bloom_base = kHeaderBits + d * w * bits
    for j = 1, k do
      set[#set + 1] = 'SET'
      set[#set + 1] = 'u1'
      set[#set + 1] = bloom_base + bloom[j]
      set[#set + 1] = 1
    end
    set[#set + 1] = 'INCRBY'
    set[#set + 1] = 'i64'
    set[#set + 1] = 64
    set[#set + 1] = cost
    if saturated > 0 then
      set[#set + 1] = 'INCRBY'
      set[#set + 1] = 'i64'
      set[#set + 1] = 128
      set[#set + 1] = saturated
    end
    redis.call('BITFIELD', key, unpack(set))
    if sluice_expire_at then
      redis.call('PEXPIREAT', key, floor(((idx + 2) * window + 999) / 1000))
    else
      redis.call('PEXPIRE', key,
                 floor(((idx + 2) * window - sluice_now + 999) / 1000) + sluice_ttl_slack_ms)
    end
  end

  -- args[ex ...] (args: the request's ARGV): bits, depth, width, bloom_bits, bloom_hashes,
  -- then depth columns and bloom_hashes bit positions. Returns the usual outcome values, as the state to write a
  -- function that records this attempt (or false when there is nothing to record), then the
  -- current window's charged total and saturated counters before this request (metrics).
  return function(limit, window, count_rejected, key_even, key_odd, args, ex, now, cost)
    local bits = tonumber(args[ex])
    local d = tonumber(args[ex + 1])
    local w = tonumber(args[ex + 2])
    local m = tonumber(args[ex + 3])
    local k = tonumber(args[ex + 4])
    if m == 0 then
      k = 0
    end
    local cols = {}
    for r = 1, d do
      cols[r] = tonumber(args[ex + 4 + r])
    end
    local bloom = {}
    for j = 1, k do
      bloom[j] = tonumber(args[ex + 4 + d + j])
    end
    local idx = floor_div(now, window)
    local curr_key, prev_key = key_even, key_odd
    if idx % 2 == 1 then
      curr_key, prev_key = key_odd, key_even
    end
    local c, seen_c, charged, saturated = read_window(curr_key, idx, bits, d, w, cols, m, bloom, k)
    local p, seen_p = read_window(prev_key, idx - 1, bits, d, w, cols, m, bloom, k)
    if m > 0 and not seen_c and not seen_p then
      c, p = 0, 0
    end
    local ok, remaining, reset_after, retry_after, delay, never =
        swc(limit, window, count_rejected, idx * window, c, p, now, cost)
    local ttl = (idx + 2) * window - now
    local write = false
    if cost > 0 and not never then
      local raise = c + cost
      write = function()
        record(curr_key, idx, window, limit, bits, d, w, cols, m, bloom, k, raise, cost)
      end
    end
    return ok, remaining, reset_after, retry_after, delay, never, ttl, write, charged, saturated
  end
end
