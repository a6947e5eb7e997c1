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
-- ARGV[2 + 9*(i-1) ...] per limit i, 9 values: algorithm (0 fixed_window,
--          1 sliding_window_log, 2 sliding_window_counter, 3 token_bucket, 4 leaky_bucket,
--          5 sketch, 6 calendar fixed_window, 7 concurrency), L, W (us), burst, min_interval (us), flags (1 = count_rejected,
--          2 = shadow, 4 = counted whatever the verdict (Charge::kEvery), 8 = report:
--          charged anyway, never denies (Charge::kReport), 16 = refund: given its cost
--          back, never denies), warmup (us), cost (hits of this limit; 0 = check without
--          consuming), quota group (-1: none; >= 0: the quota-mode descriptor it belongs to)
--          For a calendar fixed_window (6: the sidecar computes the bounds, Lua has no tz
--          database; src/store/redis/script_limit.hpp) W is the length of the window
--          holding the sidecar's clock, burst its start, min_interval the length of the
--          window before it and warmup the length of the one after: the script counts in
--          the one of the three holding its own `now` (the nearest when the clocks are
--          more than a window apart).
--          For a sketch (60_sketch.lua), KEYS[i] is its even window's string, the burst slot
--          holds the ARGV index of its cells and the warmup slot the KEYS index of its odd
--          window's string (both after the n limits' own).
--          For concurrency (65_concurrency.lua), W is the lease time and the burst slot holds
--          the lease an admitted request takes (or a refund releases; 0: none).
--          Flags of 32 and more: the limit may take a runtime override, and flags / 32
--          (rounded down) is the ARGV index of its rule's field (15_overrides.lua).
--          A quota group of the form "<group>@<k>": the limit has a penalty box whose
--          values start at ARGV[k] (85_ban.lua).
-- ARGV[#ARGV] n, the number of limits (KEYS may hold more: sketches' odd strings)
-- Returns { allowed, then per limit: allowed, remaining, reset_after_us, retry_after_us,
--           delay_us, never (0, 1 never, 2 banned, 2 + s a ban of step s started now:
--           85_ban.lua), then per sketch limit in order: its window's charged total and
--           saturated counters, then, only when an override applied, the array
--           { limit index, override text, ... } }, integers (booleans as 0/1).
--
-- Semantics (include/sluice/store/store.hpp): the request is allowed iff every non-shadow,
-- non-quota limit allows and, when there are quota groups, one group has no denying
-- non-shadow limit; then every limit that allowed is charged its own cost; otherwise nothing
-- is charged, except that count_rejected limits record the attempt either way. A limit that
-- allowed but is not charged (denied request) answers what a check (cost 0) says. Flags 4,
-- 8 and 16 change that as include/sluice/store/store.hpp (Charge, StoreLimit::refund) says:
-- such limits are written whatever the verdict, refunds and reports never deny, and a
-- refunded or reported limit answers what a check says on its new state (70_adjust.lua). A charged
-- state is written with a TTL equal to the limiter's ttl (ceil to ms) and deleted when that
-- ttl is 0.
--
-- Redis work per call: TIME, one MGET for all states, then one SET ... PX (or DEL) per
-- charged limit; a sketch limit adds two BITFIELD reads, and three BITFIELD calls and a
-- PEXPIREAT when charged.
local kStride = 9
local kReplyStride = 6
local kReadBatch = 1000  -- keys per MGET: unpack() must stay within Lua's C stack limit
-- The sketch hash seed, shared by every sidecar of this Redis: KEYS[1] the seed key,
-- ARGV = { 'sketch-seed', candidate }. The first candidate set wins; returns the seed.
if ARGV[1] == 'sketch-seed' then
  redis.call('SET', KEYS[1], ARGV[2], 'NX')
  return redis.call('GET', KEYS[1])
end
-- The admin side's override calls (15_overrides.lua).
if ARGV[1] == 'override' then
  return override_admin(KEYS, ARGV)
end

-- The algorithms' functions, built on first use in a call and shared by a batch's requests.
local sliding_window_log, sliding_window_counter, gcra, sketch, adjust, concurrency

-- Limit i of a request (its ARGV from `base`) on the state read from raw[i], for `cost`, at
-- `now`. A sketch also returns its window's charged total and saturated counters. Defined
-- once per call, not once per request (a closure is an allocation).
-- `state`, when given, is the state array to evaluate instead of raw[i]'s.
local function evaluate_limit(KEYS, ARGV, raw, now, i, base, cost, count_rejected, state)
  local algorithm = number(ARGV[base])
  local limit = number(ARGV[base + 1])
  local window = number(ARGV[base + 2])
  local a, b, c, t
  if state then
    a, b, c, t = state[1], state[2], state[3], state
  else
    a, b, c, t = read_state(raw[i])
  end
  if limit <= 0 or window <= 0 or algorithm == nil or algorithm < 0 or algorithm > 7
      or algorithm % 1 ~= 0 then
    -- Not a limit this script knows: a request that consumes nothing passes; anything
    -- else can never pass. The key is deleted if charged (ttl 0).
    local never = cost > 0
    return cost <= 0, 0, 0, never and kRetryNever or 0, 0, never, 0, nil
  elseif algorithm == 0 then
    return fixed_window(limit, window, count_rejected, a, b, now, cost)
  elseif algorithm == 6 then
    local start = number(ARGV[base + 3])
    local finish = start + window
    if now < start then
      start, finish = start - number(ARGV[base + 4]), start
    elseif now >= finish then
      start, finish = finish, finish + number(ARGV[base + 6])
    end
    return fixed_window(limit, window, count_rejected, a, b, now, cost, start, finish)
  elseif algorithm == 1 then
    sliding_window_log = sliding_window_log or make_sliding_window_log()
    return sliding_window_log(limit, window, number(ARGV[base + 4]), count_rejected, a, b, t,
                              now, cost)
  elseif algorithm == 2 then
    sliding_window_counter = sliding_window_counter or make_sliding_window_counter()
    return sliding_window_counter(limit, window, count_rejected, a, b, c, now, cost)
  elseif algorithm == 7 then
    concurrency = concurrency or make_concurrency()
    return concurrency(limit, window, number(ARGV[base + 3]), t, now, cost)
  elseif algorithm == 5 then
    sketch = sketch or make_sketch()
    return sketch(limit, window, count_rejected, KEYS[i], KEYS[number(ARGV[base + 6])],
                  ARGV, number(ARGV[base + 3]), now, cost)
  end
  gcra = gcra or make_gcra()
  return gcra(algorithm == 4, limit, window, number(ARGV[base + 3]), number(ARGV[base + 6]),
              count_rejected, a, b, c, now, cost)
end

-- evaluate_limit with `held` of reservation holds counted against the limit (80_holds.lua),
-- as sluice::evaluateWithHolds: allowed only when the request fits with them; `remaining`
-- is net of them; when only the holds stand in the way of a cost the limit could take,
-- retry_after is `holds_retry` (until the first hold expires). The state is the request's.
local function evaluate_held(KEYS, ARGV, raw, now, i, base, cost, count_rejected, held,
                             holds_retry)
  local ok, remaining, reset_after, retry_after, delay, never, ttl, next_state =
      evaluate_limit(KEYS, ARGV, raw, now, i, base, cost, count_rejected)
  if held <= 0 or not ok then
    return ok, remaining, reset_after, retry_after, delay, never, ttl, next_state
  end
  local gate_ok, _, _, gate_retry, _, gate_never =
      evaluate_limit(KEYS, ARGV, raw, now, i, base, cost + held, count_rejected)
  if gate_ok then
    return ok, max(remaining - held, 0), reset_after, retry_after, delay, never, ttl, next_state
  end
  return false, max(remaining + cost - held, 0), reset_after,
      gate_never and max(holds_retry, 1) or gate_retry, 0, false, ttl, next_state
end

-- Writes a charged limit's next state: SET with its ttl (ceil to ms), DEL at ttl 0.
local function write_state(key, state, ttl)
  if ttl > 0 then
    local ms = floor((ttl + 999) / 1000) + sluice_ttl_slack_ms
    redis.call('SET', key, cmsgpack.pack(state), 'PX', ms_string(ms))
  else
    redis.call('DEL', key)
  end
end

-- write_state for a fixed window's next state, `a` the window start of the state it
-- replaces. Rewritten within that same window, the key keeps the expiry the window's first
-- write gave it (SET ... KEEPTTL): the window's end rounded up to whole ms, what PX would
-- set again give or take a millisecond of rounding, without Redis setting an expiry and
-- rewriting the command for its replicas each time. A first write of a window (or a key
-- whose state was not ours) gets its PX, so a key that somehow lost its TTL gets one back
-- within a window. Returns redis.pcall's answer (a table with `err` when refused).
local function write_window(key, a, state, ttl)
  if ttl <= 0 then
    return redis.pcall('DEL', key)
  end
  local packed = cmsgpack.pack(state)
  if a == state[1] then
    local done = redis.pcall('SET', key, packed, 'KEEPTTL')
    -- A server before 6.0 knows no KEEPTTL: the expiry is set as below.
    if type(done) ~= 'table' or not done.err then
      return done
    end
  end
  local ms = floor((ttl + 999) / 1000) + sluice_ttl_slack_ms
  return redis.pcall('SET', key, packed, 'PX', ms_string(ms))
end

-- The most common request, decided without the general path's bookkeeping: one
-- fixed_window limit (L > 0, W > 0) that is neither shadow, nor count_rejected, nor in a
-- quota group. Its answer is the general path's: the request is allowed iff the limit
-- allows; an allowed request charges it (SET with its ttl, DEL at ttl 0); a denied one
-- writes nothing. Returns nil for any other request.
local function decide_plain(KEYS, ARGV, n)
  -- Flags of 32 and more only say the limit may be overridden (15_overrides.lua).
  if n ~= 1 or ARGV[2] ~= '0' or (ARGV[7] ~= '0' and number(ARGV[7]) % 32 ~= 0)
      or ARGV[10] ~= '-1' then
    return nil
  end
  local limit = number(ARGV[3])
  local window = number(ARGV[4])
  if limit == nil or window == nil or limit <= 0 or window <= 0 then
    return nil
  end
  local cost = max(number(ARGV[9]), 0)
  -- MGET, not GET: a key of another type reads as nil, and the ACL docs/redis.md gives
  -- Sluice's user has no +get (a GET refused with NOPERM must not read as a fresh bucket).
  -- The holds key, read on its own: a multi-key read of a slot being imported fails when
  -- one key is absent (80_holds.lua).
  -- In a batch, both may have been read ahead (99_read_ahead.lua).
  local at = read_ahead_at
  if at then
    if read_ahead_values[at + 1] then
      return nil
    end
  elseif redis.call('MGET', KEYS[1] .. kHoldSuffix)[1] then
    return nil  -- the bucket has reservation holds: the general path counts them
  end
  local a, b = read_state(at and read_ahead_values[at] or redis.call('MGET', KEYS[1])[1])
  local ok, remaining, reset_after, retry_after, delay, never, ttl, next_state =
      fixed_window(limit, window, false, a, b, sluice_now, cost)
  if ok then
    local written = write_window(KEYS[1], a, next_state, ttl)
    if type(written) == 'table' and written.err then
      error(written)  -- as redis.call would raise it
    end
    return { 1, 1, remaining, reset_after, retry_after, delay, never and 1 or 0 }
  end
  return { 0, 0, remaining, reset_after, retry_after, delay, never and 1 or 0 }
end

-- The holds of a request's buckets (80_holds.lua), or nil when none has any and the request
-- is no reservation step. Reads every bucket's holds string, refreshes it (expired holds
-- counted), applies a commit or a release, and sums the live holds per limit.
-- Returns { op, held[i], retry[i], expired[i], sets[i], dirty[i], status, amount,
-- expires_at, charge_none }.
local holds_lib
local function read_holds(KEYS, ARGV, n, now, hold_at)
  local names, index, keys = {}, {}, {}
  for i = 1, n do
    keys[i] = KEYS[i] .. kHoldSuffix
    if ARGV[2 + (i - 1) * kStride] ~= '5' then
      names[#names + 1] = keys[i]
      index[#index + 1] = i
    end
  end
  -- One key per read: a multi-key read of a slot being imported fails when one is absent.
  local raw = {}
  for j = 1, #names do
    raw[j] = redis.call('MGET', names[j])[1]
  end
  local any = hold_at ~= nil
  for j = 1, #raw do
    any = any or (raw[j] and true or false)
  end
  if not any then
    return nil
  end
  holds_lib = holds_lib or make_holds()
  local h = { op = 0, held = {}, retry = {}, expired = {}, sets = {}, dirty = {}, status = 0,
              amount = 0, expires_at = 0, charge_none = false, keys = keys }
  for i = 1, n do
    h.held[i], h.retry[i], h.expired[i], h.dirty[i] = 0, 0, 0, false
  end
  for j = 1, #index do
    local i = index[j]
    local t, _, _, expired, changed = holds_lib.refresh(holds_lib.decode(raw[j]), now)
    h.sets[i], h.expired[i], h.dirty[i] = t, expired, changed
  end
  if hold_at then
    h.op = number(ARGV[hold_at])
    h.nonce = ARGV[hold_at + 1]
    h.ttl = number(ARGV[hold_at + 2])
    h.keep = number(ARGV[hold_at + 3])
    h.id_expiry = number(ARGV[hold_at + 4])
    h.max_holds = number(ARGV[hold_at + 5])
  end
  if h.op == 2 or h.op == 3 then
    h.status, h.amount = holds_lib.settle(h.sets, n, h.op, h.nonce, h.id_expiry, h.keep, now)
    if h.status ~= 9 and h.status ~= 7 and h.status ~= 8 then
      for i = 1, n do
        h.dirty[i] = h.dirty[i] or h.sets[i] ~= nil
      end
    end
  end
  h.charge_none = h.op == 1 or h.op == 3 or (h.op == 2 and h.status ~= 4 and h.status ~= 5)
  for i = 1, n do
    local t = h.sets[i]
    if t then
      local _, held, first = holds_lib.refresh(t, now)
      h.held[i] = held
      h.retry[i] = first > now and first - now or 0
    end
  end
  return h
end

-- After the verdict: a reserve that is allowed holds its amount on every bucket (all or
-- nothing: a bucket at max_holds live holds refuses it, status 3 full); a denied one is
-- status 2. Writes the holds strings that changed. Returns the request's verdict.
local function finish_holds(KEYS, ARGV, n, now, h, allowed)
  if h.op == 1 then
    h.status = allowed and 1 or 2
    if allowed then
      for i = 1, n do
        local t = h.sets[i]
        if h.max_holds > 0 and t and holds_lib.live(t) >= h.max_holds then
          h.status, allowed = 3, false
        end
      end
    end
    if allowed then
      h.expires_at = now + h.ttl
      for i = 1, n do
        local t = h.sets[i]
        if t and not holds_lib.find(t, h.nonce) then
          holds_lib.add(t, h.nonce, number(ARGV[2 + (i - 1) * kStride + 7]), h.expires_at,
                        h.expires_at + h.keep, h.max_holds)
          h.dirty[i] = true
        end
      end
    end
  end
  local written = {}
  for i = 1, n do
    local key = h.keys[i]
    if h.dirty[i] and h.sets[i] and not written[key] then
      written[key] = true
      holds_lib.write(key, h.sets[i], now)
    end
  end
  return allowed
end

-- Counts each denial of a limit with a penalty box (85_ban.lua); the one that starts a ban
-- answers as banned already (2 + its step in the never slot). A key named twice counts once.
local function record_bans(KEYS, ARGV, n, now, bans, reply)
  local struck
  for i = 1, n do
    local at = bans.at[i]
    local r = 2 + (i - 1) * kReplyStride
    if at and not bans.untl[i] and reply[r] == 0
        and number(ARGV[2 + (i - 1) * kStride + 7]) > 0 then
      struck = struck or {}
      if not struck[KEYS[i]] then
        struck[KEYS[i]] = true
        local started, untl, step = ban_strike(KEYS[i], ARGV, at, bans.state[i], now)
        if started then
          reply[r + 1], reply[r + 2], reply[r + 3], reply[r + 4] = 0, untl - now, untl - now, 0
          reply[r + 5] = 2 + step
        end
      end
    end
  end
end

-- One request (its own KEYS and ARGV, laid out as above), decided on sluice_now.
local function decide(KEYS, ARGV)
  local now = sluice_now
  local n = number(ARGV[#ARGV])
  local hold_at  -- the reservation step's arguments (80_holds.lua), when there is one
  if n < 0 then
    n = -n
    hold_at = #ARGV - 6
  end
  if n == 0 then
    return { 1 }
  end
  -- The penalty box first (85_ban.lua): a lone limit whose client is banned is refused on
  -- one read, its bucket and its overrides unread (a ban refuses whatever the limit says).
  -- A lone limit's quota group slot is ARGV[10]: '-1' when it has no ban.
  local bans, bans_read
  if n == 1 and not hold_at and ARGV[10] ~= '-1' then
    bans, bans_read = read_bans(KEYS, ARGV, n, now, kStride), true
    if bans and bans.untl[1] and (floor(number(ARGV[7]) / 2) % 2) == 0 then
      local wait = bans.untl[1] - now
      return { 0, 0, 0, wait, wait, 0, 2 }
    end
  end
  -- The runtime overrides of its limits, if any: their numbers replace the rule's.
  local overridden
  ARGV, overridden = apply_overrides(KEYS, ARGV, n, now)
  if not hold_at then
    local plain = decide_plain(KEYS, ARGV, n)
    if plain then
      if overridden then
        plain[#plain + 1] = overridden
      end
      return plain
    end
  end

  -- The other penalty boxes: a banned limit is answered without its bucket below.
  if not bans_read then
    bans = read_bans(KEYS, ARGV, n, now, kStride)
  end

  -- A sketch's strings are read with BITFIELD (60_sketch.lua), not with the buckets' MGET.
  local has_sketch = false
  for i = 1, n do
    if ARGV[2 + (i - 1) * kStride] == '5' then
      has_sketch = true
      break
    end
  end

  -- MGET reads a key of another type as nil, like an absent key: a fresh bucket.
  local raw
  if has_sketch then
    raw = {}
    local plain = {}
    for i = 1, n do
      if ARGV[2 + (i - 1) * kStride] ~= '5' then
        plain[#plain + 1] = i
      end
    end
    for first = 1, #plain, kReadBatch do
      local names = {}
      for j = first, min(#plain, first + kReadBatch - 1) do
        names[#names + 1] = KEYS[plain[j]]
      end
      local part = redis.call('MGET', unpack(names))
      for j = 1, #part do
        raw[plain[first + j - 1]] = part[j]
      end
    end
  elseif n <= kReadBatch then
    raw = redis.call('MGET', unpack(KEYS, 1, n))
  else
    raw = {}
    for first = 1, n, kReadBatch do
      local part = redis.call('MGET', unpack(KEYS, first, min(n, first + kReadBatch - 1)))
      for j = 1, #part do
        raw[first + j - 1] = part[j]
      end
    end
  end

  local holds = read_holds(KEYS, ARGV, n, now, hold_at)
  local held = holds and holds.held
  local charge_none = holds ~= nil and holds.charge_none

  -- reply: the answer, filled in place (sized for one limit, grows for more).
  -- pending: per limit, the state array to store, its ttl, and count_rejected.
  local reply = { 1, 0, 0, 0, 0, 0, 0 }
  local pending = { false, 0, false }
  local allowed = true
  local counted = false  -- a limit has flag 4: every limit is charged whatever the verdict
  local groups, failed  -- quota groups seen / with a denying limit (only built when used)
  local sketch_stats  -- per sketch limit: charged, saturated (only built when used)

  for i = 1, n do
    local base = 2 + (i - 1) * kStride
    local flags = number(ARGV[base + 5])
    local count_rejected = (flags % 2) == 1
    local shadow = (floor(flags / 2) % 2) == 1
    local every = (floor(flags / 4) % 2) == 1
    local report = (floor(flags / 8) % 2) == 1
    local refund = (floor(flags / 16) % 2) == 1
    counted = counted or every
    local cost = max(number(ARGV[base + 7]), 0)
    local group = group_and_ban(ARGV[base + 8])
    local is_sketch = ARGV[base] == '5'
    local ok, remaining, reset_after, retry_after, delay, never, ttl, next_state, charged,
        saturated
    local known = number(ARGV[base + 1]) > 0 and number(ARGV[base + 2]) > 0
    local held_i = held and held[i] or 0
    local banned = bans ~= nil and bans.untl[i] ~= nil
    if banned then
      -- In the penalty box: refused until the ban ends, the bucket left alone.
      local wait = bans.untl[i] - now
      ok, remaining, reset_after, retry_after, delay, never, ttl, next_state =
          false, 0, wait, wait, 0, false, 0, nil
    elseif charge_none then
      -- A reservation step that charges nothing: a reserve asks for its amount with the
      -- other holds counted; a release or a refused commit answers a check.
      ok, remaining, reset_after, retry_after, delay, never, ttl, next_state =
          evaluate_held(KEYS, ARGV, raw, now, i, base, holds.op == 1 and cost or 0,
                        count_rejected, held_i, holds.retry[i])
    elseif (refund or report) and not is_sketch and known and cost > 0 then
      -- Applied whatever the limit says; the answer is a check on the new state.
      adjust = adjust or make_adjust()
      local state = adjust(ARGV, raw, now, i, base, cost, refund)
      ok, remaining, reset_after, retry_after, delay, never, ttl, next_state =
          evaluate_limit(KEYS, ARGV, raw, now, i, base, 0, false, state)
      if report then
        remaining = max(remaining - held_i, 0)
      end
    elseif refund or (report and not is_sketch) then
      ok, remaining, reset_after, retry_after, delay, never, ttl, next_state, charged,
          saturated = evaluate_limit(KEYS, ARGV, raw, now, i, base, 0, false)
      if report and not refund then
        remaining = max(remaining - held_i, 0)
      end
      if is_sketch then
        next_state = nil  -- a sketch takes no refund
      end
    else
      -- A sketch in a report or counted request records the attempt as count_rejected does.
      if held_i > 0 then
        ok, remaining, reset_after, retry_after, delay, never, ttl, next_state =
            evaluate_held(KEYS, ARGV, raw, now, i, base, cost, count_rejected, held_i,
                          holds.retry[i])
      else
        ok, remaining, reset_after, retry_after, delay, never, ttl, next_state, charged,
            saturated = evaluate_limit(KEYS, ARGV, raw, now, i, base, cost,
                                       count_rejected or (is_sketch and (every or report)))
      end
      if every and not ok and not is_sketch and known and cost > 0 then
        -- Counted although it denied: the same request's answer on the charged bucket.
        adjust = adjust or make_adjust()
        local state = adjust(ARGV, raw, now, i, base, cost, false)
        local _, _, _, _, _, _, check_ttl, check_state =
            evaluate_limit(KEYS, ARGV, raw, now, i, base, 0, false, state)
        local was_never = never
        ok, remaining, reset_after, retry_after, delay, never =
            evaluate_limit(KEYS, ARGV, raw, now, i, base, cost, false, state)
        ok, never = false, was_never
        ttl, next_state = check_ttl, check_state
      end
    end
    if is_sketch then
      sketch_stats = sketch_stats or {}
      sketch_stats[#sketch_stats + 1] = charged
      sketch_stats[#sketch_stats + 1] = saturated
      -- A sketch writes through its own function (or nothing): never SET/DEL KEYS[i].
      next_state = next_state or 'none'
    end
    local r = 2 + (i - 1) * kReplyStride
    reply[r] = ok and 1 or 0
    reply[r + 1] = remaining
    reply[r + 2] = reset_after
    reply[r + 3] = retry_after
    reply[r + 4] = delay
    reply[r + 5] = never and 1 or (banned and 2 or 0)
    local p = 1 + (i - 1) * 3
    pending[p] = next_state or false
    pending[p + 1] = ttl
    -- Written whatever the verdict; a concurrency limit takes its lease only with an
    -- admitted request (a report or a counted denial takes none).
    pending[p + 2] = not charge_none and not banned
        and (count_rejected or every or report or refund)
        and (refund or ARGV[base] ~= '7')
    local denies = not shadow and not ok and not report and not refund
    if group >= 0 then
      groups = groups or {}
      failed = failed or {}
      groups[group] = true
      if denies then
        failed[group] = true
      end
    elseif denies then
      allowed = false
    end
  end
  if bans then
    record_bans(KEYS, ARGV, n, now, bans, reply)
  end
  if allowed and groups then
    -- Quota mode: the request passes while one quota descriptor still has room.
    allowed = false
    for g in pairs(groups) do
      if not failed[g] then
        allowed = true
        break
      end
    end
  end

  if not allowed and not charge_none then
    -- A denied request charges no limit that allowed (count_rejected ones aside): such a limit
    -- answers with its bucket as it is, a check's answer at the same instant. (In a counted
    -- request every other limit is written whatever the verdict: only a concurrency limit
    -- is answered so, as it takes no lease.)
    for i = 1, n do
      local r = 2 + (i - 1) * kReplyStride
      if reply[r] == 1 and not pending[1 + (i - 1) * 3 + 2] then
        local ok, remaining, reset_after, retry_after, delay, never =
            evaluate_held(KEYS, ARGV, raw, now, i, 2 + (i - 1) * kStride, 0, false,
                          held and held[i] or 0, holds and holds.retry[i] or 0)
        reply[r] = ok and 1 or 0
        reply[r + 1] = remaining
        reply[r + 2] = reset_after
        reply[r + 3] = retry_after
        reply[r + 4] = delay
        reply[r + 5] = never and 1 or 0
      end
    end
  end

  reply[1] = allowed and 1 or 0
  if sketch_stats then
    for j = 1, #sketch_stats do
      reply[1 + n * kReplyStride + j] = sketch_stats[j]
    end
  end
  if holds then
    allowed = finish_holds(KEYS, ARGV, n, now, holds, allowed)
    reply[1] = allowed and 1 or 0
    local at = #reply
    reply[at + 1] = holds.status
    reply[at + 2] = holds.expires_at
    reply[at + 3] = holds.amount
    for i = 1, n do
      reply[at + 3 + i] = holds.expired[i]
    end
  end
  if overridden then
    reply[#reply + 1] = overridden  -- last: after the sketches' and the holds' values
  end
  for i = 1, n do
    local p = 1 + (i - 1) * 3
    if charge_none then
      break
    end
    if (allowed and reply[2 + (i - 1) * kReplyStride] == 1) or pending[p + 2] then
      local ttl = pending[p + 1]
      local state = pending[p]
      if type(state) == 'function' then
        state()
      elseif state == 'none' then
        -- a sketch limit with nothing to record (a check, or a cost that can never pass)
      else
        write_state(KEYS[i], state, ttl)
      end
    end
  end
  return reply
end

-- A batch: several requests in one call, decided one after another (each atomic: nothing
-- else runs on Redis during the whole call). The first request's writes are read by the
-- second, exactly as if each had come in its own EVALSHA, one after the other.
--   ARGV[1]  'batch' (a request's ARGV[1] is a number, or empty in production)
--   ARGV[2]  m, the number of requests; ARGV[3]  d, the number of distinct argument lists
--   ARGV[2 + 2j], ARGV[3 + 2j]  request j's number of keys and the index (1..d) of its
--            argument list (the layout above): requests of one rule send the same list (a
--            request's arguments describe its limits and costs, its keys the client), so a
--            list is sent, and made into Lua strings, once per call instead of once per
--            request
--   then the d lists, each as its length followed by its arguments.
--   KEYS: every request's keys, in order.
-- Returns { reply of request 1, ..., reply of request m }: a request's reply is the array
-- above, or a string, the error that stopped it (a bad argument, a refused write) and that
-- fails this request alone. In production every request is decided on the one TIME read
-- at the start of the call: the requests are decided in order at one instant, which is
-- what separate calls arriving within the same microsecond would see. With the test-only
-- prelude each request is decided on its own ARGV[1].
-- Tables are built at their size in one step ({ unpack(...) }), not grown element by
-- element; unpack() stays within Lua's C stack limit (see kReadBatch).
local function slice(t, first, count)
  if count <= kReadBatch then
    return { unpack(t, first, first + count - 1) }
  end
  local out = {}
  for x = 1, count do
    out[x] = t[first + x - 1]
  end
  return out
end

if ARGV[1] == 'batch' then
  -- decide_plain for a batch's request whose bucket (value `raw`) was read ahead with no holds
  -- (99_read_ahead.lua), in a call without overrides: the same answer and write, without
  -- the lookups that the reads made ahead have already answered. `limit` = { L, W, cost },
  -- known valid (read_ahead's list_shape). A refused write fails this request alone, as an
  -- error raised in decide does: returns the reply, or the error's text.
  -- read_state, inlined for the one shape a fixed window writes: { start, count, 0 }.
  local function read_window(raw)
    if raw then
      local ok, t = pcall(cmsgpack.unpack, raw)
      if ok and type(t) == 'table' and #t == 3 and type(t[1]) == 'number'
          and type(t[2]) == 'number' and type(t[3]) == 'number' then
        return t[1], t[2]
      end
      return read_state(raw)
    end
    return 0, 0
  end

  local function decide_read_ahead(key, limit, raw)
    local a, b = read_window(raw)
    local ok, remaining, reset_after, retry_after, delay, never, ttl, next_state =
        fixed_window(limit[1], limit[2], false, a, b, sluice_now, limit[3])
    if not ok then
      return { 0, 0, remaining, reset_after, retry_after, delay, never and 1 or 0 }
    end
    local written = write_window(key, a, next_state, ttl)
    if type(written) == 'table' and written.err then
      return tostring(written.err)
    end
    return { 1, 1, remaining, reset_after, retry_after, delay, never and 1 or 0 }
  end

  -- decide_read_ahead for a request of a slot several requests share (99_read_ahead.lua):
  -- the slot's bucket as the requests before it left it is `slot` ({ a, b, stored, op, px,
  -- ttl }), and it is written once, by the slot's last request (write_slot), as the writes of
  -- its requests one after another would have left it: nothing reads the key in between.
  -- `stored` is the window start of what those writes would have left in Redis (0: no key),
  -- which decides, as write_window does, whether a write keeps the key's expiry or sets one:
  -- `px`, the ttl of the last write that set one (nil: the key keeps the one it had).
  local function decide_in_slot(limit, slot)
    local ok, remaining, reset_after, retry_after, delay, never, ttl, next_state =
        fixed_window(limit[1], limit[2], false, slot[1], slot[2], sluice_now, limit[3])
    if not ok then
      return { 0, 0, remaining, reset_after, retry_after, delay, never and 1 or 0 }
    end
    if ttl <= 0 then
      slot[1], slot[2], slot[3], slot[4], slot[5] = 0, 0, 0, 'del', nil
    else
      if slot[3] ~= next_state[1] then
        slot[5] = ttl
      end
      slot[1], slot[2], slot[3], slot[4] = next_state[1], next_state[2], next_state[1], 'set'
    end
    slot[6] = ttl
    return { 1, 1, remaining, reset_after, retry_after, delay, never and 1 or 0 }
  end

  -- The slot's one write; returns the error that refused it, or nil.
  local function write_slot(key, slot)
    local written
    if slot[4] == 'del' then
      written = redis.pcall('DEL', key)
    elseif slot[4] == 'set' then
      local state = { slot[1], slot[2], 0 }
      if slot[5] then
        written = write_window(key, false, state, slot[5])
      else
        written = write_window(key, slot[1], state, slot[6])
      end
    end
    if type(written) == 'table' and written.err then
      return tostring(written.err)
    end
    return nil
  end

  number_of, string_of = {}, {}
  local m = number(ARGV[2])
  local lists = {}
  local at = 4 + 2 * m
  for l = 1, number(ARGV[3]) do
    local count = number(ARGV[at])
    lists[l] = slice(ARGV, at + 1, count)
    at = at + 1 + count
  end
  -- Malformed arguments stop no read ahead: each request meets them (and fails alone) below.
  local ok, values, ahead, plain, absent, shared, more =
      pcall(make_read_ahead(), KEYS, ARGV, m, lists)
  if not ok then
    values, ahead, plain, absent, shared, more = nil, {}, {}, false, {}, {}
  end
  local slots = {}  -- the shared slots' buckets so far (decide_in_slot), by slot
  read_ahead_values, overrides_absent = values, absent
  local out = {}
  local key_at = 0
  local one_key = {}  -- a one-key request's KEYS (decide keeps no reference to it)
  for j = 1, m do
    local s = ARGV[2 + 2 * j]
    local key_count = s == '1' and 1 or number(s)
    s = ARGV[3 + 2 * j]
    local l = s == '1' and 1 or number(s)
    local args = lists[l]
    local at = ahead[j]
    if at and absent and not values[at + 1] then
      -- The common request: one plain fixed window, read ahead, nothing to override.
      if sluice_request_time then
        sluice_request_time(args)
      end
      local final = not more[j]  -- the last request of its slot
      if final and not shared[j] then
        out[j] = decide_read_ahead(KEYS[key_at + 1], plain[l], values[at])
      else
        -- Its bucket is another request's too: decided on what they left, written once.
        local slot = slots[at]
        if not slot then
          local a, b = read_window(values[at])
          slot = { a, b, a, nil, nil, 0 }
          slots[at] = slot
        end
        out[j] = decide_in_slot(plain[l], slot)
        if final then
          local err = write_slot(KEYS[key_at + 1], slot)
          if err then
            -- No hit of the slot was counted: each request that took one fails instead.
            for x = 1, j do
              local r = out[x]
              if ahead[x] == at and type(r) == 'table' and r[2] == 1 then
                out[x] = err
              end
            end
          end
        end
      end
    elseif args == nil then
      out[j] = 'ERR batch: request ' .. j .. ' names no argument list'
    else
      local keys
      if key_count == 1 then
        one_key[1] = KEYS[key_at + 1]
        keys = one_key
      else
        keys = slice(KEYS, key_at + 1, key_count)
      end
      -- A request that shares its slot reads its bucket itself: the one before it may
      -- have written it (with the overrides or holds that keep both off the fast path).
      read_ahead_at = not shared[j] and at or nil
      if sluice_request_time then
        sluice_request_time(args)
      end
      local done, reply = pcall(decide, keys, args)
      if done then
        out[j] = reply
      elseif type(reply) == 'table' and reply.err then
        out[j] = tostring(reply.err)
      else
        out[j] = 'ERR ' .. tostring(reply)
      end
    end
    key_at = key_at + key_count
  end
  return out
end
return decide(KEYS, ARGV)
