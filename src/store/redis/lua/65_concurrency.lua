-- concurrency: the exact port of src/limiter/concurrency.cpp (the contract is there). N = L,
-- T = W (the lease time). State: { 0, 0, 0, expiry_1, lease_1, expiry_2, lease_2, ... }, the
-- leases soonest expiry first; a lease counts while now < expiry, and every read drops the
-- others, so a lease nobody released comes back at its expiry on Redis's own clock (and the
-- key itself expires with its last lease). A lease number is below 2^53: exact in doubles.
-- Built by make_concurrency() on first use in a call (see 10_common.lua); returns
-- evaluate(limit, window, lease, t, now, cost) (the outcome tuple of 10_common.lua),
-- refund(limit, window, t, now, amount, lease) (the state after it) and change(op, limit,
-- window, t, now, lease) for a release or renew (found, expiry, outcome tuple).
local function make_concurrency()
  -- The live leases of state array `t` at `now`, as a flat array of (expiry, lease) pairs.
  local function live(t, now)
    local leases = {}
    if t ~= nil then
      for j = 4, #t, 2 do
        if t[j] > now then
          leases[#leases + 1] = t[j]
          leases[#leases + 1] = t[j + 1]
        end
      end
    end
    return leases
  end

  -- Inserts (expiry, lease) after every lease that expires no later (the order C++ keeps).
  local function add(leases, expiry, lease)
    local at = #leases + 1
    while at > 1 and leases[at - 2] > expiry do
      at = at - 2
    end
    table.insert(leases, at, lease)
    table.insert(leases, at, expiry)
  end

  local function remove_pair(leases, j)
    table.remove(leases, j)
    table.remove(leases, j)
  end

  local function find(leases, lease)
    for j = 1, #leases, 2 do
      if leases[j + 1] == lease then
        return j
      end
    end
    return nil
  end

  -- The answer on live `leases` for a request that takes `take` (0 or 1) leases.
  local function decide(limit, window, leases, now, take, lease)
    local used = #leases / 2
    local ok, remaining, retry = true, 0, 0
    if used + take <= limit then
      if take > 0 then
        add(leases, now + window, lease)
      end
      remaining = limit - used - take
    else
      ok = false
      remaining = max(0, limit - used)
      retry = max(1, leases[1] - now)
    end
    local ttl = 0
    if #leases > 0 then
      ttl = leases[#leases - 1] - now
    end
    local state = { 0, 0, 0 }
    for j = 1, #leases do
      state[3 + j] = leases[j]
    end
    return ok, remaining, ttl, retry, 0, false, ttl, state
  end

  local function evaluate(limit, window, lease, t, now, cost)
    local take = 0
    if cost > 0 then
      take = 1
    end
    return decide(limit, window, live(t, now), now, take, lease)
  end

  local function refund(limit, window, t, now, amount, lease)
    local leases = live(t, now)
    local j = find(leases, lease)
    if lease > 0 and amount > 0 and j then
      remove_pair(leases, j)
    end
    local _, _, _, _, _, _, _, state = decide(limit, window, leases, now, 0, 0)
    return state
  end

  -- A release (op 'release') or renew of `lease`: found is 1 (held: changed), 2 (held but
  -- expired: nothing changed) or 0 (not held).
  local function change(op, limit, window, t, now, lease)
    local found, expiry = 0, 0
    if t ~= nil and lease > 0 then
      for j = 4, #t, 2 do
        if t[j + 1] == lease then
          if t[j] > now then
            found = 1
          elseif found == 0 then
            found = 2
          end
          expiry = t[j]
        end
      end
    end
    if found ~= 1 then
      return found, expiry, decide(limit, window, live(t, now), now, 0, 0)
    end
    local leases = live(t, now)
    local j = find(leases, lease)
    expiry = leases[j]
    remove_pair(leases, j)
    if op == 'renew' then
      expiry = max(expiry, now + window)
      add(leases, expiry, lease)
    end
    return found, expiry, decide(limit, window, leases, now, 0, 0)
  end

  return evaluate, refund, change
end

-- A release or renew of one lease in every bucket that may hold it, atomically:
--   KEYS: the buckets' keys (one hash slot); ARGV[1] the test time slot, ARGV[2] 'lease',
--   ARGV[3] 'release' or 'renew', ARGV[4] the lease, then per key: L, W (us).
-- Returns per key: found (0 not held, 1 changed, 2 expired), expiry (us), remaining,
-- reset_after (us). A changed bucket is written with its new ttl (deleted at 0); the others
-- are left as they are.
if ARGV[2] == 'lease' then
  local _, _, change = make_concurrency()
  local op, lease = ARGV[3], tonumber(ARGV[4])
  local raw = redis.call('MGET', unpack(KEYS))
  local reply = {}
  for i = 1, #KEYS do
    local limit, window = tonumber(ARGV[3 + 2 * i]), tonumber(ARGV[4 + 2 * i])
    local _, _, _, t = read_state(raw[i])
    local found, expiry, _, remaining, reset_after, _, _, _, ttl, state =
        change(op, limit, window, t, sluice_now, lease)
    if found == 1 then
      if ttl > 0 then
        local ms = floor((ttl + 999) / 1000) + sluice_ttl_slack_ms
        redis.call('SET', KEYS[i], cmsgpack.pack(state), 'PX', ms)
      else
        redis.call('DEL', KEYS[i])
      end
    end
    reply[#reply + 1] = found
    reply[#reply + 1] = expiry
    reply[#reply + 1] = remaining
    reply[#reply + 1] = reset_after
  end
  return reply
end
